"""The change stream reader: what reaches `publish`, from where it starts, and that one
instance at a time reads (the lease), handing over without losing or doubling a change.

Leases are short here (LEASE seconds) so that takeovers happen within a test, but nothing
asserts on time: every wait is for a condition, bounded by WAIT seconds for a busy machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support import awaited, make_settings

from graph_api.errors import Unavailable
from graph_api.events import reader as reader_module
from graph_api.events.changes import Change, Position
from graph_api.events.lease import LATEST, SHARD_END, TRIM_HORIZON, Lease, LeaseLost
from graph_api.events.reader import Publish, Shard, StreamReader
from graph_api.model import keys
from graph_api.settings import Settings
from graph_api.store import admin, codec, retry
from graph_api.store.client import Dynamo
from graph_api.store.codec import Item
from graph_api.store.streams_client import Streams

POLL = 0.05  # seconds an idle shard waits: short, so that the tests run quickly
LEASE = 1.5  # seconds
WAIT = 30.0  # the most any condition is waited for


@dataclass
class Stream:
    settings: Settings
    dynamo: Dynamo
    streams: Streams

    @property
    def name(self) -> str:
        return self.settings.table

    def call(self, operation: str, **params: Any) -> Any:
        return awaited(
            self.dynamo.call(
                operation, {"TableName": self.name, **params}, None, missing_table=False
            )
        )

    async def put(self, *items: Item) -> None:
        """Plain PutItems, as any writer of the table makes them."""
        for item in items:
            await asyncio.to_thread(self.call, "PutItem", Item=codec.encode(item))

    def transact(self, actions: list[dict[str, Any]]) -> Any:
        for action in actions:
            next(iter(action.values()))["TableName"] = self.name
        return awaited(
            self.dynamo.call(
                "TransactWriteItems", {"TransactItems": actions}, None, missing_table=False
            )
        )

    def lease_item(self) -> Item:
        key = codec.encode(keys.stream_lease().as_item())
        wire = self.call("GetItem", Key=key, ConsistentRead=True).get("Item")
        return codec.decode(wire) if wire else {}


@pytest.fixture
def stream(endpoint: str) -> Iterator[Stream]:
    settings = make_settings(endpoint, stream_poll_seconds=POLL, stream_lease_seconds=LEASE)
    dynamo, streams = Dynamo(settings), Streams(settings)
    awaited(admin.create(dynamo, settings.table))
    yield Stream(settings, dynamo, streams)
    awaited(dynamo.call("DeleteTable", {"TableName": settings.table}, None, missing_table=False))
    streams.close()


@dataclass
class Published:
    """Every batch handed to `publish`, by any reader, in the order they were handed on."""

    batches: list[tuple[str, list[Change]]] = field(default_factory=list)

    def to(self, reader: str) -> Publish:
        async def publish(changes: Sequence[Change]) -> None:
            self.batches.append((reader, list(changes)))

        return publish

    def changes(self, reader: str | None = None) -> list[Change]:
        return [c for name, batch in self.batches if reader in (None, name) for c in batch]

    def pks(self, reader: str | None = None) -> list[str]:
        return [c.keys["PK"] for c in self.changes(reader)]

    def delivered(self) -> list[Change]:
        """What a subscriber hearing every batch in order keeps: a change only if its
        position is after the last one it kept of that shard."""
        last: dict[str, int] = {}
        kept: list[Change] = []
        for change in self.changes():
            position = change.position
            if position.sequence > last.get(position.shard, -1):
                last[position.shard] = position.sequence
                kept.append(change)
        return kept


async def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT:.0f} s: {what}")
        await asyncio.sleep(0.02)


def item(pk: str, **attributes: Any) -> Item:
    return {"PK": pk, "SK": pk, "type": "test", **attributes}


def items(prefix: str, count: int) -> list[Item]:
    return [item(f"{prefix}-{i:03d}", n=i) for i in range(count)]


@contextlib.asynccontextmanager
async def running(reader: StreamReader) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(reader.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def reader_of(stream: Stream, published: Published, name: str) -> StreamReader:
    return StreamReader(
        stream.settings, stream.dynamo, stream.streams, published.to(name), owner=name
    )


async def started(reader: StreamReader) -> None:
    await eventually(lambda: reader.holding and reader.reading.is_set(), "the reader reads")


@contextlib.asynccontextmanager
async def reading(stream: Stream) -> AsyncIterator[tuple[StreamReader, Published]]:
    """One reader ("a") running until it reads the stream, and what it publishes."""
    published = Published()
    reader = reader_of(stream, published, "a")
    async with running(reader):
        await started(reader)
        yield reader, published


# -- what is published -------------------------------------------------------------------


def test_a_plain_put_reaches_publish_with_its_images(stream: Stream) -> None:
    async def scenario() -> None:
        async with reading(stream) as (_, published):
            await stream.put(item("STUDENT#s1", name="Ada"), item("STUDENT#s1", name="Grace"))
            await asyncio.to_thread(
                stream.call,
                "DeleteItem",
                Key=codec.encode({"PK": "STUDENT#s1", "SK": "STUDENT#s1"}),
            )
            await eventually(lambda: len(published.changes()) >= 3, "three changes published")
            changes = published.changes()
            assert [c.kind for c in changes] == ["INSERT", "MODIFY", "REMOVE"]
            assert all(c.keys == {"PK": "STUDENT#s1", "SK": "STUDENT#s1"} for c in changes)
            assert (changes[0].old, changes[0].new) == (None, item("STUDENT#s1", name="Ada"))
            assert changes[1].old == item("STUDENT#s1", name="Ada")
            assert changes[1].new == item("STUDENT#s1", name="Grace")
            assert (changes[2].old, changes[2].new) == (item("STUDENT#s1", name="Grace"), None)
            positions = [c.position for c in changes]
            assert positions == sorted(positions) and len(set(positions)) == 3
            # Checkpointed after publishing: the lease item holds the last position.
            last = positions[-1]
            await eventually(
                lambda: _checkpointed(stream, last),
                "the checkpoint of the last change",
            )
            # The checkpoint is a write to the table, in the stream after them: a write
            # after it is read once the reader has read past that record.
            await stream.put(item("AFTER#1"))
            await eventually(lambda: "AFTER#1" in published.pks(), "the write after it")
        # The lease's own writes (taking, renewing, checkpointing) are never published.
        assert published.pks() == ["STUDENT#s1"] * 3 + ["AFTER#1"]

    asyncio.run(scenario())


def _checkpointed(stream: Stream, position: Position) -> bool:
    """Whether the lease item's checkpoint of the position's shard is at that position or
    past it: a batch that ends with the lease's own renewal is checkpointed at the renewal's
    record (never published, and read past like any other)."""
    checkpoint = stream.lease_item().get("checkpoints", {}).get(position.shard, "")
    return bool(checkpoint.isdigit() and int(checkpoint) >= position.sequence)


def test_a_refused_transaction_publishes_nothing(stream: Stream) -> None:
    async def scenario() -> None:
        async with reading(stream) as (_, published):
            with pytest.raises(ClientError, match="TransactionCanceled"):
                await asyncio.to_thread(
                    stream.transact,
                    [
                        {"Put": {"Item": codec.encode(item("REFUSED#1"))}},
                        {
                            "ConditionCheck": {
                                "Key": codec.encode({"PK": "NOPE", "SK": "NOPE"}),
                                "ConditionExpression": "attribute_exists(PK)",
                            }
                        },
                    ],
                )
            await stream.put(item("AFTER#1"))
            await eventually(lambda: "AFTER#1" in published.pks(), "the write after it")
            assert published.pks() == ["AFTER#1"]

    asyncio.run(scenario())


def test_a_first_start_begins_at_latest(stream: Stream) -> None:
    async def scenario() -> None:
        await stream.put(item("BEFORE#1"))
        async with reading(stream) as (_, published):
            await stream.put(item("AFTER#1"))
            await eventually(lambda: "AFTER#1" in published.pks(), "the write after the start")
        assert published.pks() == ["AFTER#1"]  # yesterday's history is not replayed

    asyncio.run(scenario())


# -- one reader per table ------------------------------------------------------------------


def test_of_two_readers_only_the_lease_holder_publishes(stream: Stream) -> None:
    async def scenario() -> None:
        published = Published()
        a, b = reader_of(stream, published, "a"), reader_of(stream, published, "b")
        async with running(a), running(b):
            await eventually(lambda: a.holding or b.holding, "one reader holds the lease")
            holder, other = (a, b) if a.holding else (b, a)
            await started(holder)
            written = items("BOTH", 10)
            await stream.put(*written)
            await eventually(lambda: len(published.changes()) >= 10, "every write published")
            # The other tried the lease (and keeps trying), and never read the stream.
            await eventually(lambda: other.requests["UpdateItem:take"] >= 2, "the other tries")
            assert not other.holding
            assert {name for name, _ in published.batches} == {holder.lease.owner}
            assert other.requests["GetRecords"] == other.requests["GetShardIterator"] == 0
        assert sorted(published.pks()) == [i["PK"] for i in written]

    asyncio.run(scenario())


def test_a_killed_holder_is_taken_over_after_its_checkpoint(stream: Stream) -> None:
    async def scenario() -> None:
        published = Published()
        a, b = reader_of(stream, published, "a"), reader_of(stream, published, "b")
        first, second = items("FIRST", 5), items("SECOND", 5)
        task_a = asyncio.create_task(a.run())
        await started(a)
        await stream.put(*first)
        await eventually(lambda: len(published.changes("a")) >= 5, "a publishes the first")
        last_a = published.changes("a")[-1].position
        await eventually(
            lambda: _checkpointed(stream, last_a),
            "a's checkpoint",
        )
        async with running(b):
            await eventually(lambda: b.requests["UpdateItem:take"] >= 1, "b tries the lease")
            assert not b.holding
            # a dies: no release, no more requests (a killed process)
            a.lease.release = _nothing  # type: ignore[method-assign]
            task_a.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task_a
            assert stream.lease_item().get("token")  # still a's: it was not given up
            await stream.put(*second)  # while nobody reads: nothing of it may be lost
            await eventually(lambda: len(published.changes("b")) >= 5, "b takes over and publishes")
        # b started after a's checkpoint: none of the first writes again, every second one.
        assert sorted(published.pks("b")) == [i["PK"] for i in second]
        assert all(c.position > last_a for c in published.changes("b"))
        delivered = published.delivered()
        assert sorted(c.keys["PK"] for c in delivered) == [i["PK"] for i in first + second]

    asyncio.run(scenario())


async def _nothing() -> None:
    return None


def test_a_clean_stop_hands_the_lease_over_at_once(stream: Stream) -> None:
    async def scenario() -> None:
        published = Published()
        a, b = reader_of(stream, published, "a"), reader_of(stream, published, "b")
        async with running(a):
            await started(a)
            task_b = asyncio.create_task(b.run())
            await eventually(lambda: b.requests["UpdateItem:take"] >= 1, "b tries the lease")
        try:
            # a stopped: its lease is given up, not left to expire
            lease = stream.lease_item()
            assert "token" not in lease and lease["expires"] == 0
            await eventually(lambda: b.holding, "b takes the lease")
            await started(b)
            await stream.put(item("AFTER#1"))
            await eventually(lambda: "AFTER#1" in published.pks("b"), "b publishes")
        finally:
            task_b.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task_b

    asyncio.run(scenario())


def test_a_lease_hiccup_before_the_first_checkpoint_loses_nothing(
    stream: Stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renewals late: the reader stops, takes its lease back and reads again. Its shard was
    still at LATEST (nothing published yet), and what it had read but not handed on is
    read again, not skipped by a new LATEST."""

    async def scenario() -> None:
        published = Published()
        a = reader_of(stream, published, "a")
        renew = a.lease.renew
        failed: list[bool] = []

        async def renew_late() -> None:
            if not failed:
                failed.append(True)
                raise Unavailable("DynamoDB did not answer")
            await renew()

        async with running(a):
            await started(a)
            # Ran out: the next batch is not handed on, nor is the next renewal made.
            monkeypatch.setattr(a.lease, "renew", renew_late)
            monkeypatch.setattr(a.lease, "_valid_until", 0.0)
            await stream.put(item("DURING#1"))
            await eventually(lambda: "DURING#1" in published.pks(), "the write is published")
            assert a.requests["UpdateItem:take"] >= 2  # it did stop, and took the lease back

    asyncio.run(scenario())


