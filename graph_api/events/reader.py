"""The table's change stream, read by one instance at a time, handed on batch by batch.

`StreamReader.run()` runs on every instance until cancelled. The instance that holds the
lease (`lease.py`) reads: it finds the table's latest stream, lists its shards, reads every
shard whose parent is finished (AWS requires parents first: a split's children continue
their parent's keys), and hands each batch of changes to `publish`, then checkpoints it on
the lease item. After a takeover the next holder starts after the checkpoints, so nothing
is lost; what was published but not yet checkpointed is published again, with the same
positions, and subscribers drop what they have seen (`changes.Position`).

Where a shard starts: after its checkpoint; at LATEST for the shards open when the table's
stream is first read (subscribers want what happens next, not a day of history); at
TRIM_HORIZON for a shard found later (a child of a finished shard: nothing of it is lost).
A shard still at LATEST (nothing of it published yet) starts at LATEST again when another
instance takes over, so a write on it while nobody read is not published (as with the
KCL's LATEST); the same instance reading again keeps its place (`_resume`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError

from graph_api.errors import Unavailable
from graph_api.events.changes import Change
from graph_api.events.lease import LATEST, SHARD_END, TRIM_HORIZON, Lease, LeaseLost
from graph_api.model import keys
from graph_api.settings import Settings
from graph_api.store import codec
from graph_api.store.client import Dynamo
from graph_api.store.retry import STREAM, Retries, RetryBudget
from graph_api.store.table import Table

log = logging.getLogger(__name__)

Publish = Callable[[Sequence[Change]], Awaitable[None]]


class StreamsClient(Protocol):
    """What the reader needs of DynamoDB Streams: `store.streams_client.Streams`, or a fake."""

    async def call(self, operation: str, params: dict[str, Any]) -> Any: ...


# DynamoDB Streams serves at most 5 GetRecords a second a shard.
GET_RECORDS_SPACING = 0.2
# After a shard closes, its children may take a moment to be listed: ask this often, this
# many times at most (a stream that was turned off has none).
CHILD_DESCRIBE_SECONDS = 1.0
CHILD_DESCRIBES = 60
# After an unexpected failure, the reader starts over from its checkpoints after this.
RESTART_SECONDS = 1.0
RESTART_MOST_SECONDS = 30.0  # while unexpected failures repeat, doubling up to this

# The lease item's own writes (renewals, checkpoints) are in the stream too: never published.
_LEASE_KEYS = codec.encode(keys.stream_lease().as_item())


@dataclass(frozen=True, slots=True)
class Shard:
    id: str
    parent: str | None
    closed: bool  # has an ending sequence number: nothing will be added to it


class _StreamChanged(Exception):
    """The table's latest stream is another one (turned off and on): start over on it."""


