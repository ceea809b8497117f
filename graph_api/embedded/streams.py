"""DynamoDB Streams for the embedded backend: committed item changes, served on its port.

moto 5.2.5 records a stream, but it is unusable: a transaction refused by a condition leaves a
phantom INSERT record and every shard iterator opened before it then sees nothing, ever;
records are never trimmed; and every transaction copies the whole stream. Here moto's own
recording is switched off (each table's `stream_shard` is a `Stream` of ours, which moto's
writes already call with the item before and after) and this module restores DynamoDB's
behaviour:

- A record is published for each item a write changed, once the write is visible
  (`publish`, called by `wsgi` at the end of every write, after the swap of a transaction):
  PutItem, UpdateItem, DeleteItem, BatchWriteItem and a committed TransactWriteItems. A refused
  or failed transaction, a failed condition and a write that changes nothing (an identical
  put, an update to the same values, a delete of nothing) publish nothing, as on DynamoDB
  Local. Every `StreamViewType` is served; records carry DynamoDB's wire form, `SizeBytes` by
  DynamoDB's item size rules.
- The four Streams operations (`X-Amz-Target: DynamoDBStreams_20120810.*`, which botocore's
  `dynamodbstreams` client sends to the same `endpoint_url`) are answered by `serve`, with
  DynamoDB's errors. A stream has **one shard**, open while the stream is enabled and closed
  when it is disabled or its table deleted (DynamoDB splits shards every few hours; a reader
  that follows parent shards reads one here). Sequence numbers are 21 digits, consecutive from
  1 in each stream, like DynamoDB Local's. Iterators carry their position and expire after 15
  minutes.
- Records are trimmed after 24 hours, as on DynamoDB, and beyond `MAX_RECORDS` (100,000) a
  stream, so memory stays bounded (a record is its JSON, about 1 KB for the demo's items with
  both images: some 100 MB at the bound): an iterator into trimmed records gets
  `TrimmedDataAccessException`. A stream is a ring indexed by sequence number: a write
  appends in O(1), a read copies only the records it returns, and neither walks the stream.
- A disabled stream stays listed and readable (its table's too, once deleted, as on
  DynamoDB) among the last `MAX_RETIRED` disabled streams; a table can enable a new one.

Writes publish under `isolation.writers`; readers take only a stream's own lock, for as long
as it takes to copy the records they return. A reader never sees a record before the change
is visible in the table. This module goes away when moto's own stream is correct.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table

TARGET_PREFIX = "DynamoDBStreams_20120810."
MAX_RECORDS = 100_000  # a stream's bound, read when it is created
RETENTION = 24 * 60 * 60.0  # seconds DynamoDB keeps a record
ITERATOR_LIFETIME = 15 * 60.0  # seconds a shard iterator is good for
MAX_RETIRED = 64  # disabled streams kept readable
MAX_GET_RECORDS = 1000

# Seconds since the epoch: records' times, their age, iterators' expiry (tests move it).
clock: Callable[[], float] = time.time

_VIEW_TYPES = frozenset({"KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"})
_ITERATOR_TYPES = frozenset(
    {"TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"}
)


class StreamsError(Exception):
    """An error answer, in DynamoDB Streams' shape."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status

    def body(self) -> dict[str, str]:
        # DynamoDB Local's types: validation errors come from its framework, the rest its own.
        prefix = (
            "com.amazon.coral.validate"
            if self.code == "ValidationException"
            else ("com.amazonaws.dynamodb.v20120810")
        )
        return {"__type": f"{prefix}#{self.code}", "Message": self.message}


def _invalid(message: str) -> StreamsError:
    return StreamsError("ValidationException", message)


def _not_found(message: str) -> StreamsError:
    return StreamsError("ResourceNotFoundException", message)


def _trimmed() -> StreamsError:
    return StreamsError(
        "TrimmedDataAccessException",
        "The operation attempted to read past the oldest stream record in a shard.",
    )


def _sequence(number: int) -> str:
    return f"{number:021d}"


