"""A DynamoDB front that contends as AWS does: for tests and `make bench-scale`.

DynamoDB Local and the embedded backend commit a transaction at once and never conflict,
so a suite on them cannot see what sixteen writers of one item meet on AWS. This front sits
in a client's botocore events, as tests/store/test_faults.py's faults do (a `before-send` handler
that returns a response answers for DynamoDB; one that returns None lets the request go to
the backend unchanged). Every `Dynamo` attached to one front shares its state, as instances
of the API share one table.

- **Transactions**: every item a `TransactWriteItems` touches is locked while it is in
  flight: from when the front takes it, through `hold` seconds of commit time (the sender
  waits them out), until the backend has answered (or `STUCK` seconds, should the sender
  give up meanwhile). Another `TransactWriteItems` touching a locked item is cancelled:
  `TransactionCanceledException`, one reason per action in order, `TransactionConflict`
  for each locked item and `None` for the rest. A `PutItem`, `UpdateItem` or `DeleteItem`
  of a locked item gets `TransactionConflictException`. A cancelled or refused request locks
  nothing.
- **Partition throughput** (with `partition_wcu`): each partition key (table and PK) may
  take `partition_wcu` write units a second (a token bucket one second deep): AWS's 1,000
  WCU a partition scaled down by a stated factor, so that a test's few writers reach it. A
  write costs a unit per item it touches (items under 1 KB), a transaction twice that (as
  AWS bills it); past the budget, `ProvisionedThroughputExceededException`, and nothing is
  spent. Only the base table's partitions are counted.

Error bodies are AWS's own (the TransactWriteItems API reference and AWS's answers as SDK
issues quote them), so botocore parses them as it parses AWS's.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders

from graph_api.model.keys import PK, SK
from graph_api.store.client import Dynamo

JSON = "application/x-amz-json-1.0"
PREFIX = "com.amazonaws.dynamodb.v20120810#"
ONGOING = "Transaction is ongoing for the item"
THROUGHPUT = (
    "The level of configured provisioned throughput for the table was exceeded. Consider"
    " increasing your provisioning level with the UpdateTable API."
)
AWS_PARTITION_WCU = 1000  # write units a second one partition of DynamoDB takes
_PLAIN_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
STUCK = 2.0  # seconds: a lock whose sender stopped waiting for the answer is let go then
_SEND = "before-send.dynamodb"
_ANSWERED = ("after-call.dynamodb", "after-call-error.dynamodb")


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


def as_sent(response: AWSResponse | None) -> Any:
    """A botocore `AWSResponse` answering for the network, as the client's wire reads it
    (its status, headers and `content`)."""
    return response


def aws_error(code: str, body: dict[str, Any]) -> AWSResponse:
    """DynamoDB's HTTP 400 answer of error `code`, with `body`'s other fields."""
    data = json.dumps({"__type": PREFIX + code, **body}).encode()
    headers = HTTPHeaders()
    headers["Content-Type"] = JSON
    return AWSResponse("https://dynamodb", 400, headers, _Body(data))


def cancelled(held: list[bool]) -> AWSResponse:
    """A transaction cancelled for `TransactionConflict` on the actions whose items are
    `held`, in action order."""
    listed = [
        {"Code": "TransactionConflict", "Message": ONGOING} if busy else {"Code": "None"}
        for busy in held
    ]
    summary = ", ".join("TransactionConflict" if busy else "None" for busy in held)
    return aws_error(
        "TransactionCanceledException",
        {
            "CancellationReasons": listed,
            # Capitalised for this exception alone, as AWS writes it.
            "Message": "Transaction cancelled, please refer cancellation reasons for specific"
            f" reasons [{summary}]",
        },
    )


def conflicted() -> AWSResponse:
    return aws_error("TransactionConflictException", {"message": ONGOING})


def throttled() -> AWSResponse:
    return aws_error("ProvisionedThroughputExceededException", {"message": THROUGHPUT})


ItemKey = tuple[str, str, str]  # table, PK, SK
# The items the current call's transaction locked: botocore runs a call's handlers in the
# caller's task (or thread), so its answer's handler finds them here.
_holding: contextvars.ContextVar[tuple[tuple[ItemKey, ...], float]] = contextvars.ContextVar(
    "contention_front_holding", default=((), 0.0)
)


def _key(table: str, wire: dict[str, Any]) -> ItemKey:
    return (table, str(wire[PK]["S"]), str(wire[SK]["S"]))


def _items_of(operation: str, body: dict[str, Any]) -> list[ItemKey]:
    """The items a write touches, in its actions' order."""
    if operation == "TransactWriteItems":
        found = []
        for entry in body.get("TransactItems", []):
            ((_, action),) = entry.items()
            found.append(_key(action["TableName"], action.get("Key") or action["Item"]))
        return found
    if operation in _PLAIN_WRITES:
        return [_key(body["TableName"], body.get("Key") or body["Item"])]
    return []


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class Counts:
    """What the front did: transactions let through, and each kind of refusal."""

    transactions: int = 0
    cancelled: int = 0  # TransactWriteItems cancelled for TransactionConflict
    conflicted: int = 0  # plain writes refused with TransactionConflictException
    throttled: int = 0  # writes past a partition's budget


