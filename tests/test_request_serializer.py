"""Our DynamoDB request serializer (store/request_serializer.py) sends exactly botocore's
request: the same body bytes, headers and URL for every operation the store sends, with
items that hold every kind of value our codec writes."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.serialize import JSONSerializer
from support import make_settings

from graph_api.store import codec
from graph_api.store.client import Dynamo
from graph_api.store.request_serializer import DynamoJSONSerializer

ITEM = codec.encode(
    {
        "PK": "STUDENT#s1",
        "SK": "STUDENT#s1",
        "name": 'Ada \u00e9\u4e2d "quoted" \\ \n',
        "version": 3,
        "big": 2**70,
        "public": True,
        "gone": None,
        "home": {"country": "CA", "city": {"name": "Montr\u00e9al", "zip": [1, "2", False]}},
        "classes": {"c1": {"subject": "Maths", "teacherId": "t1"}, "c2": {}},
        "tags": [],
    }
)
KEY = codec.encode({"PK": "CLASS#c1", "SK": "STUDENT#s1"})
VALUES = codec.encode({":pk": "CLASS#c1", ":one": 1, ":item": {"a": [None, True]}})

# Each operation the store sends, with the parameters of its kinds of requests.
REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("GetItem", {"TableName": "t", "Key": KEY, "ConsistentRead": True}),
    (
        "BatchGetItem",
        {
            "RequestItems": {"t": {"Keys": [KEY, codec.encode({"PK": "A", "SK": "B"})]}},
            "ReturnConsumedCapacity": "TOTAL",
        },
    ),
    (
        "Query",
        {
            "TableName": "t",
            "IndexName": "GSI1",
            "KeyConditionExpression": "GSI1PK = :pk AND begins_with(GSI1SK, :one)",
            "ExpressionAttributeValues": VALUES,
            "ExclusiveStartKey": KEY,
            "Limit": 21,
            "ScanIndexForward": False,
        },
    ),
    ("Scan", {"TableName": "t", "ExclusiveStartKey": KEY, "Segment": 0, "TotalSegments": 2}),
    (
        "PutItem",
        {"TableName": "t", "Item": ITEM, "ConditionExpression": "attribute_not_exists(PK)"},
    ),
    (
        "UpdateItem",
        {
            "TableName": "t",
            "Key": KEY,
            "UpdateExpression": "SET #n = :item ADD version :one",
            "ExpressionAttributeNames": {"#n": "name"},
            "ExpressionAttributeValues": VALUES,
            "ReturnValues": "ALL_NEW",
        },
    ),
    ("DeleteItem", {"TableName": "t", "Key": KEY, "ReturnValues": "ALL_OLD"}),
    (
        "BatchWriteItem",
        {"RequestItems": {"t": [{"PutRequest": {"Item": ITEM}}, {"DeleteRequest": {"Key": KEY}}]}},
    ),
    (
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": {"TableName": "t", "Item": ITEM}},
                {
                    "Update": {
                        "TableName": "t",
                        "Key": KEY,
                        "UpdateExpression": "SET studentCount = studentCount + :one",
                        "ExpressionAttributeValues": VALUES,
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": "t",
                        "Key": KEY,
                        "ConditionExpression": "version = :one",
                        "ExpressionAttributeValues": VALUES,
                    }
                },
                {"Delete": {"TableName": "t", "Key": KEY}},
            ],
            "ClientRequestToken": "token",
        },
    ),
    ("TransactGetItems", {"TransactItems": [{"Get": {"TableName": "t", "Key": KEY}}]}),
]


class Counting(JSONSerializer):
    """The client's own serializer, counting the requests handed back to it."""

    calls = 0

    def serialize_to_request(self, parameters: Any, operation_model: Any) -> dict[str, Any]:
        self.calls += 1
        return super().serialize_to_request(parameters, operation_model)  # type: ignore[no-any-return]


def both(operation: str, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Ours and botocore's serialization, and how often ours handed the request back."""
    dynamo: Any = Dynamo(make_settings("http://127.0.0.1:9"))  # never called: models only
    try:
        model = dynamo.client.meta.service_model.operation_model(operation)
        ours = dynamo.client._serializer
        assert isinstance(ours, DynamoJSONSerializer)
        ours._botocore = fallback = Counting()
        mine = ours.serialize_to_request(params, model)
        return mine, JSONSerializer().serialize_to_request(params, model), fallback.calls
    finally:
        dynamo.close()


@pytest.mark.parametrize(("operation", "params"), REQUESTS, ids=[r[0] for r in REQUESTS])
def test_every_operation_is_serialized_as_botocore_does(
    operation: str, params: dict[str, Any]
) -> None:
    ours, stock, handed_back = both(operation, params)
    assert ours == stock  # body bytes, headers, method, URL path and query
    assert handed_back == 0  # the attribute values were taken as given


def test_a_binary_value_is_written_as_base64_as_botocore_does() -> None:
    item = {**ITEM, "blob": {"B": b"\x00\xff"}, "blobs": {"BS": [b"a", b"b"]}}
    ours, stock, handed_back = both("PutItem", {"TableName": "t", "Item": item})
    assert ours == stock
    assert b'"blob": {"B": "AP8="}' in ours["body"]
    assert handed_back == 1
