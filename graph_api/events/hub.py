"""This instance's subscriptions: events from the broker, dispatched by topic.

Each subscription has a bounded queue: a subscriber that does not read (a stalled client)
is ended with UNAVAILABLE once `queue_limit` events wait, instead of growing the server's
memory; what waits is dropped, since its client must read the current state anyway. The
subscriptions of one websocket form a `Group`: when one falls behind they all end, and the
connection is told to close (its client hears, rather than resubscribing past a gap without
knowing). A subscription's `Pace` tells whose fault its full queue is: when the time went to
resolving events rather than to sending them, the server is too slow for the events'
rate (or burst), and only that subscription ends, with an error that says so.
Each subscription names its holder (who asked: a token's subject, or an anonymous client's
address), and a holder has at most `max_per_holder` of the process's slots, so one client
cannot take them all from everyone else.
Events carry their stream position; an event at or before the last position seen of its
shard is dropped, so a stream reader that takes over after a crash and reads a few records
again never delivers them twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence

from graph_api import telemetry
from graph_api.errors import ApiError, BadUserInput, Unavailable
from graph_api.events.changes import Event

log = logging.getLogger(__name__)

MAX_SHARDS_REMEMBERED = 10_000  # shards roll over every few hours on AWS; forget old ones
_END = None  # what a queue holds after its last event


class Group:
    """The subscriptions of one connection (a websocket), which end together when one of
    them falls behind: each ends with an error, then `on_overflow` is called, once, for the
    connection to be closed. Its other subscriptions wait behind the same stalled socket,
    and a client library reconnecting after the close would resubscribe them silently past
    the events dropped here."""

    def __init__(self, on_overflow: Callable[[], None]) -> None:
        self.members: set[Subscription] = set()
        self.overflowed = False
        self._on_overflow = on_overflow

    def overflow(self, behind: Subscription, limit: int) -> None:
        if self.overflowed:
            return
        self.overflowed = True
        for member in list(self.members):
            if member is not behind:
                member.drop(
                    Unavailable(
                        f"another subscription of this connection fell {limit} events behind,"
                        " so the connection is closed; subscribe again and read the current state"
                    )
                )
        behind.drop(_behind(limit))
        self._on_overflow()


def _behind(limit: int) -> Unavailable:
    return Unavailable(
        f"this subscription fell {limit} events behind and was ended;"
        " subscribe again and read the current state"
    )


def _server_behind(limit: int) -> Unavailable:
    return Unavailable(
        f"this server resolves this subscription's events more slowly than they come:"
        f" {limit} waited (GRAPH_API_SUBSCRIPTION_QUEUE), so it was ended; the fault is the"
        " server's, not your client's: subscribe again (a lighter selection helps)"
    )


class Pace:
    """Where one operation's time went since its subscription last caught up (waited for
    an event): sending its results to the client, or the rest (resolving them here).

    The transport's side marks its sends (`sending`); the subscription marks when it caught
    up. A send to a client that reads returns at once (the socket takes it), so a queue that
    filled while a send waits, or while sends took most of the time, is the client's (it
    reads too slowly, or not at all); otherwise the server resolved too slowly."""

    def __init__(self) -> None:
        self._since = time.monotonic()
        self._sent = 0.0  # seconds in finished sends since `_since`
        self._send_started: float | None = None

    def caught_up(self) -> None:
        self._since, self._sent = time.monotonic(), 0.0

    @property
    def waiting_on_client(self) -> bool:
        """Whether a send is under way: the client has not taken what was sent before."""
        return self._send_started is not None

    @contextlib.contextmanager
    def sending(self) -> Iterator[None]:
        started = self._send_started = time.monotonic()
        try:
            yield
        finally:
            self._sent += time.monotonic() - started
            self._send_started = None

    def client_behind(self) -> bool:
        if self.waiting_on_client:
            return True
        return self._sent * 2 >= time.monotonic() - self._since


class Subscription:
    """One subscriber's events, in the order they were published."""

    def __init__(
        self,
        hub: Hub,
        topics: frozenset[str],
        queue_limit: int,
        group: Group | None = None,
        pace: Pace | None = None,
        holder: str | None = None,
    ) -> None:
        self.topics = topics
        self.holder = holder
        self._hub = hub
        self._limit = queue_limit
        self._group = group
        self._pace = pace
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._error: ApiError | None = None
        self._ended = False
        if group is not None:
            group.members.add(self)

    def offer(self, event: Event) -> None:
        if self._ended:
            return
        metrics = telemetry.metrics
        if self._queue.qsize() >= self._limit:
            if metrics is not None:
                metrics.events_shed.inc()
            if self._pace is not None and not self._pace.client_behind():
                log.warning(
                    "a subscription's events came faster than this server resolved them:"
                    " %d waited (GRAPH_API_SUBSCRIPTION_QUEUE); ended it",
                    self._limit,
                )
                self.drop(_server_behind(self._limit))
            elif self._group is not None:
                self._group.overflow(self, self._limit)
            else:
                self.drop(_behind(self._limit))
            return
        self._queue.put_nowait(event)

    @property
    def backlog(self) -> int:
        """Events waiting to be taken."""
        return self._queue.qsize()

    @property
    def waiting_on_client(self) -> bool:
        return self._pace is not None and self._pace.waiting_on_client

    def end(self, error: ApiError | None = None) -> None:
        """Stop after what is queued; `error` is raised to the subscriber then (None: the
        subscription completes)."""
        if not self._ended:
            self._ended, self._error = True, error
            self._queue.put_nowait(_END)
            self._leave()

    def drop(self, error: ApiError) -> None:
        """Stop now: what is queued is dropped and `error` is raised to the subscriber next
        (it fell behind: the events would only delay the error, and it must re-read)."""
        if not self._ended:
            if telemetry.metrics is not None and self._queue.qsize():
                telemetry.metrics.events_shed.inc(self._queue.qsize())
            while not self._queue.empty():
                self._queue.get_nowait()
            self.end(error)

    def close(self) -> None:
        """The subscriber left: stop at once."""
        self._ended = True
        self._leave()

    def _leave(self) -> None:
        self._hub.forget(self)
        if self._group is not None:
            self._group.members.discard(self)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        waited = self._queue.empty()
        event = await self._queue.get()
        if waited and self._pace is not None:
            self._pace.caught_up()
        if event is None:
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        if telemetry.metrics is not None:  # delivered: handed to the subscriber's stream
            telemetry.metrics.events_delivered.inc()
        return event