@dataclass
class ContentionFront:
    """See the module docstring. `hold`: seconds an item stays locked; `partition_wcu`:
    write units a second a partition key takes (None: no limit)."""

    hold: float = 0.015
    partition_wcu: float | None = None
    counts: Counts = field(default_factory=Counts)
    _locked: dict[ItemKey, float] = field(default_factory=dict)  # item -> locked until
    _buckets: dict[tuple[str, str], _Bucket] = field(default_factory=dict)
    _mutex: threading.Lock = field(default_factory=threading.Lock)
    _attached: list[Any] = field(default_factory=list)  # what `attach` registered with

    @classmethod
    def scaled(cls, scale: float, hold: float = 0.015) -> ContentionFront:
        """A front whose partitions take AWS's 1,000 write units a second times `scale`
        (0.01: 10 a second, so that a test's or a bench's few writers reach the limit)."""
        return cls(hold=hold, partition_wcu=AWS_PARTITION_WCU * scale)

    def attach(self, client: Dynamo | Any) -> None:
        """Put the front between a client and DynamoDB: a `Dynamo` (all its clients, now and
        later ones) or a botocore client of its own."""
        events = client.meta.events if hasattr(client, "meta") else client
        events.register(_SEND, self._before_send)
        for event in _ANSWERED:
            events.register(event, self._answered)
        self._attached.append(events)

    def detach(self) -> None:
        for events in self._attached:
            events.unregister(_SEND, self._before_send)
            for event in _ANSWERED:
                events.unregister(event, self._answered)
        self._attached.clear()

    # -- deciding ---------------------------------------------------------------------------

    def decide(self, operation: str, body: dict[str, Any], now: float) -> AWSResponse | None:
        """AWS's refusal of this request now, or None after locking (and charging) its items:
        the request may go on to the backend once `hold` has passed; `release` its items
        when the backend has answered."""
        items = _items_of(operation, body)
        if not items:
            return None
        with self._mutex:
            busy = [self._locked.get(item, 0.0) > now for item in items]
            if any(busy):
                if operation == "TransactWriteItems":
                    self.counts.cancelled += 1
                    return cancelled(busy)
                self.counts.conflicted += 1
                return conflicted()
            if not self._charge(items, 2 if operation == "TransactWriteItems" else 1, now):
                self.counts.throttled += 1
                return throttled()
            if operation == "TransactWriteItems":
                self.counts.transactions += 1
                for item in items:
                    self._locked[item] = now + self.hold + STUCK
            self._expire(now)
            return None

    def release(self, items: tuple[ItemKey, ...], until: float) -> None:
        """A transaction's answer came back: its items (locked `until`) are free again,
        unless another has locked them since (after STUCK)."""
        with self._mutex:
            for item in items:
                if self._locked.get(item) == until:
                    del self._locked[item]

    def _charge(self, items: list[ItemKey], units: int, now: float) -> bool:
        """Spend `units` per item from each partition's bucket, or nothing when one of them
        cannot pay."""
        if self.partition_wcu is None:
            return True
        wanted: dict[tuple[str, str], int] = {}
        for table, pk, _ in items:
            wanted[(table, pk)] = wanted.get((table, pk), 0) + units
        rate = self.partition_wcu
        buckets = []
        for partition, cost in wanted.items():
            bucket = self._buckets.get(partition) or _Bucket(rate, now)
            bucket.tokens = min(rate, bucket.tokens + (now - bucket.at) * rate)
            bucket.at = now
            self._buckets[partition] = bucket
            if bucket.tokens < cost:
                return False
            buckets.append((bucket, cost))
        for bucket, cost in buckets:
            bucket.tokens -= cost
        return True

    def _expire(self, now: float) -> None:
        """Forget locks past their time and full buckets: the state stays as small as the
        writes of the last second."""
        if len(self._locked) > 1024:
            self._locked = {k: until for k, until in self._locked.items() if until > now}
        if len(self._buckets) > 1024:  # a bucket a second untouched is full: forgotten
            self._buckets = {p: b for p, b in self._buckets.items() if now - b.at < 1.0}

    # -- botocore's event -------------------------------------------------------------------

    def _before_send(self, request: Any, event_name: str, **_: Any) -> Any:
        operation = event_name.rpartition(".")[2]  # before-send.dynamodb.<Operation>
        body = json.loads(request.body or b"{}")
        now = time.monotonic()
        refusal = self.decide(operation, body, now)
        taken = refusal is None and operation == "TransactWriteItems"
        _holding.set(
            (tuple(_items_of(operation, body)), now + self.hold + STUCK) if taken else ((), 0.0)
        )
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # the command line's boto3 client: wait on this thread
            if refusal is None and operation == "TransactWriteItems":
                time.sleep(self.hold)
            return refusal
        if refusal is not None or operation != "TransactWriteItems":
            return as_sent(refusal)
        return self._committing()  # aiobotocore awaits what a handler returns

    async def _committing(self) -> None:
        await asyncio.sleep(self.hold)  # the commit time the sender waits out

    def _answered(self, **_: Any) -> None:
        held, until = _holding.get()
        if held:
            _holding.set(((), 0.0))
            self.release(held, until)