def test_a_reader_whose_lease_is_taken_stops_reading(stream: Stream) -> None:
    async def scenario() -> None:
        published = Published()
        a = reader_of(stream, published, "a")
        async with running(a):
            await started(a)
            _steal(stream, expires=int(time.time() * 1000) + 3_600_000)
            await eventually(lambda: not a.holding, "a sees it lost the lease")
            polls = a.requests["GetRecords"]
            tries = a.requests["UpdateItem:take"]
            await stream.put(item("AFTER#1"))
            await eventually(lambda: a.requests["UpdateItem:take"] >= tries + 2, "a tries again")
            assert a.requests["GetRecords"] == polls
            assert published.pks() == []

    asyncio.run(scenario())


def _steal(stream: Stream, expires: int) -> None:
    """Another instance's lease, written over whatever is there."""
    stream.call(
        "UpdateItem",
        Key=codec.encode(keys.stream_lease().as_item()),
        UpdateExpression="SET #token = :token, #expires = :expires",
        ExpressionAttributeNames={"#token": "token", "#expires": "expires"},
        ExpressionAttributeValues=codec.encode({":token": "thief", ":expires": expires}),
    )


def test_a_reader_that_lost_its_lease_cannot_write_a_checkpoint(stream: Stream) -> None:
    async def scenario() -> None:
        a = Lease(stream.dynamo, stream.name, LEASE, owner="a")
        b = Lease(stream.dynamo, stream.name, LEASE, owner="b")
        assert await a.take()
        await a.begin_stream("arn:stream", {"shard-1": LATEST})
        await a.checkpoint("shard-1", "5")
        assert not await b.take()  # held, not expired
        _steal(stream, expires=0)  # as if a's lease ran out and another took it
        with pytest.raises(LeaseLost):
            await a.checkpoint("shard-1", "9")
        assert not a.held()
        with pytest.raises(LeaseLost):
            await a.renew()
        assert stream.lease_item()["checkpoints"] == {"shard-1": "5"}
        assert await b.take()  # expired: b takes it, with the checkpoints
        assert b.checkpoints == {"shard-1": "5"} and b.stream_arn == "arn:stream"
        await a.release()  # not a's: changes nothing
        assert stream.lease_item()["token"] == b.token
        await b.release()
        assert "token" not in stream.lease_item()
        assert await a.take()  # released: free at once

    asyncio.run(scenario())