class Stream:
    """One table's stream: its description, and its records in a ring by sequence number.

    moto's writes call `add(old, new)` on the table's `stream_shard`; the change waits in
    `_pending` until `publish` (the write is then visible). Sequence numbers are assigned by
    the one writer (`isolation.writers`), so only appending and reading take `_lock`.
    """

    def __init__(self, table: Table, label: str, created: float) -> None:
        spec = table.stream_specification or {}
        self.table_name: str = table.name
        self.account: str = table.account_id
        self.region: str = table.region_name
        self.key_schema: list[dict[str, str]] = list(table.schema)
        self.key_names = [name for name in (table.hash_key_attr, table.range_key_attr) if name]
        view = spec.get("StreamViewType")
        self.view_type: str = view if view in _VIEW_TYPES else "NEW_AND_OLD_IMAGES"
        self.label = label
        self.arn = f"{table.table_arn}/stream/{label}"
        self.created = created
        self.shard_id = f"shardId-{int(created * 1000):020d}-{uuid.uuid4().hex[:8]}"
        self.capacity = MAX_RECORDS
        self.enabled = True
        self._lock = threading.Lock()
        self._ring: list[tuple[float, str] | None] = []  # (time, record JSON) at (seq-1) % capacity
        self._first = 1  # the oldest sequence number kept
        self._next = 1  # the sequence number the next record gets

    def __deepcopy__(self, memo: dict[int, Any]) -> None:
        return None  # moto's backups copy tables: a backup has no stream

    # -- recording (moto calls `add` as `table.stream_shard.add(old, new)`) -------------------

    def add(self, old: Item | None, new: Item | None) -> None:
        item = new if new is not None else old
        if item is None:
            return
        entry = _pending.setdefault((self, item.hash_key, item.range_key), [old, new])
        entry[1] = new  # the first old, the last new: moto's UpdateItem of a new item adds twice

    def _record(self, old: Item | None, new: Item | None, sequence: int, now: float) -> str | None:
        if old is None and new is None:
            return None
        if old is not None and new is not None and old == new:
            return None  # DynamoDB records no change for a write that changed nothing
        old_image = old.to_json()["Attributes"] if old is not None else None
        new_image = new.to_json()["Attributes"] if new is not None else None
        image = new_image if new_image is not None else old_image
        assert image is not None
        keys = {name: image[name] for name in self.key_names}
        body: dict[str, Any] = {"ApproximateCreationDateTime": int(now), "Keys": keys}
        size = _item_size(keys)
        if new_image is not None and self.view_type in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
            body["NewImage"] = new_image
            size += _item_size(new_image)
        if old_image is not None and self.view_type in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
            body["OldImage"] = old_image
            size += _item_size(old_image)
        body.update(
            SequenceNumber=_sequence(sequence), SizeBytes=size, StreamViewType=self.view_type
        )
        record = {
            "eventID": uuid.uuid4().hex,
            "eventName": "INSERT" if old is None else "REMOVE" if new is None else "MODIFY",
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": self.region,
            "dynamodb": body,
        }
        return json.dumps(record, separators=(",", ":"), default=_wire_binary)

    def _append(self, records: list[str], now: float) -> None:
        with self._lock:
            for text in records:
                slot = (self._next - 1) % self.capacity
                if len(self._ring) < self.capacity:
                    self._ring.append((now, text))
                else:
                    self._ring[slot] = (now, text)  # overwrites the oldest: it is trimmed
                self._next += 1
            self._first = max(self._first, self._next - self.capacity)
            self._trim(now)

    def _trim(self, now: float) -> None:
        """Drop records older than RETENTION (under `_lock`): each record once, so O(1) each."""
        while self._first < self._next:
            slot = (self._first - 1) % self.capacity
            kept = self._ring[slot]
            if kept is not None and now - kept[0] < RETENTION:
                return
            self._ring[slot] = None
            self._first += 1

    def close(self) -> None:
        with self._lock:
            self.enabled = False

    # -- reading ----------------------------------------------------------------------------

    def position(self, kind: str, sequence: int | None, now: float) -> int:
        """The position (the next sequence number to read) of a new shard iterator."""
        with self._lock:
            self._trim(now)
            if kind == "TRIM_HORIZON":
                return self._first
            if kind == "LATEST":
                return self._next
            assert sequence is not None
            position = sequence + (kind == "AFTER_SEQUENCE_NUMBER")
            if position < self._first:
                raise _trimmed()
            return position

    def read(self, position: int, limit: int, now: float) -> tuple[list[str], int, bool]:
        """Up to `limit` records from `position`: their JSON, the next position, and whether
        the shard is closed and read to its end."""
        with self._lock:
            self._trim(now)
            if position < self._first:
                raise _trimmed()
            end = min(self._next, position + limit) if position < self._next else position
            found: list[str] = []
            for number in range(position, end):
                kept = self._ring[(number - 1) % self.capacity]
                assert kept is not None
                found.append(kept[1])
            return found, end, not self.enabled and end >= self._next

    def retained(self) -> tuple[int, int]:
        """The first and last sequence numbers kept (first > last when none is)."""
        with self._lock:
            return self._first, self._next - 1

    def describe(self, exclusive_start: str | None) -> dict[str, Any]:
        with self._lock:
            last = self._next - 1
        shard: dict[str, Any] = {
            "ShardId": self.shard_id,
            "SequenceNumberRange": {"StartingSequenceNumber": _sequence(1)},
        }
        if not self.enabled:
            shard["SequenceNumberRange"]["EndingSequenceNumber"] = _sequence(max(last, 1))
        return {
            "StreamDescription": {
                "StreamArn": self.arn,
                "StreamLabel": self.label,
                "StreamStatus": "ENABLED" if self.enabled else "DISABLED",
                "StreamViewType": self.view_type,
                "CreationRequestDateTime": round(self.created, 3),
                "TableName": self.table_name,
                "KeySchema": self.key_schema,
                "Shards": [] if exclusive_start == self.shard_id else [shard],
            }
        }


