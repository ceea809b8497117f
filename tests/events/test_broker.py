"""The events broker: in process, and Redis pub/sub between API instances.

The Redis tests run Debian's redis-server (tests/support.py's `RedisServer`), one per test,
and use two RedisBroker objects as two API instances. They wait on conditions, never on the
clock.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio
from support import RedisServer, running_redis

from graph_api.events.broker import (
    MAX_MESSAGE_BYTES,
    BrokerError,
    BrokerUnavailable,
    MemoryBroker,
    RedisBroker,
    make_broker,
    split_messages,
)
from graph_api.events.changes import Event, Position
from graph_api.settings import Settings, SettingsError

BOUND = 60.0  # seconds: generous, for a busy machine; only a hang reaches it


def events(first: int, count: int, shard: str = "shard-1") -> tuple[Event, ...]:
    return tuple(
        Event(f"Student:stu-{n}", "UPDATED", f"stu-{n}", None, Position(shard, n))
        for n in range(first, first + count)
    )


class Recorder:
    """A listener: what it heard, batches and gaps, in the order it heard them."""

    def __init__(self) -> None:
        self.heard: list[tuple[Event, ...] | str] = []

    def deliver(self, batch: Sequence[Event]) -> None:
        self.heard.append(tuple(batch))

    def on_gap(self, reason: str) -> None:
        self.heard.append(reason)

    @property
    def batches(self) -> list[tuple[Event, ...]]:
        return [entry for entry in self.heard if isinstance(entry, tuple)]

    @property
    def events(self) -> list[Event]:
        return [event for batch in self.batches for event in batch]

    @property
    def gaps(self) -> list[str]:
        return [entry for entry in self.heard if isinstance(entry, str)]


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(BOUND):
        while not condition():
            await asyncio.sleep(0.02)
    assert condition(), what


def run(scenario: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(scenario, BOUND * 3))


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path) as server:
        yield server


def listening(url: str, table: str = "school", **options: Any) -> tuple[RedisBroker, Recorder]:
    broker = RedisBroker(url, table, **options)
    recorder = Recorder()
    broker.listen(recorder.deliver, recorder.on_gap)
    return broker, recorder


# The in-process broker


def test_memory_broker_delivers_every_batch_in_order_to_every_listener() -> None:
    async def scenario() -> None:
        broker = MemoryBroker()
        first, second = Recorder(), Recorder()
        broker.listen(first.deliver, first.on_gap)
        broker.listen(second.deliver, second.on_gap)
        await broker.start()
        batch = list(events(1, 3))
        await broker.publish(batch)
        batch.clear()  # the publisher reusing its list changes nothing delivered
        await broker.publish(events(4, 2))
        await broker.publish([])
        for recorder in (first, second):
            assert recorder.heard == [events(1, 3), events(4, 2)]
        await broker.close()
        with pytest.raises(BrokerError, match="closed"):
            await broker.publish(events(6, 1))

    run(scenario())


def test_a_failing_listener_neither_stops_the_others_nor_fails_the_publisher(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(batch: Sequence[Event]) -> None:
        raise RuntimeError("hub bug")

    async def scenario() -> None:
        broker = MemoryBroker()
        recorder = Recorder()
        broker.listen(broken, recorder.on_gap)
        broker.listen(recorder.deliver, recorder.on_gap)
        await broker.start()
        await broker.publish(events(1, 2))
        assert recorder.heard == [events(1, 2)]

    run(scenario())
    assert "a listener failed" in caplog.text


# Settings


def test_the_broker_is_in_process_by_default() -> None:
    assert Settings.from_env({}).events_broker == "memory"
    assert isinstance(make_broker(Settings()), MemoryBroker)
    settings = Settings.from_env({"GRAPH_API_EVENTS_BROKER": " Memory "})
    assert isinstance(make_broker(settings), MemoryBroker)


@pytest.mark.parametrize("url", ["redis://cache:6379/0", "rediss://:pw@cache.example.org"])
def test_a_redis_url_makes_a_redis_broker_with_a_channel_per_table(url: str) -> None:
    settings = Settings.from_env({"GRAPH_API_EVENTS_BROKER": url, "GRAPH_API_TABLE": "prod"})
    assert settings.events_broker == url
    assert "pw" not in repr(settings)
    broker = make_broker(settings)
    assert isinstance(broker, RedisBroker)
    assert broker.channel == "graph-api:prod:events"
    assert broker.endpoint.startswith("cache")


@pytest.mark.parametrize(
    "value",
    ["kafka://broker:9092", "redis-cache", "cache:6379", "redis://:s3cret@/0", "redis://h:port"],
)
def test_any_other_broker_is_a_settings_error_that_does_not_repeat_it(value: str) -> None:
    with pytest.raises(SettingsError, match="GRAPH_API_EVENTS_BROKER") as caught:
        Settings.from_env({"GRAPH_API_EVENTS_BROKER": value})
    assert value not in str(caught.value)


def test_make_broker_refuses_settings_made_in_code_with_another_broker() -> None:
    with pytest.raises(SettingsError, match="GRAPH_API_EVENTS_BROKER"):
        make_broker(Settings(events_broker="kafka://broker:9092"))


# Redis


def test_every_instance_hears_what_one_publishes_in_order(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        publisher, at_publisher = listening(redis_server.url)
        other, at_other = listening(redis_server.url)
        elsewhere, at_elsewhere = listening(redis_server.url, table="another-table")
        for broker in (publisher, other, elsewhere):
            await broker.start()
        batches = [events(1, 3), events(4, 1), events(5, 50)]
        for batch in batches:
            await publisher.publish(batch)
        await wait_until(lambda: len(at_publisher.heard) >= 3, "three batches at the publisher")
        await wait_until(lambda: len(at_other.heard) >= 3, "three batches at the other")
        assert at_publisher.heard == batches
        assert at_other.heard == batches

        # One channel per table: the other table's batch, then one more of ours, which
        # would come after it if ours heard the other table's.
        await elsewhere.publish(events(100, 1, shard="elsewhere"))
        await wait_until(lambda: len(at_elsewhere.heard) == 1, "the other table's batch")
        await publisher.publish(events(55, 1))
        await wait_until(lambda: len(at_other.heard) == 4, "our fourth batch")
        assert at_other.heard == [*batches, events(55, 1)]
        assert at_elsewhere.heard == [events(100, 1, shard="elsewhere")]
        for broker in (publisher, other, elsewhere):
            await broker.close()

    run(scenario())


def test_a_redis_restart_is_reported_as_a_gap_then_deliveries_resume(
    redis_server: RedisServer,
) -> None:
    async def scenario() -> None:
        publisher = RedisBroker(redis_server.url, "school")
        listener, heard = listening(redis_server.url, backoff_seconds=(0.05, 0.5))
        await listener.start()
        await publisher.publish(events(1, 2))
        await wait_until(lambda: len(heard.heard) == 1, "the first batch")

        redis_server.kill()
        # Nothing can take events now: a clear error, not a hang (bounded by `run`).
        with pytest.raises(BrokerUnavailable, match=f"127.0.0.1:{redis_server.port}"):
            await publisher.publish(events(3, 1))
        await asyncio.to_thread(redis_server.start)

        await wait_until(lambda: heard.gaps != [], "a gap after the reconnect")
        await publisher.publish(events(4, 2))
        await wait_until(lambda: len(heard.batches) == 2, "the batch after the restart")
        assert heard.heard[0] == events(1, 2)
        assert "interrupted" in heard.heard[1]
        assert heard.heard[2:] == [events(4, 2)]
        await publisher.close()
        await listener.close()

    run(scenario())


def test_a_listener_started_before_redis_subscribes_when_it_comes_and_reports_a_gap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="graph_api.events.broker")
    with running_redis(tmp_path) as server:
        server.kill()  # a port of our own, nothing on it yet

        async def scenario() -> None:
            listener, heard = listening(server.url, timeout=0.5, backoff_seconds=(0.05, 0.5))
            await listener.start()  # returns: the API serves while Redis is away
            assert heard.heard == []
            await asyncio.to_thread(server.start)
            await wait_until(lambda: heard.gaps != [], "a gap once subscribed")
            publisher = RedisBroker(server.url, "school")
            await publisher.publish(events(1, 1))
            await wait_until(lambda: len(heard.batches) == 1, "the batch")
            assert heard.batches == [events(1, 1)]
            await publisher.close()
            await listener.close()

        run(scenario())
    assert "is not answering" in caplog.text


def test_a_silent_connection_is_dropped_and_reported_as_a_gap(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGSTOP: the connection stays open and nothing answers, as when the network between
    us and Redis dies; only the listener's PINGs can tell."""
    caplog.set_level(logging.WARNING, logger="graph_api.events.broker")

    async def scenario() -> None:
        listener, heard = listening(
            redis_server.url, timeout=1.0, heartbeat_seconds=0.2, backoff_seconds=(0.05, 0.2)
        )
        await listener.start()
        redis_server.pause()
        try:
            await wait_until(lambda: "not subscribed" in caplog.text, "the silence noticed")
        finally:
            redis_server.resume()
        await wait_until(lambda: heard.gaps != [], "a gap once subscribed again")
        publisher = RedisBroker(redis_server.url, "school")
        await publisher.publish(events(1, 1))
        await wait_until(lambda: heard.batches == [events(1, 1)], "the batch")
        await publisher.close()
        await listener.close()

    run(scenario())


