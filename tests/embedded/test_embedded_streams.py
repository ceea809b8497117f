"""DynamoDB Streams as DynamoDB serves them, which the embedded backend restores
(embedded/streams.py).

Each test states what DynamoDB does; it runs on both backends, so DynamoDB Local shows the
behaviour is DynamoDB's own and moto shows the embedded backend matches it. Tests that pin
how (the bound on records, what a write or a read touches, iterators and records that age)
run on moto only, against a server in this process where they can move its bound and clock.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from embedded_client import Client
from support import wire_key

from graph_api.embedded import EmbeddedDynamoDB
from graph_api.store import admin
from graph_api.store.client import LOCAL_CREDENTIALS

Record = dict[str, Any]


@dataclass
class Streamed:
    """A table with a stream, and the clients to write it and read its stream."""

    db: Client
    streams: Client
    name: str
    arn: str
    shard: str

    def iterator(self, kind: str, sequence: str | None = None) -> str:
        extra = {"SequenceNumber": sequence} if sequence is not None else {}
        answer = self.streams.get_shard_iterator(
            StreamArn=self.arn, ShardId=self.shard, ShardIteratorType=kind, **extra
        )
        return str(answer["ShardIterator"])

    def read(self, iterator: str, limit: int | None = None) -> tuple[list[Record], str | None]:
        extra = {"Limit": limit} if limit is not None else {}
        answer = self.streams.get_records(ShardIterator=iterator, **extra)
        return answer["Records"], answer.get("NextShardIterator")

    def drain(self, iterator: str) -> tuple[list[Record], str | None]:
        """Every record from the iterator on: pages until one is empty (or the shard ends)."""
        found: list[Record] = []
        following: str | None = iterator
        while following is not None:
            records, after = self.read(following)
            if not records:
                return found, after
            found += records
            following = after
        return found, None

    def put(self, pk: str, **attrs: Any) -> None:
        self.db.put_item(TableName=self.name, Item={**wire_key(pk), **attrs})

    def update(self, pk: str, **attrs: Any) -> None:
        """An UpdateItem that SETs each of `attrs` (wire values) on the item `pk`."""
        expression = ", ".join(f"{name} = :{name}" for name in attrs)
        self.db.update_item(
            TableName=self.name,
            Key=wire_key(pk),
            UpdateExpression=f"SET {expression}",
            ExpressionAttributeValues={f":{name}": value for name, value in attrs.items()},
        )


def _clients(endpoint: str) -> tuple[Client, Client]:
    options = {"endpoint_url": endpoint, "region_name": "us-east-1", **LOCAL_CREDENTIALS}
    return boto3.client("dynamodb", **options), boto3.client("dynamodbstreams", **options)


MakeStream = Callable[..., Streamed]


def _stream_maker(endpoint: str) -> Iterator[MakeStream]:
    db, streams = _clients(endpoint)
    made: list[str] = []

    def make(view_type: str = "NEW_AND_OLD_IMAGES") -> Streamed:
        name = f"test-streams-{uuid.uuid4().hex[:8]}"
        spec = {"StreamEnabled": True, "StreamViewType": view_type}
        db.create_table(**{**admin.definition(name), "StreamSpecification": spec})
        made.append(name)
        arn = db.describe_table(TableName=name)["Table"]["LatestStreamArn"]
        shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        return Streamed(db, streams, name, arn, shards[0]["ShardId"])

    yield make
    for name in made:
        with contextlib.suppress(db.exceptions.ResourceNotFoundException):
            db.delete_table(TableName=name)  # unless the test deleted it


@pytest.fixture
def make_stream(endpoint: str) -> Iterator[MakeStream]:
    yield from _stream_maker(endpoint)


@pytest.fixture
def s(make_stream: MakeStream) -> Streamed:
    return make_stream()


def _error(call: Callable[[], Any]) -> str:
    with pytest.raises(ClientError) as refused:
        call()
    return str(refused.value.response["Error"]["Code"])


def _kinds(records: list[Record]) -> list[tuple[str, str]]:
    return [(r["eventName"], r["dynamodb"]["Keys"]["PK"]["S"]) for r in records]


def test_a_table_created_with_a_stream_describes_and_lists_it(s: Streamed) -> None:
    described = s.db.describe_table(TableName=s.name)["Table"]
    assert described["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    assert (
        described["LatestStreamArn"]
        == f"{described['TableArn']}/stream/" + (described["LatestStreamLabel"])
    )
    listed = s.streams.list_streams(TableName=s.name)["Streams"]
    assert listed == [
        {"StreamArn": s.arn, "TableName": s.name, "StreamLabel": described["LatestStreamLabel"]}
    ]
    stream = s.streams.describe_stream(StreamArn=s.arn)["StreamDescription"]
    assert (stream["StreamStatus"], stream["StreamViewType"], stream["TableName"]) == (
        "ENABLED",
        "NEW_AND_OLD_IMAGES",
        s.name,
    )
    assert stream["KeySchema"] == described["KeySchema"]
    (shard,) = stream["Shards"]
    assert "EndingSequenceNumber" not in shard["SequenceNumberRange"]  # open


def test_put_update_delete_record_insert_modify_remove_with_their_images(s: Streamed) -> None:
    start = s.iterator("TRIM_HORIZON")
    s.put("a", v={"N": "1"})
    s.update("a", v={"N": "2"}, w={"S": "x"})
    # An update of an item that does not exist creates it: one INSERT, the whole new item.
    s.update("b", v={"S": "new"})
    s.db.delete_item(TableName=s.name, Key=wire_key("a"))
    records, _ = s.drain(start)

    assert _kinds(records) == [("INSERT", "a"), ("MODIFY", "a"), ("INSERT", "b"), ("REMOVE", "a")]
    one, two, three, four = (r["dynamodb"] for r in records)
    first = {**wire_key("a"), "v": {"N": "1"}}
    second = {**wire_key("a"), "v": {"N": "2"}, "w": {"S": "x"}}
    assert (one.get("OldImage"), one["NewImage"]) == (None, first)
    assert (two["OldImage"], two["NewImage"]) == (first, second)
    assert (three.get("OldImage"), three["NewImage"]) == (
        None,
        {**wire_key("b"), "v": {"S": "new"}},
    )
    assert (four["OldImage"], four.get("NewImage")) == (second, None)
    assert [r["Keys"] for r in (one, two, four)] == [wire_key("a")] * 3
    for record in records:
        assert record["eventSource"] == "aws:dynamodb"
        assert record["eventVersion"] and record["eventID"] and record["awsRegion"]
        assert record["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert record["dynamodb"]["ApproximateCreationDateTime"]
    sequences = [r["SequenceNumber"] for r in (one, two, three, four)]
    assert all(n.isdigit() for n in sequences)
    assert [int(n) for n in sequences] == sorted({int(n) for n in sequences})
    # DynamoDB's item size of the keys and images: a name's bytes plus its value's (a
    # string's bytes, a number 1 byte per 2 digits + 1); the keys are 3 + 3 bytes.
    assert [one["SizeBytes"], two["SizeBytes"]] == [6 + 9, 6 + 9 + 11]


def test_binary_attributes_are_recorded_as_the_bytes_written(s: Streamed) -> None:
    start = s.iterator("TRIM_HORIZON")
    s.put("a", blob={"B": b"\x00\xffbytes"}, blobs={"BS": [b"a", b"\x00"]})
    (record,), _ = s.drain(start)
    # botocore decodes B and BS from the wire's base64: the bytes written, as they were.
    image = record["dynamodb"]["NewImage"]
    assert sorted(image.pop("blobs")["BS"]) == [b"\x00", b"a"]  # a set: in no order
    assert image == {**wire_key("a"), "blob": {"B": b"\x00\xffbytes"}}
    assert record["dynamodb"]["SizeBytes"] == 6 + (6 + 4 + 7 + 5 + 2)  # the keys, the image


def test_writes_that_change_nothing_record_nothing(s: Streamed) -> None:
    s.put("a", v={"N": "1"})
    after_put = s.iterator("LATEST")
    s.put("a", v={"N": "1"})  # the same item again
    s.update("a", v={"N": "1"})  # to the value it holds
    s.db.delete_item(TableName=s.name, Key=wire_key("nothing"))
    refused = [
        lambda: s.db.put_item(
            TableName=s.name,
            Item={**wire_key("a"), "v": {"N": "9"}},
            ConditionExpression="attribute_not_exists(PK)",
        ),
        lambda: s.db.update_item(
            TableName=s.name,
            Key=wire_key("a"),
            UpdateExpression="SET v = :v",
            ConditionExpression="v = :old",
            ExpressionAttributeValues={":v": {"N": "9"}, ":old": {"N": "5"}},
        ),
        lambda: s.db.delete_item(
            TableName=s.name, Key=wire_key("a"), ConditionExpression="attribute_not_exists(PK)"
        ),
    ]
    for call in refused:
        assert _error(call) == "ConditionalCheckFailedException"
    s.put("a", v={"N": "2"})  # the one change
    records, _ = s.drain(after_put)
    assert _kinds(records) == [("MODIFY", "a")]
    assert records[0]["dynamodb"]["NewImage"]["v"] == {"N": "2"}


def test_a_batch_write_records_each_item_it_changed(s: Streamed) -> None:
    s.put("gone")
    start = s.iterator("LATEST")
    requests = [{"PutRequest": {"Item": wire_key(f"b{n}")}} for n in range(3)]
    requests.append({"DeleteRequest": {"Key": wire_key("gone")}})
    s.db.batch_write_item(RequestItems={s.name: requests})
    records, _ = s.drain(start)
    assert _kinds(records) == [
        ("INSERT", "b0"),
        ("INSERT", "b1"),
        ("INSERT", "b2"),
        ("REMOVE", "gone"),
    ]


def _transaction(s: Streamed, gate_condition: str) -> list[dict[str, Any]]:
    return [
        {"Put": {"TableName": s.name, "Item": {**wire_key("new"), "v": {"S": "x"}}}},
        {
            "Update": {
                "TableName": s.name,
                "Key": wire_key("kept"),
                "UpdateExpression": "SET v = :v",
                "ExpressionAttributeValues": {":v": {"S": "after"}},
            }
        },
        {"Delete": {"TableName": s.name, "Key": wire_key("old")}},
        {
            "ConditionCheck": {
                "TableName": s.name,
                "Key": wire_key("gate"),
                "ConditionExpression": gate_condition,
            }
        },
    ]


def test_a_committed_transaction_records_one_record_per_item_it_changed(s: Streamed) -> None:
    for pk in ("kept", "old", "gate"):
        s.put(pk, v={"S": "before"})
    start = s.iterator("LATEST")
    s.db.transact_write_items(TransactItems=_transaction(s, "attribute_exists(PK)"))
    records, _ = s.drain(start)
    # The condition check changes nothing: no record of it.
    assert sorted(_kinds(records)) == [("INSERT", "new"), ("MODIFY", "kept"), ("REMOVE", "old")]
    modify = next(r["dynamodb"] for r in records if r["eventName"] == "MODIFY")
    assert (modify["OldImage"]["v"], modify["NewImage"]["v"]) == ({"S": "before"}, {"S": "after"})


def test_a_refused_transaction_records_nothing_and_open_iterators_still_read(
    s: Streamed,
) -> None:
    for pk in ("kept", "old"):
        s.put(pk, v={"S": "before"})
    from_start, from_now = s.iterator("TRIM_HORIZON"), s.iterator("LATEST")
    refused = _transaction(s, "attribute_exists(PK)")  # the gate does not exist
    code = _error(lambda: s.db.transact_write_items(TransactItems=refused))
    assert code == "TransactionCanceledException"
    s.put("next")
    records, _ = s.drain(from_start)
    assert _kinds(records) == [("INSERT", "kept"), ("INSERT", "old"), ("INSERT", "next")]
    records, _ = s.drain(from_now)
    assert _kinds(records) == [("INSERT", "next")]


def test_sequence_numbers_position_iterators_at_and_after_a_record(s: Streamed) -> None:
    for n in range(5):
        s.put(f"p{n}")
    records, _ = s.drain(s.iterator("TRIM_HORIZON"))
    third = records[2]["dynamodb"]["SequenceNumber"]
    after, _ = s.drain(s.iterator("AFTER_SEQUENCE_NUMBER", third))
    assert _kinds(after) == [("INSERT", "p3"), ("INSERT", "p4")]
    at, _ = s.drain(s.iterator("AT_SEQUENCE_NUMBER", third))
    assert _kinds(at) == [("INSERT", "p2"), ("INSERT", "p3"), ("INSERT", "p4")]
    assert at == records[2:]  # the same records, read again


def test_latest_sees_only_later_writes(s: Streamed) -> None:
    s.put("before")
    latest = s.iterator("LATEST")
    records, following = s.read(latest)
    assert records == [] and following is not None  # nothing yet, and the shard is open
    s.put("after")
    records, _ = s.drain(latest)
    assert _kinds(records) == [("INSERT", "after")]


def test_get_records_pages_by_limit(s: Streamed) -> None:
    for n in range(5):
        s.put(f"p{n}")
    pages: list[list[str]] = []
    iterator: str | None = s.iterator("TRIM_HORIZON")
    while iterator is not None and len(pages) < 5:
        records, iterator = s.read(iterator, limit=2)
        pages.append([pk for _, pk in _kinds(records)])
    assert pages == [["p0", "p1"], ["p2", "p3"], ["p4"], [], []]


def test_bad_requests_get_dynamodbs_errors(s: Streamed) -> None:
    st, start = s.streams, s.iterator("TRIM_HORIZON")
    assert _error(lambda: st.get_records(ShardIterator=start, Limit=1001)) == (
        "ValidationException"
    )
    unknown = s.arn.replace(s.name, s.name + "-nothing")
    assert _error(lambda: st.describe_stream(StreamArn=unknown)) == "ResourceNotFoundException"
    assert _error(
        lambda: st.get_shard_iterator(
            StreamArn=s.arn, ShardId=s.shard[:-8] + "00000000", ShardIteratorType="LATEST"
        )
    ) == ("ResourceNotFoundException")
    assert _error(
        lambda: st.get_shard_iterator(
            StreamArn=s.arn, ShardId=s.shard, ShardIteratorType="AT_SEQUENCE_NUMBER"
        )
    ) == ("ValidationException")
    assert _error(lambda: st.get_records(ShardIterator="not an iterator" * 2)) == (
        "ValidationException"
    )


def test_a_disabled_stream_closes_and_a_new_one_can_be_enabled(s: Streamed) -> None:
    s.put("a")
    start = s.iterator("TRIM_HORIZON")
    spec = {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    assert _error(lambda: s.db.update_table(TableName=s.name, StreamSpecification=spec)) == (
        "ValidationException"  # the table has an enabled stream already
    )
    s.db.update_table(TableName=s.name, StreamSpecification={"StreamEnabled": False})
    described = s.db.describe_table(TableName=s.name)["Table"]
    assert "StreamSpecification" not in described
    assert described["LatestStreamArn"] == s.arn
    s.put("unrecorded")
    old = s.streams.describe_stream(StreamArn=s.arn)["StreamDescription"]
    assert old["StreamStatus"] == "DISABLED"
    assert "EndingSequenceNumber" in old["Shards"][0]["SequenceNumberRange"]
    # The closed shard reads to its end, and the page that reaches it has no next iterator.
    records, following = s.read(start)
    assert (_kinds(records), following) == ([("INSERT", "a")], None)

    s.db.update_table(TableName=s.name, StreamSpecification=spec)
    arn = s.db.describe_table(TableName=s.name)["Table"]["LatestStreamArn"]
    assert arn != s.arn
    listed = s.streams.list_streams(TableName=s.name)["Streams"]
    assert sorted(stream["StreamArn"] for stream in listed) == sorted([arn, s.arn])
    shard = s.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    s.put("b", v={"S": "x"})
    fresh = Streamed(s.db, s.streams, s.name, arn, shard["ShardId"])
    records, _ = fresh.drain(fresh.iterator("TRIM_HORIZON"))
    assert _kinds(records) == [("INSERT", "b")]
    assert "NewImage" not in records[0]["dynamodb"]  # KEYS_ONLY

    # A deleted table's stream is disabled, and its records stay readable.
    s.db.delete_table(TableName=s.name)
    gone = s.streams.describe_stream(StreamArn=arn)["StreamDescription"]
    assert gone["StreamStatus"] == "DISABLED"
    records, _ = fresh.drain(fresh.iterator("TRIM_HORIZON"))
    assert _kinds(records) == [("INSERT", "b")]


@pytest.mark.parametrize(
    "view_type,images",
    [
        ("KEYS_ONLY", set()),
        ("NEW_IMAGE", {"NewImage"}),
        ("OLD_IMAGE", {"OldImage"}),
        ("NEW_AND_OLD_IMAGES", {"NewImage", "OldImage"}),
    ],
)
def test_a_record_carries_the_images_its_view_type_asks_for(
    make_stream: MakeStream, view_type: str, images: set[str]
) -> None:
    s = make_stream(view_type)
    s.put("a", v={"N": "1"})
    s.put("a", v={"N": "2"})
    records, _ = s.drain(s.iterator("TRIM_HORIZON"))
    modify = records[1]["dynamodb"]
    assert (records[1]["eventName"], modify["StreamViewType"]) == ("MODIFY", view_type)
    assert {"NewImage", "OldImage"} & set(modify) == images
    assert modify["Keys"] == wire_key("a")


# -- moto only: how the embedded backend keeps its streams ------------------------------------


@pytest.fixture
def inside(backend: str) -> Iterator[str]:
    """An embedded server in this process (its streams module is the test's)."""
    if backend != "moto":
        pytest.skip("pins how the embedded backend keeps its streams")
    server = EmbeddedDynamoDB(in_process=True)
    yield server.start()
    server.stop()


@pytest.fixture
def make_inside_stream(inside: str) -> Iterator[MakeStream]:
    yield from _stream_maker(inside)


class _Touches(list[Any]):
    """A stream's ring that counts the slots read or written."""

    touched = 0

    def __getitem__(self, index: Any) -> Any:
        _Touches.touched += 1
        return super().__getitem__(index)

    def __setitem__(self, index: Any, value: Any) -> None:
        _Touches.touched += 1
        super().__setitem__(index, value)


def test_a_stream_keeps_a_bounded_count_of_records(
    make_inside_stream: MakeStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph_api.embedded import streams

    monkeypatch.setattr(streams, "MAX_RECORDS", 20)
    s = make_inside_stream()
    oldest = s.iterator("TRIM_HORIZON")
    for n in range(20):
        s.put(f"p{n:02d}")
    first = s.read(oldest)[0][0]["dynamodb"]["SequenceNumber"]  # still there
    for n in range(20, 50):
        s.put(f"p{n:02d}")
    # DynamoDB answers a read of trimmed records so (after 24 h there; here past the bound).
    assert _error(lambda: s.read(oldest)) == "TrimmedDataAccessException"
    assert _error(lambda: s.iterator("AT_SEQUENCE_NUMBER", first)) == ("TrimmedDataAccessException")
    records, _ = s.drain(s.iterator("TRIM_HORIZON"))
    assert [pk for _, pk in _kinds(records)] == [f"p{n:02d}" for n in range(30, 50)]
    stream = streams._streams[s.arn]
    assert len(stream._ring) == 20  # the ring never grows past the bound


def test_writes_and_reads_touch_only_their_own_records(
    make_inside_stream: MakeStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write appends its records and a read copies those it returns, however long the
    stream: what moto's stream did instead (a copy of it per transaction) is refused."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    from graph_api.embedded import streams

    def refuse(self: Any, memo: Any = None) -> Any:
        raise AssertionError("a stream was copied")

    monkeypatch.setattr(streams.Stream, "__deepcopy__", refuse)
    monkeypatch.setattr(streams, "MAX_RECORDS", 100)
    s = make_inside_stream()
    stream = streams._streams[s.arn]
    stream._ring = _Touches(stream._ring)

    def write() -> int:
        _Touches.touched = 0
        s.db.transact_write_items(
            TransactItems=[{"Put": {"TableName": s.name, "Item": wire_key(f"t{uuid.uuid4().hex}")}}]
        )
        s.put(f"p{uuid.uuid4().hex}")
        return _Touches.touched

    for n in range(150):  # past the bound: the ring is full, every write trims one
        s.put(f"x{n}")
    short = write()
    for n in range(500):
        s.put(f"y{n}")
    assert write() == short  # the same slots, however many records were written before
    iterator = s.iterator("AFTER_SEQUENCE_NUMBER", str(stream.retained()[1] - 5).zfill(21))
    _Touches.touched = 0
    records, _ = s.read(iterator, limit=3)
    assert len(records) == 3 and _Touches.touched <= 3 + 1  # the 3, and the oldest's age
    # moto's own recording is off: the table's stream is ours.
    moto_table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[s.name]
    assert isinstance(moto_table.stream_shard, streams.Stream)


def test_iterators_expire_after_15_minutes_and_records_after_24_hours(
    make_inside_stream: MakeStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph_api.embedded import streams

    now = [1_800_000_000.0]
    monkeypatch.setattr(streams, "clock", lambda: now[0])
    s = make_inside_stream()
    s.put("a")
    start = s.iterator("TRIM_HORIZON")
    now[0] += 15 * 60 - 1
    records, following = s.read(start)
    assert _kinds(records) == [("INSERT", "a")] and following is not None
    now[0] += 2  # the first iterator is 15 minutes and a second old; the one it gave is not
    assert _error(lambda: s.read(start)) == "ExpiredIteratorException"
    assert s.read(following)[0] == []
    s.put("b")
    now[0] += 24 * 60 * 60 - 5  # "a" is over 24 hours old, "b" is not
    records, _ = s.drain(s.iterator("TRIM_HORIZON"))
    assert _kinds(records) == [("INSERT", "b")]
    now[0] += 10
    assert s.drain(s.iterator("TRIM_HORIZON"))[0] == []


def test_a_record_is_readable_only_once_its_write_is_visible(
    make_inside_stream: MakeStream,
) -> None:
    """A stream reader that sees a record and reads the item sees the change: a transaction's
    records appear once its swap is done, not while it waits for it."""
    from graph_api.embedded import isolation

    s = make_inside_stream()
    s.put("kept", v={"S": "before"})
    latest = s.iterator("LATEST")
    done = threading.Event()

    def transact() -> None:
        s.db.transact_write_items(TransactItems=_transaction(s, "attribute_not_exists(PK)"))
        done.set()

    with isolation.tables.read():  # a long read: the transaction waits to swap in
        writer = threading.Thread(target=transact)
        writer.start()
        give_up = time.monotonic() + 60  # a bound on the wait, not on how fast it is
        while isolation.tables._writers_waiting == 0:  # nothing notifies a waiting writer
            assert time.monotonic() < give_up, "the transaction never reached its swap"
            time.sleep(0.005)
        assert s.read(latest)[0] == []  # computed, not swapped in: nothing to read
    writer.join(30)
    assert done.is_set()
    records, _ = s.drain(latest)
    assert sorted(_kinds(records)) == [("INSERT", "new"), ("MODIFY", "kept")]
