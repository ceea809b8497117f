"""Our DynamoDB response parser (store/response_parser.py) gives exactly botocore's output.

Every call records the HTTP response botocore hands its parser (`before-parse`); the test
parses that same response with botocore's stock `JSONParser` and checks that the client,
built as the API builds it, returned exactly that. Runs on both backends (`--backend`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.parsers import JSONParser, ResponseParserError, ResponseParserFactory
from support import make_settings

from graph_api import __version__
from graph_api.store import admin
from graph_api.store.client import Dynamo, Streams
from graph_api.store.response_parser import DynamoJSONParser, DynamoResponseParserFactory

STOCK = JSONParser()


class Recorder:
    """A Dynamo on a fresh table that records each response botocore parses."""

    def __init__(self, dynamo: Dynamo, name: str) -> None:
        self.dynamo = dynamo
        self.table = name
        self.raw: list[dict[str, Any]] = []
        dynamo.client.meta.events.register("before-parse.dynamodb.*", self._keep)

    def _keep(self, response_dict: dict[str, Any], **_: Any) -> None:
        self.raw.append(dict(response_dict))

    def expected(self, operation: str, raw: dict[str, Any]) -> dict[str, Any]:
        """What botocore's own parser makes of `raw`."""
        model = self.dynamo.client.meta.service_model.operation_model(operation)
        parsed: dict[str, Any] = STOCK.parse(raw, model.output_shape)
        return parsed

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Run `operation` (with ReturnConsumedCapacity, as the API sends it) and check that
        our parse equals botocore's; return the response."""
        self.raw.clear()
        response: dict[str, Any] = self.dynamo.call_sync(operation, params, None)
        assert len(self.raw) == 1
        # The retry handler adds RetryAttempts and MaxAttemptsReached after parsing.
        metadata = {**response["ResponseMetadata"]}
        assert metadata.pop("RetryAttempts") == 0
        metadata.pop("MaxAttemptsReached", None)
        assert {**response, "ResponseMetadata": metadata} == self.expected(operation, self.raw[0])
        assert "ConsumedCapacity" in response or operation == "BatchWriteItem"
        return response

    def error(self, operation: str, params: dict[str, Any]) -> ClientError:
        self.raw.clear()
        with pytest.raises(ClientError) as caught:
            self.dynamo.call_sync(operation, params, None)
        return caught.value


@pytest.fixture
def rec(endpoint: str) -> Iterator[Recorder]:
    settings = make_settings(endpoint)
    dynamo = Dynamo(settings)
    admin.create(dynamo, settings.table)
    yield Recorder(dynamo, settings.table)
    dynamo.call_sync("DeleteTable", {"TableName": settings.table}, None)
    dynamo.close()


def s(value: str) -> dict[str, str]:
    return {"S": value}


def student(n: int, extra: int = 0) -> dict[str, Any]:
    sid = f"STUDENT#stu-{n:03d}"
    return {
        "PK": s(sid),
        "SK": s(sid),
        "GSI1PK": s("CATALOG#STUDENT"),
        "GSI1SK": s(sid),
        "name": s(f'Ana Ø {n} \u2603 "quoted" \\ back'),
        "grade": {"N": str(n)},
        "active": {"BOOL": n % 2 == 0},
        "home": {"NULL": True},
        "classes": {
            "M": {
                f"cls-{c:03d}": {"M": {"name": s(f"Class {c}"), "room": {"N": str(c)}}}
                for c in range(6)
            }
        },
        "tags": {"L": [s("a"), {"N": "-12"}, {"L": []}, {"M": {}}]},
        "empty": s(""),
        "padding": s("x" * extra),
    }


def key(n: int) -> dict[str, Any]:
    sid = f"STUDENT#stu-{n:03d}"
    return {"PK": s(sid), "SK": s(sid)}