class Hub:
    def __init__(
        self, *, max_subscriptions: int, queue_limit: int, max_per_holder: int | None = None
    ) -> None:
        self.max_subscriptions = max_subscriptions
        self.max_per_holder = max_per_holder
        self._held: Counter[str] = Counter()  # holder -> subscriptions held
        self.queue_limit = queue_limit
        self._by_topic: dict[str, set[Subscription]] = {}
        self._count = 0
        # shard -> the last sequence delivered, and the topics delivered at it
        self._last: OrderedDict[str, tuple[int, set[str]]] = OrderedDict()

    @property
    def size(self) -> int:
        return self._count

    def subscribe(
        self,
        topics: Iterable[str],
        group: Group | None = None,
        pace: Pace | None = None,
        holder: str | None = None,
    ) -> Subscription:
        """A subscription to `topics` for `holder` (None: not counted per holder)."""
        limit = self.max_per_holder
        if holder is not None and limit is not None and self._held[holder] >= limit:
            # The caller's own doing, like the per-connection limit; the message names no
            # one (a subject may be an email).
            raise BadUserInput(
                f"this caller holds its limit of {limit} subscriptions on this server"
                " (GRAPH_API_MAX_SUBSCRIPTIONS_PER_PRINCIPAL); complete one first",
                limit=limit,
            )
        if self._count >= self.max_subscriptions:
            raise Unavailable(
                f"this server holds its limit of {self.max_subscriptions} subscriptions;"
                " try again later"
            )
        subscription = Subscription(self, frozenset(topics), self.queue_limit, group, pace, holder)
        for topic in subscription.topics:
            self._by_topic.setdefault(topic, set()).add(subscription)
        self._count += 1
        if holder is not None:
            self._held[holder] += 1
        if telemetry.metrics is not None:
            telemetry.metrics.subscriptions.inc()
        return subscription

    def subscriptions(self) -> set[Subscription]:
        """Every subscription held."""
        return {s for listeners in self._by_topic.values() for s in listeners}

    def forget(self, subscription: Subscription) -> None:
        removed = False
        for topic in subscription.topics:
            listeners = self._by_topic.get(topic)
            if listeners is not None and subscription in listeners:
                listeners.discard(subscription)
                removed = True
                if not listeners:
                    del self._by_topic[topic]
        if removed:
            self._count -= 1
            if subscription.holder is not None:
                self._held[subscription.holder] -= 1
                if self._held[subscription.holder] <= 0:
                    del self._held[subscription.holder]
            if telemetry.metrics is not None:
                telemetry.metrics.subscriptions.dec()

    def deliver(self, events: Sequence[Event]) -> None:
        """A batch from the broker, in stream order (called on the event loop)."""
        for event in events:
            if self._seen(event):
                continue
            for subscription in tuple(self._by_topic.get(event.topic, ())):
                subscription.offer(event)
        while len(self._last) > MAX_SHARDS_REMEMBERED:
            self._last.popitem(last=False)

    def _seen(self, event: Event) -> bool:
        """Whether the event was delivered already; else remember it. One record makes
        events on several topics (a class's and its roster's), which may arrive apart."""
        shard, sequence = event.position.shard, event.position.sequence
        last, topics = self._last.get(shard, (-1, set()))
        if sequence < last or (sequence == last and event.topic in topics):
            return True
        if sequence > last:
            self._last[shard] = (sequence, {event.topic})
            self._last.move_to_end(shard)
        else:
            topics.add(event.topic)
        return False

    def gap(self, reason: str = "the broker's connection was lost") -> None:
        """Events may have been lost (the broker's connection dropped): end every
        subscription, so its client subscribes again and reads the current state."""
        log.warning(
            "events may have been missed (%s); ending %d subscription(s)", reason, self._count
        )
        self.end_all(
            Unavailable("events may have been missed; subscribe again and read the current state")
        )

    def end_all(self, error: ApiError | None = None) -> None:
        for listeners in list(self._by_topic.values()):
            for subscription in list(listeners):
                subscription.end(error)