# Changes of the write in progress, by item: [old, new]. Only the one writer touches it.
_pending: dict[tuple[Stream, Any, Any], list[Item | None]] = {}

_registry_lock = threading.Lock()
_streams: dict[str, Stream] = {}  # by ARN, oldest first
_retired: deque[Stream] = deque()  # disabled streams, oldest first


def publish() -> None:
    """Publish the changes of the write that just ended (called under `isolation.writers`,
    once the write is visible): one record per item it changed."""
    if not _pending:
        return
    now = clock()
    by_stream: dict[Stream, list[str]] = {}
    try:
        for (stream, _, _), (old, new) in _pending.items():
            records = by_stream.setdefault(stream, [])
            # Only the writer assigns sequence numbers, so the next one is known unlocked.
            text = stream._record(old, new, stream._next + len(records), now)
            if text is not None:
                records.append(text)
    finally:
        _pending.clear()
    for stream, records in by_stream.items():
        if records and stream.enabled:
            stream._append(records, now)


def _register(stream: Stream) -> None:
    with _registry_lock:
        _streams[stream.arn] = stream


def _retire(stream: Stream) -> None:
    stream.close()
    with _registry_lock:
        _retired.append(stream)
        while len(_retired) > MAX_RETIRED:
            _streams.pop(_retired.popleft().arn, None)


def _label(previous: str | None, created: float) -> str:
    """DynamoDB's stream label (a UTC time to the millisecond), new for each stream of a
    table: the stream's ARN is its table's ARN and the label."""
    millis = int(created * 1000)
    while True:
        moment = datetime.fromtimestamp(millis / 1000, UTC)
        label = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}"
        if label != previous:
            return label
        millis += 1


# -- hooks into moto (installed by `moto_fixes.apply`) -----------------------------------------


def recorded(original: Callable[..., None]) -> Callable[..., None]:
    """`Table.set_stream_specification`: a `Stream` of ours where moto made its StreamShard,
    and a disabled stream closed (moto keeps recording into it)."""

    def set_stream_specification(self: Table, streams: dict[str, Any] | None) -> None:
        before = self.__dict__.get("stream_shard")
        previous_label = self.latest_stream_label
        original(self, streams)
        if (self.stream_specification or {}).get("StreamEnabled"):
            if self.stream_shard is not before:  # moto made a new StreamShard: ours instead
                created = clock()
                self.latest_stream_label = _label(previous_label, created)
                stream = Stream(self, self.latest_stream_label, created)
                self.stream_shard = stream  # type: ignore[assignment]
                _register(stream)
        else:
            if isinstance(before, Stream):
                _retire(before)
            self.stream_shard = None

    return set_stream_specification


def update_table_streams(
    self: DynamoDBBackend, table: Table, stream_specification: dict[str, Any]
) -> None:
    """moto's, with DynamoDB's rules: a table whose stream was disabled can enable a new one;
    one whose stream is enabled cannot (moto refuses both once a table ever had a stream)."""
    enable = stream_specification.get("StreamEnabled") or stream_specification.get("StreamViewType")
    if enable and isinstance(table.stream_shard, Stream):
        raise MockValidationException("Table already has an enabled stream")
    table.set_stream_specification(stream_specification)


