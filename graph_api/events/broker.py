"""The broker: how the stream reader's events reach the hub of every API instance.

One instance holds the table's stream lease and publishes; every instance, the holder
included, listens. `MemoryBroker` is that within one process; `RedisBroker` is Redis pub/sub
between instances (one channel per table). `make_broker` picks one from the settings.

Pub/sub is fire and forget, and that is enough: the durable record is the stream reader's
checkpoint, not the broker. What the broker owes the hub is to say when it may have missed
something: `on_gap` is called when the listener's connection was lost (or never made) and
is subscribed again, and when a message could not be read. The hub then ends the affected
subscriptions with an error, so that clients subscribe again and re-read, rather than
silently skipping events. Events published during the outage are not replayed.

Delivery may repeat an event (a publish retried after a lost reply, a reader that takes over
and re-reads): subscribers drop what they have seen by `Event.position`. A batch may arrive
as several consecutive deliveries (large batches are split), in publish order.
"""

from __future__ import annotations

import asyncio
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import RedisError

from graph_api.events.changes import Event
from graph_api.settings import REDIS_SCHEMES, Settings, SettingsError

log = logging.getLogger(__name__)

Deliver = Callable[[Sequence[Event]], None]
"""Called on the event loop with each batch, in publish order per publisher. It must not
block: the hub hands events to its subscribers' bounded queues and returns."""

OnGap = Callable[[str], None]
"""Called on the event loop when deliveries may have missed events; the argument says why
(for logs and the subscribers' error)."""

MAX_MESSAGE_BYTES: Final = 512 * 1024
"""A batch's JSON above this is sent as several messages: one huge message holds up Redis
and every subscriber's connection while it is copied."""

_FORMAT: Final = 1  # the message format's version: a reader refuses (and reports) another


class BrokerError(RuntimeError):
    """The broker cannot take events: it is closed."""


class BrokerUnavailable(BrokerError):
    """Publishing failed (the broker is down, unreachable, or did not answer in time).
    Some of the batch's messages may have been sent: publish the batch again (subscribers
    drop repeats by position)."""


class Broker(ABC):
    """What every broker does. Use it on one event loop: construct, `listen`, `start`,
    `publish` (the lease holder only), `close`.

    An abstract class rather than a Protocol because the listener bookkeeping is shared: a
    listener that raises is logged and does not stop the others, nor the broker."""

    def __init__(self) -> None:
        self._listeners: list[tuple[Deliver, OnGap]] = []
        self._closed = False

    def listen(self, deliver: Deliver, on_gap: OnGap) -> None:
        """Hear every batch published from now on, by any instance. Call before `start` to
        hear everything published once `start` returns."""
        self._listeners.append((deliver, on_gap))

    @abstractmethod
    async def start(self) -> None:
        """Begin listening. Returns once the broker delivers, or after a bounded wait when
        it cannot yet (then it keeps trying, and reports a gap when it can)."""

    @abstractmethod
    async def publish(self, events: Sequence[Event]) -> None:
        """Send one batch to every instance's listeners. Raises `BrokerUnavailable`, within
        a bounded time, when it cannot; `BrokerError` once closed. Calls are serialized, so
        batches keep the order they were published in."""

    @abstractmethod
    async def close(self) -> None:
        """Stop listening and release connections; idempotent."""

    def _deliver(self, events: Sequence[Event]) -> None:
        for deliver, _ in self._listeners:
            try:
                deliver(events)
            except Exception:
                log.exception("events: a listener failed on a batch of %d", len(events))

    def _gap(self, reason: str) -> None:
        log.warning("events: deliveries may have missed events: %s", reason)
        for _, on_gap in self._listeners:
            try:
                on_gap(reason)
            except Exception:
                log.exception("events: a listener failed on a gap")

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerError("the events broker is closed")