def test_publishing_with_redis_down_fails_clearly_without_naming_the_password(
    redis_server: RedisServer,
) -> None:
    redis_server.kill()

    async def scenario() -> None:
        url = f"redis://:s3cret@127.0.0.1:{redis_server.port}/0"
        broker = RedisBroker(url, "school", timeout=1.0)
        with pytest.raises(BrokerUnavailable) as caught:
            await broker.publish(events(1, 1))
        assert f"Redis at 127.0.0.1:{redis_server.port} did not take a batch of 1 events" in str(
            caught.value
        )
        assert "s3cret" not in str(caught.value)
        await broker.close()

    run(scenario())


def test_publishing_to_a_redis_that_never_answers_gives_up_after_the_timeout() -> None:
    """A socket that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(16)
        port = mute.getsockname()[1]

        async def scenario() -> None:
            broker = RedisBroker(f"redis://127.0.0.1:{port}", "school", timeout=0.5)
            with pytest.raises(BrokerUnavailable, match=f"Redis at 127.0.0.1:{port} did not"):
                await broker.publish(events(1, 1))
            await broker.close()

        run(scenario())


def test_a_large_batch_is_split_and_arrives_whole_in_order(redis_server: RedisServer) -> None:
    batch = events(1, 20_000)
    messages = split_messages(batch)
    assert len(messages) > 1
    assert all(len(message) <= MAX_MESSAGE_BYTES for message in messages)

    async def scenario() -> None:
        publisher = RedisBroker(redis_server.url, "school")
        listener, heard = listening(redis_server.url)
        await listener.start()
        await publisher.publish(batch)
        await publisher.publish(events(20_001, 1))
        await wait_until(lambda: len(heard.events) == len(batch) + 1, "every event")
        assert heard.events == [*batch, *events(20_001, 1)]
        assert len(heard.batches) == len(messages) + 1
        assert heard.gaps == []
        await publisher.close()
        await listener.close()

    run(scenario())


def test_split_messages_keep_each_message_under_the_limit_and_every_event_once() -> None:
    batch = events(1, 100)
    for limit in (1, 200, 1000, 10**9):
        messages = [orjson.loads(message) for message in split_messages(batch, limit)]
        assert [Event.from_json(e) for m in messages for e in m["events"]] == list(batch)
        for message, raw in zip(messages, split_messages(batch, limit), strict=True):
            # Over the limit only an event too large on its own (every one, at 1 byte).
            assert len(raw) <= limit or len(message["events"]) == 1
    assert len(split_messages(batch, 10**9)) == 1
    assert len(split_messages(batch, 1)) == 100
    assert split_messages([], 1000) == []


def test_an_unreadable_message_is_reported_as_a_gap(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        listener, heard = listening(redis_server.url)
        await listener.start()
        raw = redis.asyncio.Redis.from_url(redis_server.url)
        await raw.publish(listener.channel, b'{"v": 2, "events": []}')
        await raw.publish(listener.channel, b"not json")
        await raw.aclose()
        publisher = RedisBroker(redis_server.url, "school")
        await publisher.publish(events(1, 1))
        await wait_until(lambda: len(heard.heard) == 3, "two gaps and the batch")
        assert heard.heard[2] == events(1, 1)
        assert all("could not be read" in gap for gap in heard.heard[:2])
        await publisher.close()
        await listener.close()

    run(scenario())