def test_the_client_parses_with_our_parser(rec: Recorder) -> None:
    factory = rec.dynamo.client._endpoint._response_parser_factory
    assert isinstance(factory, DynamoResponseParserFactory)
    assert isinstance(factory.create_parser("json"), DynamoJSONParser)
    assert type(factory.create_parser("rest-xml")) is type(
        ResponseParserFactory().create_parser("rest-xml")
    )


def test_requests_say_who_sends_them(rec: Recorder) -> None:
    """The User-Agent names the API and botocore, built once (store/client.py) rather than
    twice a call; an operator finds our requests in CloudTrail by it."""
    sent: list[str] = []
    rec.dynamo.client.meta.events.register(
        "before-send.dynamodb.*", lambda request, **_: sent.append(request.headers["User-Agent"])
    )
    rec.call("GetItem", {"TableName": rec.table, "Key": key(1)})
    assert len(sent) == 1
    agent = sent[0].decode() if isinstance(sent[0], bytes) else sent[0]
    assert agent.startswith(f"graph-api/{__version__} Botocore/")


def test_every_operation_we_use_parses_as_botocore_does(rec: Recorder) -> None:
    name = rec.table
    for n in range(5):
        rec.call("PutItem", {"TableName": name, "Item": student(n)})
    rec.call(
        "PutItem", {"TableName": name, "Item": student(0), "ReturnValues": "ALL_OLD"}
    )  # Attributes: the old item
    rec.call(
        "BatchWriteItem",
        {"RequestItems": {name: [{"PutRequest": {"Item": student(n)}} for n in range(5, 12)]}},
    )
    got = rec.call("GetItem", {"TableName": name, "Key": key(3)})
    assert got["Item"] == student(3)
    assert "Item" not in rec.call("GetItem", {"TableName": name, "Key": key(99)})
    got = rec.call("BatchGetItem", {"RequestItems": {name: {"Keys": [key(n) for n in (1, 2, 99)]}}})
    assert sorted(i["grade"]["N"] for i in got["Responses"][name]) == ["1", "2"]
    page = rec.call(
        "Query",
        {
            "TableName": name,
            "IndexName": "GSI1",
            "KeyConditionExpression": "GSI1PK = :pk",
            "ExpressionAttributeValues": {":pk": s("CATALOG#STUDENT")},
            "Limit": 4,
            "ReturnConsumedCapacity": "INDEXES",
        },
    )
    assert len(page["Items"]) == 4 and set(page["LastEvaluatedKey"]) == {
        "PK",
        "SK",
        "GSI1PK",
        "GSI1SK",
    }
    page = rec.call(
        "Query",
        {
            "TableName": name,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": {":pk": s("STUDENT#stu-004")},
            "ConsistentRead": True,
        },
    )
    assert page["Count"] == 1 and "LastEvaluatedKey" not in page
    page = rec.call("Scan", {"TableName": name, "Limit": 3})
    assert page["ScannedCount"] == 3 and "LastEvaluatedKey" in page
    rec.call("Scan", {"TableName": name, "ExclusiveStartKey": page["LastEvaluatedKey"]})
    got = rec.call(
        "UpdateItem",
        {
            "TableName": name,
            "Key": key(1),
            "UpdateExpression": "SET grade = grade + :one, classes.#c = :c",
            "ExpressionAttributeNames": {"#c": "cls-099"},
            "ExpressionAttributeValues": {":one": {"N": "1"}, ":c": {"M": {"name": s("New")}}},
            "ReturnValues": "ALL_NEW",
        },
    )
    assert got["Attributes"]["grade"] == {"N": "2"}
    rec.call(
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": {"TableName": name, "Item": student(20)}},
                {
                    "Update": {
                        "TableName": name,
                        "Key": key(2),
                        "UpdateExpression": "SET active = :t",
                        "ExpressionAttributeValues": {":t": {"BOOL": True}},
                    }
                },
                {"Delete": {"TableName": name, "Key": key(3)}},
                {
                    "ConditionCheck": {
                        "TableName": name,
                        "Key": key(4),
                        "ConditionExpression": "attribute_exists(PK)",
                    }
                },
            ],
        },
    )
    rec.call("DeleteItem", {"TableName": name, "Key": key(20), "ReturnValues": "ALL_OLD"})