class MemoryBroker(Broker):
    """One process: `publish` hands the batch to the listeners before it returns. Nothing
    is lost, so there is never a gap."""

    async def start(self) -> None:
        self._check_open()

    async def publish(self, events: Sequence[Event]) -> None:
        self._check_open()
        if events:
            self._deliver(tuple(events))  # a copy: the publisher may reuse its list

    async def close(self) -> None:
        self._closed = True


class _Silent(Exception):
    """The subscription's connection answered nothing, not even PING, for too long."""


class RedisBroker(Broker):
    """Redis pub/sub on channel `graph-api:<table>:events`, one JSON message per batch (or
    per part of a large batch), through redis-py's asyncio client.

    Publishing and listening use separate clients: a subscribed connection can do nothing
    else. Publishing holds no queue (a batch that cannot be sent raises `BrokerUnavailable`
    after at most `timeout` seconds), so nothing grows while Redis is down.

    The listener is a task that subscribes on a fresh connection each time, with capped
    exponential backoff and jitter between attempts. It never lets redis-py reconnect a
    subscription by itself: redis-py would re-subscribe silently, hiding the gap. A
    connection that goes quiet is checked with PING every `heartbeat_seconds` and dropped
    when nothing answers for three of them (a half-open TCP connection never errors).

    `timeout` bounds a whole publish, each connection attempt and read, and how long `start`
    waits for the first subscription; `backoff_seconds` is the first and the longest wait
    between attempts to subscribe."""

    def __init__(
        self,
        url: str,
        table: str,
        *,
        timeout: float = 5.0,
        heartbeat_seconds: float = 10.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        backoff_seconds: tuple[float, float] = (0.1, 5.0),
    ) -> None:
        super().__init__()
        self.channel = f"graph-api:{table}:events"
        self.endpoint = _endpoint(url)  # for messages: never the URL, it may hold a password
        self._timeout = timeout
        self._heartbeat = heartbeat_seconds
        self._max_message_bytes = max_message_bytes
        self._backoff = backoff_seconds
        timeouts: dict[str, Any] = {
            "socket_connect_timeout": timeout,
            "socket_timeout": timeout,
        }
        # A publish is retried twice, quickly (a pooled connection Redis closed on restart
        # fails its first use); a repeat of a batch whose reply was lost is harmless.
        self._publisher = Redis.from_url(
            url, retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2), **timeouts
        )
        self._subscriber = Redis.from_url(url, retry=Retry(NoBackoff(), 0), **timeouts)
        self._publishing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._confirmed = 0  # subscriptions Redis confirmed since start
        self._lost = False  # a connection failed since the last confirmation
        self._failures = 0  # attempts failed in a row

    async def start(self) -> None:
        self._check_open()
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name=f"events {self.channel}")
        try:
            async with asyncio.timeout(self._timeout):
                await self._subscribed.wait()
        except TimeoutError:
            log.warning(
                "events: Redis at %s is not answering; subscriptions get no events until it "
                "does (retrying in the background)",
                self.endpoint,
            )

    async def publish(self, events: Sequence[Event]) -> None:
        self._check_open()
        messages = split_messages(events, self._max_message_bytes)
        try:
            async with asyncio.timeout(self._timeout), self._publishing:
                for message in messages:
                    await self._publisher.publish(self.channel, message)
        except TimeoutError as error:  # asyncio's; redis-py's own is a RedisError
            raise BrokerUnavailable(
                f"Redis at {self.endpoint} did not take a batch of {len(events)} events "
                f"within {self._timeout:g} s"
            ) from error
        except (RedisError, OSError) as error:
            raise BrokerUnavailable(
                f"Redis at {self.endpoint} did not take a batch of {len(events)} events: {error}"
            ) from error

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])  # not `await task`: never re-raise its cancel
        await self._subscriber.aclose()
        await self._publisher.aclose()

    async def _listen(self) -> None:
        while True:
            try:
                # A fresh PubSub each time, closed on the way out: see the class's docstring.
                async with self._subscriber.pubsub() as pubsub:
                    await pubsub.subscribe(self.channel)
                    await self._read(pubsub)
            except Exception as error:  # whatever it was, the listener must live on
                self._subscribed.clear()
                self._lost = True
                self._failures += 1
                if self._failures == 1:  # once per outage, not once per attempt
                    log.warning(
                        "events: not subscribed to Redis at %s (%s); retrying with backoff",
                        self.endpoint,
                        error,
                        exc_info=not isinstance(error, RedisError | OSError | _Silent),
                    )
                else:
                    log.debug("events: Redis at %s: %s", self.endpoint, error)
            low, high = self._backoff
            delay = min(high, low * 2 ** min(self._failures, 30))
            await asyncio.sleep(random.uniform(delay / 2, delay))

    async def _read(self, pubsub: PubSub) -> None:
        """Hand messages on until the connection fails (this only returns by raising)."""
        loop = asyncio.get_running_loop()
        heard = loop.time()
        while True:
            message = await pubsub.get_message(timeout=self._heartbeat)
            now = loop.time()
            if message is not None:
                heard = now
                if message["type"] == "message":
                    self._receive(message["data"])
                elif message["type"] == "subscribe":
                    self._on_subscribed()
            elif now - heard > 3 * self._heartbeat:
                raise _Silent(f"no answer to PING for {now - heard:.0f} s")
            elif now - heard >= self._heartbeat:
                await pubsub.ping()

    def _on_subscribed(self) -> None:
        """Redis confirmed the subscription: from here on every publish reaches us. Any
        confirmation but a first one without failures before it follows a time when we were
        not subscribed."""
        gap = self._confirmed > 0 or self._lost
        self._confirmed += 1
        self._lost = False
        if self._failures:
            log.info("events: subscribed to Redis at %s again", self.endpoint)
        self._failures = 0
        self._subscribed.set()
        if gap:
            self._gap(f"the subscription to Redis at {self.endpoint} was interrupted")

    def _receive(self, data: bytes) -> None:
        try:
            body = orjson.loads(data)
            if body["v"] != _FORMAT:
                raise ValueError(f"message format {body['v']!r}, not {_FORMAT}")
            events = tuple(Event.from_json(value) for value in body["events"])
        except (ValueError, KeyError, TypeError, IndexError) as error:
            log.error("events: unreadable message on %s: %r", self.channel, error)
            self._gap(f"a message on {self.channel} could not be read")
            return
        if events:
            self._deliver(events)