class Cut(BaseException):
    """The answer never comes back (the process is cancelled, the connection drops)."""


def test_a_take_cut_short_after_it_was_made_is_still_released(stream: Stream) -> None:
    def cut(**_: Any) -> None:
        raise Cut()

    async def scenario() -> None:
        a = Lease(stream.dynamo, stream.name, 60.0, owner="a")
        event = "after-call.dynamodb.UpdateItem"
        stream.dynamo.register(event, cut)
        try:
            with pytest.raises(Cut):
                await a.take()
        finally:
            stream.dynamo.unregister(event, cut)
        assert stream.lease_item()["owner"] == "a" and not a.held()
        await a.release()  # an instance stopping: it gives up what it may have taken
        assert "token" not in stream.lease_item()

    asyncio.run(scenario())


# -- shards: parents first, children from their start -----------------------------------


class FakeStreams:
    """A scripted DynamoDB Streams: shard listings (paged) and GetRecords answers."""

    def __init__(self, listings: list[list[list[dict[str, Any]]]]) -> None:
        self.listings = listings  # each DescribeStream round: its pages
        self.round = 0
        # A shard's GetRecords answers in order (None: its end; past them, nothing new).
        self.records: dict[str, list[list[dict[str, Any]] | None]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(self, operation: str, params: dict[str, Any]) -> Any:
        self.calls.append((operation, params))
        if operation == "DescribeStream":
            pages = self.listings[min(self.round, len(self.listings) - 1)]
            page = (
                0
                if "ExclusiveStartShardId" not in params
                else int(params["ExclusiveStartShardId"].rsplit("@", 1)[1])
            )
            answer: dict[str, Any] = {"Shards": pages[page]}
            if page + 1 < len(pages):
                answer["LastEvaluatedShardId"] = f"{pages[page][-1]['ShardId']}@{page + 1}"
            else:
                self.round += 1
            return {"StreamDescription": answer}
        if operation == "GetShardIterator":
            return {"ShardIterator": f"{params['ShardId']}@0"}
        if operation == "GetRecords":  # an iterator is a position: reading it again is the same
            shard, at = params["ShardIterator"].split("@")
            script = self.records.get(shard, [])
            batch = script[int(at)] if int(at) < len(script) else []
            if batch is None:
                return {"Records": []}
            return {"Records": batch, "NextShardIterator": f"{shard}@{int(at) + 1}"}
        raise AssertionError(operation)


def _record(pk: str, sequence: int) -> dict[str, Any]:
    keys_ = codec.encode({"PK": pk, "SK": pk})
    return {
        "eventName": "INSERT",
        "dynamodb": {"Keys": keys_, "NewImage": keys_, "SequenceNumber": str(sequence)},
    }


def _shard(id_: str, parent: str | None = None, closed: bool = False) -> dict[str, Any]:
    shard: dict[str, Any] = {"ShardId": id_, "SequenceNumberRange": {}}
    if parent:
        shard["ParentShardId"] = parent
    if closed:
        shard["SequenceNumberRange"]["EndingSequenceNumber"] = "99"
    return shard


def test_a_child_shard_is_read_from_its_start_after_its_parent_ends(stream: Stream) -> None:
    fake = FakeStreams(
        [
            [[_shard("p")]],  # the first start: p is open
            [[_shard("p", closed=True)], [_shard("c", parent="p")]],  # p closed, c its child
        ]
    )
    fake.records = {"p": [[_record("P#1", 10)], None], "c": [[_record("C#1", 20)]]}

    async def scenario() -> None:
        published = Published()
        reader = StreamReader(
            stream.settings,
            stream.dynamo,
            fake,
            published.to("a"),
            describe_seconds=WAIT,
        )
        async with running(reader):
            await eventually(lambda: len(published.changes()) >= 2, "both shards published")
            await eventually(
                lambda: stream.lease_item()["checkpoints"] == {"c": "20"}, "c's checkpoint"
            )
        assert published.pks() == ["P#1", "C#1"]
        iterators = [
            (p["ShardId"], p["ShardIteratorType"])
            for op, p in fake.calls
            if op == "GetShardIterator"
        ]
        assert iterators == [("p", "LATEST"), ("c", "TRIM_HORIZON")]
        # c was asked for only after p's last GetRecords said it ended
        order = [
            (op, (p.get("ShardIterator") or p.get("ShardId") or "").split("@")[0])
            for op, p in fake.calls
        ]
        assert order.index(("GetShardIterator", "c")) > max(
            i for i, call in enumerate(order) if call == ("GetRecords", "p")
        )
        # the second listing came in two pages
        assert sum(1 for op, _ in fake.calls if op == "DescribeStream") >= 3

    asyncio.run(scenario())


def test_the_plan_reads_parents_first_and_skips_what_is_finished(stream: Stream) -> None:
    reader = StreamReader(stream.settings, stream.dynamo, stream.streams, Published().to("a"))
    grand = Shard("g", None, closed=True)
    parent = Shard("p", "g", closed=True)
    child = Shard("c", "p", closed=False)
    shards = [grand, parent, child]

    def plan(checkpoints: dict[str, str], finished: set[str] | None = None) -> list[str]:
        reader.lease.checkpoints = checkpoints
        return [s.id for s in reader._plan(shards, finished or set())]

    assert plan({"c": LATEST}) == ["c"]  # a first start: closed ancestors are history
    assert plan({"p": "5"}) == ["p"]  # a checkpoint in p: p first, c waits
    assert plan({"p": "5"}, {"p"}) == ["c"]
    assert plan({"p": SHARD_END}) == ["c"]
    assert plan({"c": TRIM_HORIZON}) == ["c"]
    assert plan({}) == ["g"]  # found later: from the oldest, nothing lost
    assert plan({}, {"g"}) == ["p"]
    # a parent no longer listed (trimmed) does not hold its child back
    assert [s.id for s in reader._plan([child], set())] == ["c"]


def test_a_throttled_shard_is_retried_as_the_policy_says_not_forever(
    stream: Stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GetRecords throttled for good: retried on its shard as `retry.STREAM` allows (one
    count, the reader's own budget), then the shard's reading stops with UNAVAILABLE, and
    `run` starts over from the checkpoints."""
    monkeypatch.setattr(reader_module, "STREAM", retry.Policy(base=0.0, cap=0.0, max_retries=12))
    monkeypatch.setattr(reader_module, "GET_RECORDS_SPACING", 0.0)
    asked: list[str] = []

    class Throttled:
        async def call(self, operation: str, params: dict[str, Any]) -> Any:
            asked.append(operation)
            error = Unavailable("DynamoDB Streams is busy; try again shortly")
            error.__cause__ = ClientError(
                {"Error": {"Code": "LimitExceededException", "Message": "5 a second"}},
                operation,
            )
            raise error

    reader = StreamReader(stream.settings, stream.dynamo, Throttled(), Published().to("a"))
    with pytest.raises(Unavailable, match="Streams is busy"):
        asyncio.run(reader._read_shard("arn:stream", "shard-1", "5", "iterator"))
    assert asked == ["GetRecords"] * 13  # 1 + STREAM's 12 retries, not forever
    assert reader._budget.available == 500 - 12 * 5


# -- what it costs -------------------------------------------------------------------------


def test_requests_per_batch_of_changes(stream: Stream) -> None:
    """The reader's requests for 40 changes: one GetRecords and one checkpoint a batch,
    beside idle polls and the lease's renewals; no new iterator, whatever reads the events."""

    async def scenario() -> None:
        async with reading(stream) as (reader, published):
            before = reader.requests.copy()
            written = items("COUNT", 40)
            for chunk in (written[:25], written[25:]):
                await stream.dynamo.call(
                    "BatchWriteItem",
                    {
                        "RequestItems": {
                            stream.name: [{"PutRequest": {"Item": codec.encode(i)}} for i in chunk]
                        }
                    },
                    None,
                    missing_table=False,
                )
            await eventually(lambda: len(published.changes()) >= 40, "every write published")
            spent = reader.requests - before
        batches = len(published.batches)
        assert spent["UpdateItem:checkpoint"] == batches  # one checkpoint a batch published
        # A poll sent before `before` was taken may answer with the first batch (a request
        # counts as it is sent): every other batch needs a GetRecords of its own.
        assert spent["GetRecords"] >= batches - 1
        assert spent["GetShardIterator"] == 0
        print(f"\n40 changes in {batches} batch(es): {dict(spent)}")

    asyncio.run(scenario())


def test_a_reader_that_keeps_failing_unexpectedly_logs_the_traceback_once_and_backs_off(
    stream: Stream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An error the reader does not expect, again and again: a line each time, its
    traceback only the first, and starting over further apart (not every second)."""
    monkeypatch.setattr(reader_module, "RESTART_SECONDS", 0.01)
    pauses: list[float] = []

    async def broken(self: StreamReader) -> None:
        raise RuntimeError("a bug in the reading")

    monkeypatch.setattr(StreamReader, "_read", broken)

    async def scenario() -> None:
        reader = reader_of(stream, Published(), "a")
        take = reader._failed_pause

        def counted() -> float:
            pauses.append(take())
            return pauses[-1]

        reader._failed_pause = counted  # type: ignore[method-assign]
        async with running(reader):
            await eventually(lambda: len(pauses) >= 4, "four failures")

    caplog.set_level("ERROR", logger="graph_api.events.reader")
    asyncio.run(scenario())
    failed = [r for r in caplog.records if "the change stream reader failed" in r.getMessage()]
    assert len(failed) >= 4
    assert [bool(r.exc_info) for r in failed[:4]] == [True, False, False, False]
    assert pauses[:4] == [0.01, 0.02, 0.04, 0.08]