def test_unprocessed_keys_parse_as_botocore_does(rec: Recorder) -> None:
    """A BatchGetItem over DynamoDB's 16 MB a response leaves keys unprocessed."""
    name = rec.table
    count = 45  # 45 items of ~390 KB: over 16 MB
    for n in range(count):
        rec.dynamo.call_sync(
            "PutItem", {"TableName": name, "Item": student(n, extra=390_000)}, None
        )
    got = rec.call(
        "BatchGetItem",
        {
            "RequestItems": {
                name: {
                    "Keys": [key(n) for n in range(count)],
                    "ProjectionExpression": "PK, SK, padding, classes",
                }
            }
        },
    )
    unprocessed = got.get("UnprocessedKeys", {}).get(name, {}).get("Keys", [])
    assert unprocessed, "the emulator returned every key: no UnprocessedKeys to compare"
    assert len(got["Responses"][name]) + len(unprocessed) == count


def test_stream_records_parse_as_botocore_does(rec: Recorder, endpoint: str) -> None:
    """The change stream's client (aiobotocore, as the reader runs it) uses the same
    parser: records carry both images, as botocore's own parser reads them."""
    streams = Streams(make_settings(endpoint, table=rec.table))
    raw: list[dict[str, Any]] = []
    streams.register(
        "before-parse.dynamodb-streams.*", lambda response_dict, **_: raw.append(response_dict)
    )
    rec.call("PutItem", {"TableName": rec.table, "Item": student(1)})
    rec.call("PutItem", {"TableName": rec.table, "Item": student(1, extra=3)})
    described = rec.dynamo.call_sync("DescribeTable", {"TableName": rec.table}, None)
    arn = described["Table"]["LatestStreamArn"]

    async def read() -> Any:
        shards = await streams.call("DescribeStream", {"StreamArn": arn})
        shard = shards["StreamDescription"]["Shards"][0]["ShardId"]
        opened = await streams.call(
            "GetShardIterator",
            {"StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"},
        )
        raw.clear()
        got = await streams.call("GetRecords", {"ShardIterator": opened["ShardIterator"]})
        await streams.aclose()
        return got

    got = asyncio.run(read())
    model = botocore.session.get_session().get_service_model("dynamodbstreams")
    expected = STOCK.parse(raw[0], model.operation_model("GetRecords").output_shape)
    metadata = {**got["ResponseMetadata"]}
    metadata.pop("RetryAttempts")
    metadata.pop("MaxAttemptsReached", None)
    assert {**got, "ResponseMetadata": metadata} == expected
    images = [r["dynamodb"] for r in got["Records"]]
    assert images[0]["NewImage"] == student(1)
    assert images[1]["OldImage"] == student(1) and images[1]["NewImage"] == student(1, 3)


def test_binary_attributes_are_bytes_as_botocore_makes_them(rec: Recorder) -> None:
    """botocore decodes B and BS from base64: such responses take botocore's parser."""
    item = {**key(1), "blob": {"B": b"\x00\xffbytes"}, "blobs": {"BS": [b"a", b"b"]}}
    rec.call("PutItem", {"TableName": rec.table, "Item": item})
    # Read back through DeleteItem: the embedded backend's reads (store/embedded/responses.py)
    # write items as JSON directly and have no binary attributes to serve.
    got = rec.call("DeleteItem", {"TableName": rec.table, "Key": key(1), "ReturnValues": "ALL_OLD"})
    assert got["Attributes"]["blob"] == {"B": b"\x00\xffbytes"}
    assert sorted(got["Attributes"]["blobs"]["BS"]) == [b"a", b"b"]