class StreamReader:
    """Reads the table's stream while this instance holds the lease; see the module."""

    def __init__(
        self,
        settings: Settings,
        dynamo: Dynamo,
        streams: StreamsClient,
        publish: Publish,
        *,
        owner: str | None = None,
        describe_seconds: float = 30.0,
        on_standby: Callable[[bool], None] | None = None,
    ) -> None:
        self._made_at = time.monotonic()
        self.table_name = settings.table
        self.poll_seconds = settings.stream_poll_seconds
        self.describe_seconds = describe_seconds
        self._dynamo = dynamo
        self._streams = streams
        # The retry budget of the reader's Streams calls: its client is the reader's own.
        self._budget = RetryBudget()
        self._publish = publish
        # Requests this reader sent, by operation (lease writes as `UpdateItem:<purpose>`).
        self.requests: Counter[str] = Counter()
        self.lease = Lease(
            dynamo,
            settings.table,
            settings.stream_lease_seconds,
            owner=owner,
            requests=self.requests,
        )
        self.batches = 0  # handed to publish
        self.published = 0  # changes in them
        # Set while every shard being read has its iterator: writes from now on are read.
        self.reading = asyncio.Event()
        # Shards still at LATEST (nothing published): an iterator before anything unpublished,
        # so that reading again after a lease hiccup (renewals late, taken back) starts
        # there, not at a new LATEST past the batch that was not handed on.
        self._resume: dict[str, str] = {}
        # Whether another instance holds the lease (as last tried), and who hears of changes.
        self.standby = False
        self._on_standby = on_standby
        # When (monotonic) the reader last heard DynamoDB answer it: a try of the lease, a
        # DescribeStream, a GetRecords. `/readyz` fails once that is `stale_after` old.
        self.alive_at: float | None = None
        self._failures = 0  # unexpected failures since the stream last answered
        self.stale_after = max(3 * settings.stream_lease_seconds, 2 * describe_seconds)

    def silent_for(self) -> float:
        """Seconds since the reader last heard DynamoDB answer (or since it was made)."""
        return time.monotonic() - (self.alive_at or self._made_at)

    def _alive(self, *, read: bool = True) -> None:
        """DynamoDB answered; `read`: the stream itself did (not only the lease's table)."""
        self.alive_at = time.monotonic()
        if read:
            self._failures = 0

    def _failed_pause(self) -> float:
        """One more unexpected failure in a row: how long to wait before starting over."""
        self._failures += 1
        return float(min(RESTART_SECONDS * 2 ** (self._failures - 1), RESTART_MOST_SECONDS))

    @property
    def holding(self) -> bool:
        return self.lease.held()

    async def run(self) -> None:
        """Until cancelled: take the lease when free, read while holding it; on cancel,
        release it so that another instance takes over at once."""
        try:
            while True:
                taken = await self._take()
                if taken is not None:
                    self._set_standby(not taken)
                if not taken:
                    await asyncio.sleep(self.lease.renew_interval)
                    continue
                log.info("reading %s's change stream (lease taken)", self.table_name)
                # Slept after the handlers, not in them: a cancel arriving in a sleep inside
                # `except*` would leave as an exception group, not as the CancelledError.
                pause = 0.0
                try:
                    async with asyncio.TaskGroup() as group:
                        group.create_task(self._keep_lease())
                        group.create_task(self._read())
                except* LeaseLost as lost:
                    log.warning("stopped reading the change stream: %s", _first(lost))
                except* _StreamChanged:
                    log.info("%s has a new change stream: reading it", self.table_name)
                except* Unavailable as busy:
                    log.warning("the change stream reader starts over: %s", _first(busy))
                    pause = RESTART_SECONDS
                except* Exception as failed:
                    # The traceback once; while it keeps failing, a line each time, further
                    # apart (doubling), until the stream has answered it again.
                    pause = max(pause, self._failed_pause())
                    log.error(
                        "the change stream reader failed: %r; starting over in %g s",
                        _first(failed),
                        pause,
                        exc_info=self._failures == 1,
                    )
                finally:
                    self.reading.clear()
                if pause:
                    await asyncio.sleep(pause)
        finally:
            await self.lease.release()

    async def _take(self) -> bool | None:
        """Whether the lease is ours now; None when DynamoDB did not say (it is unknown
        whether another instance holds it)."""
        try:
            taken = await self.lease.take()
        except (Unavailable, ClientError) as error:
            log.warning("could not try the stream's lease: %s", error)
            return None
        self._alive(read=False)
        return taken

    def _set_standby(self, standby: bool) -> None:
        if standby != self.standby:
            self.standby = standby
            if standby:
                log.info("another instance reads %s's change stream", self.table_name)
            if self._on_standby is not None:
                self._on_standby(standby)

    async def _keep_lease(self) -> None:
        """Renew every third of the lease; `LeaseLost` (which stops the reading) when it was
        taken, or when renewals kept failing until it ran out."""
        wait = self.lease.renew_interval
        while True:
            await asyncio.sleep(wait)
            try:
                await self.lease.renew()
                wait = self.lease.renew_interval
            except (Unavailable, ClientError) as error:
                if not self.lease.held():
                    raise LeaseLost("could not renew the lease before it ran out") from error
                log.warning("could not renew the stream's lease, trying again: %s", error)
                wait = self.lease.renew_interval / 4

    def _retries(self) -> Retries:
        return Retries(self._budget, policy=STREAM)

    async def _call(self, operation: str, params: dict[str, Any]) -> Any:
        self.requests[operation] += 1
        return await self._streams.call(operation, params)

    async def _stream_arn(self) -> str:
        while True:
            self.requests["DescribeTable"] += 1
            # A table handle a call: each DescribeTable has retries of its own.
            table = Table(self._dynamo, self.table_name)
            described = await table.call("DescribeTable", {"TableName": self.table_name})
            arn = described["Table"].get("LatestStreamArn")
            spec = described["Table"].get("StreamSpecification") or {}
            if arn and spec.get("StreamEnabled"):
                return str(arn)
            log.warning(
                "table %s has no change stream: run `graph-api migrate` to turn it on",
                self.table_name,
            )
            await asyncio.sleep(self.describe_seconds)

    async def _describe(self, arn: str) -> list[Shard]:
        """Every shard the stream lists, following DescribeStream's pages."""
        shards: list[Shard] = []
        params: dict[str, Any] = {"StreamArn": arn}
        while True:
            answer = (await self._call("DescribeStream", params))["StreamDescription"]
            self._alive()
            for shard in answer.get("Shards", []):
                shards.append(
                    Shard(
                        shard["ShardId"],
                        shard.get("ParentShardId"),
                        "EndingSequenceNumber" in shard.get("SequenceNumberRange", {}),
                    )
                )
            last = answer.get("LastEvaluatedShardId")
            if not last:
                return shards
            params = {"StreamArn": arn, "ExclusiveStartShardId": last}

    def _plan(self, shards: list[Shard], finished: set[str]) -> list[Shard]:
        """The shards to read now: not finished, and their parent finished (or gone).

        A closed shard is finished when we read it to its end, or when one of its
        descendants is in the checkpoints (it was closed before our first start, or it was
        read to its end and gave its place in the map to its children)."""
        checkpoints = self.lease.checkpoints
        by_id = {shard.id: shard for shard in shards}
        children: dict[str, list[Shard]] = defaultdict(list)
        for shard in shards:
            if shard.parent:
                children[shard.parent].append(shard)
        done: dict[str, bool] = {}

        def is_done(shard: Shard) -> bool:
            if shard.id not in done:
                done[shard.id] = False  # no cycles in a stream, but never loop on one
                done[shard.id] = (
                    shard.id in finished
                    or checkpoints.get(shard.id) == SHARD_END
                    or (
                        shard.closed
                        and shard.id not in checkpoints
                        and any(c.id in checkpoints or is_done(c) for c in children[shard.id])
                    )
                )
            return done[shard.id]

        return [
            shard
            for shard in shards
            if not is_done(shard)
            and (shard.parent is None or shard.parent not in by_id or is_done(by_id[shard.parent]))
        ]

    async def _read(self) -> None:
        arn = await self._stream_arn()
        shards = await self._describe(arn)
        if self.lease.stream_arn != arn:  # first start on this stream: from now on
            await self.lease.begin_stream(arn, {s.id: LATEST for s in shards if not s.closed})
            self._resume.clear()
        finished: set[str] = set()  # read to their end (or gone)
        handed: set[str] = set()  # finished, and their children took their place in the map
        running: dict[asyncio.Task[None], str] = {}
        quick_describes = 0
        async with asyncio.TaskGroup() as group:
            while True:
                for shard in self._plan(shards, finished):
                    if shard.id in running.values():
                        continue
                    start = self.lease.checkpoints.get(shard.id, TRIM_HORIZON)
                    resume = self._resume.get(shard.id) if start == LATEST else None
                    iterator = resume or await self._iterator(arn, shard.id, start)
                    if iterator is None:  # the shard is gone (trimmed): nothing left to read
                        finished.add(shard.id)
                        continue
                    task = group.create_task(self._read_shard(arn, shard.id, start, iterator))
                    running[task] = shard.id
                self.reading.set()
                quick = quick_describes > 0 and any(
                    self.lease.checkpoints.get(shard_id) == SHARD_END for shard_id in finished
                )
                quick_describes -= 1
                timeout = CHILD_DESCRIBE_SECONDS if quick else self.describe_seconds
                if running:
                    ended, _ = await asyncio.wait(
                        running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                    )
                else:
                    ended = set()
                    await asyncio.sleep(timeout)
                    if await self._stream_arn() != arn:  # every shard of ours ended
                        raise _StreamChanged()
                shards = await self._describe(arn)
                listed = {shard.id for shard in shards}
                gone = [s for s in self.lease.checkpoints if s not in listed]
                # A shard no longer listed holds no child back: forget it (the map too).
                finished &= listed
                handed &= listed
                for task in ended:
                    finished.add(running.pop(task))
                    quick_describes = CHILD_DESCRIBES
                for shard_id in sorted(finished - handed):
                    children = [s.id for s in shards if s.parent == shard_id]
                    if children or self.lease.checkpoints.get(shard_id) != SHARD_END:
                        await self.lease.finish_shard(shard_id, children, gone)
                        gone = []
                    if children:
                        handed.add(shard_id)

    async def _iterator(self, arn: str, shard: str, start: str) -> str | None:
        """An iterator at `start` (a checkpoint: after that sequence number, or a sentinel);
        None when the shard no longer exists."""
        params: dict[str, Any] = {"StreamArn": arn, "ShardId": shard}
        if start in (LATEST, TRIM_HORIZON):
            params["ShardIteratorType"] = start
        else:
            params.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=start)
        try:
            return str((await self._call("GetShardIterator", params))["ShardIterator"])
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code == "TrimmedDataAccessException":
                log.warning("shard %s was trimmed past %s: reading it from its start", shard, start)
                return await self._iterator(arn, shard, TRIM_HORIZON)
            if code == "ResourceNotFoundException":
                log.warning("shard %s is no longer in the stream", shard)
                return None
            raise

    async def _read_shard(self, arn: str, shard: str, start: str, iterator: str) -> None:
        """Poll one shard until it is closed and read to its end."""
        last: str | None = None  # sequence number of the last record read
        retries, cost = self._retries(), 0
        if start == LATEST:
            self._resume[shard] = iterator
        while True:
            try:
                answer = await self._call("GetRecords", {"ShardIterator": iterator})
            except Unavailable as error:  # throttled or unreachable: back off, same iterator
                # Given up (STREAM's count, or the budget spent), the reader starts over
                # from its checkpoints (`run`).
                cost = await retries.again(error, at_least=GET_RECORDS_SPACING)
                continue
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "")
                if code == "ExpiredIteratorException":  # unused for 15 minutes
                    again = await self._iterator(arn, shard, last or start)
                elif code == "TrimmedDataAccessException":
                    log.warning("shard %s was trimmed past what we read: from its start", shard)
                    again = await self._iterator(arn, shard, TRIM_HORIZON)
                else:
                    raise
                if again is None:
                    return
                iterator = again
                continue
            retries.answered(cost)
            retries, cost = self._retries(), 0  # each poll is a request of its own
            self._alive()
            asked = time.monotonic()
            records = answer.get("Records", [])
            if records:
                last = str(records[-1]["dynamodb"]["SequenceNumber"])
                changes = [
                    Change.from_record(shard, record)
                    for record in records
                    if record["dynamodb"].get("Keys") != _LEASE_KEYS
                ]
                if changes:
                    await self._hand_on(shard, changes, last)
                    self._resume.pop(shard, None)  # checkpointed: a sequence number now
            following = answer.get("NextShardIterator")
            if following is None:
                self._resume.pop(shard, None)
                return  # closed, and every record of it read
            if shard in self._resume:  # what it read was nothing, or the lease's own
                self._resume[shard] = following
            iterator = following
            pause = GET_RECORDS_SPACING if records else max(self.poll_seconds, GET_RECORDS_SPACING)
            await asyncio.sleep(max(0.0, asked + pause - time.monotonic()))

    async def _hand_on(self, shard: str, changes: list[Change], last: str) -> None:
        if not self.lease.held():  # ran out before a renewal came back: another may read
            raise LeaseLost("the lease ran out before a renewal succeeded")
        await self._publish(changes)
        self.batches += 1
        self.published += len(changes)
        await self.lease.checkpoint(shard, last)


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first error of a (nested) exception group, to log in one line."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