def split_messages(events: Sequence[Event], max_bytes: int = MAX_MESSAGE_BYTES) -> list[bytes]:
    """The batch as JSON messages of at most `max_bytes` each, in order (an event larger
    than that on its own goes alone). Each event is encoded once and the messages are
    joined from the parts, so splitting costs no second encoding."""
    head = b'{"v":%d,"events":[' % _FORMAT
    tail = b"]}"
    messages: list[bytes] = []
    parts: list[bytes] = []
    size = len(head) + len(tail)
    for event in events:
        part = orjson.dumps(event.as_json())
        if parts and size + 1 + len(part) > max_bytes:
            messages.append(head + b",".join(parts) + tail)
            parts, size = [], len(head) + len(tail)
        size += len(part) + (1 if parts else 0)  # the comma before it
        parts.append(part)
    if parts:
        messages.append(head + b",".join(parts) + tail)
    return messages


def make_broker(settings: Settings) -> Broker:
    """The broker `GRAPH_API_EVENTS_BROKER` names: "memory", or a Redis URL."""
    value = settings.events_broker
    if value == "memory":
        return MemoryBroker()
    if value.partition("://")[0].lower() in REDIS_SCHEMES:
        return RedisBroker(value, settings.table)
    raise SettingsError("GRAPH_API_EVENTS_BROKER must be memory or a redis:// or rediss:// URL")


def _endpoint(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 6379}"