def test_errors_are_botocores_client_errors(rec: Recorder, endpoint: str) -> None:
    """Same ClientError, code, modeled fields and CancellationReasons as a stock client."""
    stock = Dynamo(make_settings(endpoint, table=rec.table))
    stock.client._endpoint._response_parser_factory = ResponseParserFactory()
    name = rec.table
    rec.call("PutItem", {"TableName": name, "Item": student(1)})
    failing: list[tuple[str, dict[str, Any]]] = [
        (
            "PutItem",
            {
                "TableName": name,
                "Item": student(1),
                "ConditionExpression": "attribute_not_exists(PK)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        (
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": {"TableName": name, "Item": student(7)}},
                    {
                        "Put": {
                            "TableName": name,
                            "Item": student(1),
                            "ConditionExpression": "attribute_not_exists(PK)",
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                ]
            },
        ),
        ("Query", {"TableName": name, "KeyConditionExpression": "PK = :missing"}),
        ("GetItem", {"TableName": f"missing-{uuid.uuid4().hex[:6]}", "Key": key(1)}),
    ]
    for operation, params in failing:
        ours = rec.error(operation, params)
        with pytest.raises(ClientError) as caught:
            stock.call_sync(operation, params, None)
        theirs = caught.value
        assert type(ours).__name__ == type(theirs).__name__  # the modeled exception class
        assert ours.operation_name == theirs.operation_name
        mine, stocks = dict(ours.response), dict(theirs.response)
        del mine["ResponseMetadata"], stocks["ResponseMetadata"]  # request ids differ
        assert mine == stocks, operation
        assert rec.raw and rec.raw[0]["status_code"] >= 400
        assert rec.expected(operation, rec.raw[0])["Error"] == ours.response["Error"]
    cancelled = rec.error(*failing[1])
    assert cancelled.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = cancelled.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None", "ConditionalCheckFailed"]
    stock.close()


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{}",
        b'{"Item": {"PK": {"S": "a"}}, "Unknown": {"x": 1}, "ConsumedCapacity": null}',
        b'{"Count": NaN}',  # stdlib json takes it, orjson does not
        b'{"Items": [{"a": {"S": "\\ud800"}}]}',  # a lone surrogate
        b'{"Items": [{"a": {"B": "AAE="}}]}',
        b'{"Items": [{"a": {"BS" :["AAE="]}}]}',
        b'{"Responses": {"t": [{"k": {"S": "v"}}]}, "UnprocessedKeys": {"t": {"Keys": '
        b'[{"k": {"S": "w"}}], "ConsistentRead": true, "Other": 1}}}',
        b"not json",
        b"<html><body>502 Bad Gateway</body></html>",
        b"[]",
    ],
)
def test_odd_bodies_parse_as_botocore_does(body: bytes) -> None:
    """Except one way: a successful answer that is not a JSON object is refused (botocore
    reads it as an empty result)."""
    from botocore.session import get_session

    model = get_session().get_service_model("dynamodb")
    ours = DynamoResponseParserFactory().create_parser("json")
    for operation in ("GetItem", "Query", "BatchGetItem"):
        shape = model.operation_model(operation).output_shape
        for status in (200, 400, 500):
            raw = {"status_code": status, "headers": {"X-Amzn-RequestId": "r"}, "body": body}
            if status == 200 and not body.startswith(b"{"):
                with pytest.raises(ResponseParserError):
                    ours.parse(dict(raw), shape)
                continue
            try:
                expected = STOCK.parse(dict(raw), shape)
            except Exception as error:  # botocore refuses it: so must we, the same way, but
                # where it trips over JSON that is not an object: that is an unreadable answer
                tripped = isinstance(error, AttributeError | TypeError | ValueError)
                with pytest.raises(ResponseParserError if tripped else type(error)):
                    ours.parse(dict(raw), shape)
                continue
            assert ours.parse(dict(raw), shape) == expected