def retired_with_table(original: Callable[..., Table]) -> Callable[..., Table]:
    """`DynamoDBBackend.delete_table`: the table's stream is closed, and stays readable."""

    def delete_table(self: DynamoDBBackend, name: str) -> Table:
        table = original(self, name)
        if isinstance(table.stream_shard, Stream):
            _retire(table.stream_shard)
            table.stream_shard = None
        return table

    return delete_table


# -- the Streams API ---------------------------------------------------------------------------


def serve(
    operation: str, environ: dict[str, Any], start_response: Callable[..., Any]
) -> list[bytes]:
    """Answer one DynamoDB Streams request (`X-Amz-Target: DynamoDBStreams_20120810.<op>`)."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b"{}"
    status = "200 OK"
    try:
        try:
            request = json.loads(raw or b"{}")
        except ValueError as error:
            raise StreamsError(
                "SerializationException", "Start of structure or map found where not expected."
            ) from error
        if not isinstance(request, dict):
            raise StreamsError(
                "SerializationException", "Start of structure or map found where not expected."
            )
        handler = _OPERATIONS.get(operation)
        if handler is None:
            raise StreamsError("UnknownOperationException", f"Unknown operation {operation}")
        body = handler(request, environ)
    except StreamsError as error:
        status = f"{error.status} Bad Request"
        body = json.dumps(error.body()).encode()
    headers = [
        ("Content-Type", "application/x-amz-json-1.0"),
        ("Content-Length", str(len(body))),
        ("x-amzn-RequestId", uuid.uuid4().hex),
    ]
    start_response(status, headers)
    return [body]


def _caller(environ: dict[str, Any]) -> tuple[str, str]:
    """The account and region a request is for, as moto tells them (its tables are kept by
    account and region): the region of the signature's scope; `MOTO_ACCOUNT_ID`, moto's
    header, or its default account (the embedded server has no IAM to map access keys)."""
    account = (
        os.environ.get("MOTO_ACCOUNT_ID")
        or environ.get("HTTP_X_MOTO_ACCOUNT_ID")
        or DEFAULT_ACCOUNT_ID
    )
    authorization = str(environ.get("HTTP_AUTHORIZATION", ""))
    region = "us-east-1"
    if "Credential=" in authorization:
        scope = authorization.split("Credential=", 1)[1].split(",", 1)[0].split("/")
        if len(scope) > 2:
            region = scope[2]
    return account, region


def _stream(arn: Any) -> Stream:
    with _registry_lock:
        stream = _streams.get(arn) if isinstance(arn, str) else None
    if stream is None:
        raise _not_found(f"Requested resource not found: Stream: {arn} not found")
    return stream


def _limit(request: dict[str, Any], name: str, most: int) -> int:
    value = request.get(name, most)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _invalid(f"One or more parameter values were invalid: {name} should be positive")
    if value > most:
        raise _invalid(
            f"One or more parameter values were invalid: {name} should be less than or equal"
            f" to {most}"
        )
    return value


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _list_streams(request: dict[str, Any], environ: dict[str, Any]) -> bytes:
    limit = _limit(request, "Limit", 100)
    account, region = _caller(environ)
    table_name = request.get("TableName")
    with _registry_lock:
        streams: Iterable[Stream] = list(reversed(_streams.values()))  # newest first
    listed = [
        s
        for s in streams
        if (s.account, s.region) == (account, region)
        and (table_name is None or s.table_name == table_name)
    ]
    start = request.get("ExclusiveStartStreamArn")
    if start is not None:
        after = [n for n, s in enumerate(listed) if s.arn == start]
        listed = listed[after[0] + 1 :] if after else []
    answer: dict[str, Any] = {
        "Streams": [
            {"StreamArn": s.arn, "TableName": s.table_name, "StreamLabel": s.label}
            for s in listed[:limit]
        ]
    }
    if len(listed) > limit:
        answer["LastEvaluatedStreamArn"] = listed[limit - 1].arn
    return _json(answer)


def _describe_stream(request: dict[str, Any], _: dict[str, Any]) -> bytes:
    _limit(request, "Limit", 100)
    return _json(_stream(request.get("StreamArn")).describe(request.get("ExclusiveStartShardId")))


def _iterator(stream: Stream, position: int, now: float) -> str:
    """An iterator as DynamoDB Local spells one: the stream's ARN, then the shard, the
    position and the time it was issued (which is all it needs: nothing is kept)."""
    inside = f"{stream.shard_id}|{_sequence(position)}|{int(now * 1000):021d}"
    return f"{stream.arn}|001|{base64.b64encode(inside.encode()).decode()}"


def _get_shard_iterator(request: dict[str, Any], _: dict[str, Any]) -> bytes:
    stream = _stream(request.get("StreamArn"))
    if request.get("ShardId") != stream.shard_id:
        raise _not_found("Shard does not exist")
    kind = request.get("ShardIteratorType")
    if kind not in _ITERATOR_TYPES:
        raise _invalid(
            f"1 validation error detected: Value '{kind}' at 'shardIteratorType' failed to"
            " satisfy constraint: Member must satisfy enum value set:"
            " [AFTER_SEQUENCE_NUMBER, LATEST, AT_SEQUENCE_NUMBER, TRIM_HORIZON]"
        )
    sequence: int | None = None
    if kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
        given = request.get("SequenceNumber")
        if not isinstance(given, str) or not given.isdigit():
            raise _invalid("One or more parameter values were invalid: Invalid SequenceNumber")
        sequence = int(given)
    now = clock()
    return _json({"ShardIterator": _iterator(stream, stream.position(kind, sequence, now), now)})


def _get_records(request: dict[str, Any], _: dict[str, Any]) -> bytes:
    limit = _limit(request, "Limit", MAX_GET_RECORDS)
    given = request.get("ShardIterator")
    try:
        assert isinstance(given, str)
        arn, version, inside = given.rsplit("|", 2)
        shard_id, position_text, issued_text = (
            base64.b64decode(inside, validate=True).decode().split("|")
        )
        position, issued = int(position_text), int(issued_text) / 1000
    except (AssertionError, ValueError, binascii.Error, UnicodeDecodeError) as error:
        raise _invalid("Invalid ShardIterator") from error
    stream = _stream(arn)
    if shard_id != stream.shard_id or version != "001":
        raise _invalid("Invalid ShardIterator")
    now = clock()
    if now - issued > ITERATOR_LIFETIME:
        raise StreamsError(
            "ExpiredIteratorException",
            "The shard iterator has expired and can no longer be used to retrieve stream"
            " records. A shard iterator expires 15 minutes after it is retrieved using the"
            " GetShardIterator action.",
        )
    records, following, finished = stream.read(position, limit, now)
    # Records are JSON already: the answer is put together, not serialized again.
    answer = b'{"Records":[' + ",".join(records).encode() + b"]"
    if not finished:
        answer += b',"NextShardIterator":' + _json(_iterator(stream, following, now))
    return answer + b"}"


_OPERATIONS: dict[str, Callable[[dict[str, Any], dict[str, Any]], bytes]] = {
    "ListStreams": _list_streams,
    "DescribeStream": _describe_stream,
    "GetShardIterator": _get_shard_iterator,
    "GetRecords": _get_records,
}


# -- DynamoDB's item size (SizeBytes) ----------------------------------------------------------


def _item_size(attributes: dict[str, Any]) -> int:
    return sum(len(name.encode()) + _value_size(value) for name, value in attributes.items())


def _value_size(value: dict[str, Any]) -> int:
    """DynamoDB's size of an attribute value in wire form (checked against DynamoDB Local)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        return _number_size(str(inner))
    if kind == "B":
        return _binary_size(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(v).encode()) for v in inner)
    if kind == "NS":
        return sum(_number_size(str(v)) for v in inner)
    if kind == "BS":
        return sum(_binary_size(v) for v in inner)
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in inner.items())
    return 0


def _wire_binary(value: Any) -> str:
    """A binary value as the wire carries it (moto holds some as bytes): base64 text."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot put {type(value).__name__} in a stream record")


def _binary_size(value: Any) -> int:
    if isinstance(value, bytes):
        return len(value)
    try:
        return len(base64.b64decode(str(value)))
    except (ValueError, binascii.Error):
        return len(str(value))


def _number_size(text: str) -> int:
    """1 byte per pair of significant digits (pairs counted from the decimal point), 1 more,
    and 1 more for a negative number; 0 is 1 byte."""
    try:
        number = Decimal(text).normalize()
    except InvalidOperation:
        return len(text)
    if number.is_zero():
        return 1
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    highest = exponent + len(digits) - 1
    return highest // 2 - exponent // 2 + 1 + 1 + sign
