"""Reads sent straight to our transport (`store/direct.py`, `store/signing.py`): on the wire
and to their callers, what boto3's own path would have sent and answered."""

from __future__ import annotations

import datetime as dt
import socket
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from support import free_port

from graph_api.graph.context import Services
from graph_api.settings import Settings
from graph_api.store.client import Dynamo
from graph_api.store.signing import Signer

# -- the signature ---------------------------------------------------------------------------


def botocore_authorization(
    url: str,
    headers: dict[str, str],
    body: bytes,
    credentials: Credentials,
    when: dt.datetime,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """What botocore's SigV4 writes for this request at `when`."""
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: when)
    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    SigV4Auth(credentials, "dynamodb", "eu-west-1").add_auth(request)
    return str(request.headers["Authorization"])


@pytest.mark.parametrize("token", [None, "session-token"])
@pytest.mark.parametrize(
    "extra",
    [{}, {"X-Amzn-Trace-Id": "Root=1-abc"}, {"X-Custom": "  two   spaces  "}],
)
def test_the_signature_is_botocores(
    monkeypatch: pytest.MonkeyPatch, token: str | None, extra: dict[str, str]
) -> None:
    when = dt.datetime(2026, 11, 26, 23, 59, 59)
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    body = '{"TableName": "graph", "Key": {"PK": {"S": "STUDENT#ß"}}}'.encode()
    headers = {
        "X-Amz-Target": "DynamoDB_20120810.GetItem",
        "Content-Type": "application/x-amz-json-1.0",
        "User-Agent": "graph-api/test",
        "X-Amz-Date": "20261126T235959Z",
        **extra,
    }
    if token:
        headers["X-Amz-Security-Token"] = token
    expected = botocore_authorization(
        "http://127.0.0.1:8000/", headers, body, credentials, when, monkeypatch
    )
    signer = Signer("eu-west-1", "dynamodb")
    for _ in range(2):  # the second time with the day's key kept
        ours = signer.authorization(
            [*headers.items(), ("Host", "127.0.0.1:8000")],
            body,
            access_key=credentials.access_key,
            secret_key=credentials.secret_key,
            amz_date="20261126T235959Z",
        )
        assert ours == expected


def test_a_new_day_or_new_credentials_sign_with_a_new_key(monkeypatch: pytest.MonkeyPatch) -> None:
    signer = Signer("eu-west-1", "dynamodb")
    headers = {"X-Amz-Target": "DynamoDB_20120810.Query", "Host": "localhost:8000"}
    for secret, when in [
        ("first-secret", dt.datetime(2026, 11, 26, 23, 59, 59)),
        ("first-secret", dt.datetime(2026, 11, 27, 0, 0, 1)),
        ("rotated-secret", dt.datetime(2026, 11, 27, 0, 0, 2)),
    ]:
        amz_date = when.strftime("%Y%m%dT%H%M%SZ")
        credentials = Credentials("AKID", secret)
        expected = botocore_authorization(
            "http://localhost:8000/",
            {**headers, "X-Amz-Date": amz_date},
            b"{}",
            credentials,
            when,
            monkeypatch,
        )
        got = signer.authorization(
            [*headers.items(), ("X-Amz-Date", amz_date)],
            b"{}",
            access_key="AKID",
            secret_key=secret,
            amz_date=amz_date,
        )
        assert got == expected


# -- on the wire -----------------------------------------------------------------------------


class OneAnswer:
    """An HTTP server that records each request and answers it with `answer`."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.port = free_port()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.requests: list[tuple[dict[str, str], bytes]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")[1:]
                headers = {k.strip(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
                length = int(headers["Content-Length"])
                while len(data) < length:
                    data += conn.recv(65536)
                body, data = data[:length], data[length:]
                self.requests.append((headers, body))
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
                    b"x-amzn-RequestId: r1\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(self.answer), self.answer)
                )


@pytest.fixture
def recorded() -> Iterator[tuple[OneAnswer, Dynamo]]:
    server = OneAnswer(b'{"Count":0,"Items":[],"ScannedCount":0}')
    dynamo = Dynamo(
        Settings(
            backend="remote",
            endpoint_url=f"http://127.0.0.1:{server.port}",
            region="eu-west-1",
            cursor_secret=b"x",
        )
    )
    yield server, dynamo
    dynamo.close()
    server.listener.close()


def test_a_read_goes_out_signed_as_botocore_would_sign_it(
    recorded: tuple[OneAnswer, Dynamo], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that checks signatures (AWS) would accept the request: signing what arrived
    with botocore, at the request's own X-Amz-Date, gives the Authorization it carries."""
    server, dynamo = recorded
    assert dynamo.direct is not None
    params = {
        "TableName": "graph",
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": {"S": "CLASS#ünïcode"}},
        "Limit": 3,
    }
    answer = dynamo.call_sync("Query", params, None)
    assert answer["Items"] == [] and answer["ResponseMetadata"]["RequestId"] == "r1"
    [(headers, body)] = server.requests
    assert headers["X-Amz-Target"] == "DynamoDB_20120810.Query"
    assert headers["Content-Type"] == "application/x-amz-json-1.0"
    assert orjson.loads(body) == {**params, "ReturnConsumedCapacity": "TOTAL"}
    when = dt.datetime.strptime(headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
    # Accept-Encoding is written by the transport after signing, as http.client writes it
    # under botocore's own path.
    unsigned = ("Authorization", "Content-Length", "Accept-Encoding")
    sent = {k: v for k, v in headers.items() if k not in unsigned}
    expected = botocore_authorization(
        f"http://127.0.0.1:{server.port}/",
        sent,
        body,
        Credentials("local", "local"),
        when,
        monkeypatch,
    )
    assert headers["Authorization"] == expected


# -- to the caller ---------------------------------------------------------------------------


def test_answers_and_errors_are_boto3s(services: Services, demo_items: list[Any]) -> None:
    """The same calls through the direct path and through boto3's own: equal answers (but
    the request id), equal errors."""
    ours = services.dynamo
    assert ours.direct is not None
    boto3_only = Dynamo(services.settings)
    boto3_only.direct = None
    table = services.settings.table
    students = [i for i in demo_items if i["type"] == "student"]
    first = students[0]
    key = {"PK": {"S": first["PK"]}, "SK": {"S": first["SK"]}}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("GetItem", {"TableName": table, "Key": key, "ConsistentRead": True}),
        ("GetItem", {"TableName": table, "Key": {"PK": {"S": "nobody"}, "SK": {"S": "x"}}}),
        (
            "Query",
            {
                "TableName": table,
                "IndexName": "GSI1",
                "KeyConditionExpression": "GSI1PK = :pk",
                "ExpressionAttributeValues": {":pk": {"S": first["GSI1PK"]}},
                "Limit": 2,  # a page that says where the next one starts
            },
        ),
        (
            "BatchGetItem",
            {
                "RequestItems": {
                    table: {
                        "Keys": [{"PK": {"S": s["PK"]}, "SK": {"S": s["SK"]}} for s in students]
                    }
                }
            },
        ),
    ]
    try:
        for operation, params in calls:
            a = ours.call_sync(operation, params, None)
            b = boto3_only.call_sync(operation, params, None)
            for answer in (a, b):
                metadata = answer.pop("ResponseMetadata")
                assert metadata["HTTPStatusCode"] == 200 and metadata["RetryAttempts"] == 0
            if operation == "BatchGetItem":  # unordered, as DynamoDB answers it
                for answer in (a, b):
                    answer["Responses"][table].sort(key=lambda item: item["PK"]["S"])
            assert a == b, operation
        assert "LastEvaluatedKey" in a or operation != "Query"

        errors = []
        for dynamo in (ours, boto3_only):
            for operation, params in [
                ("GetItem", {"TableName": "no-such-table", "Key": key}),
                ("Query", {"TableName": table, "KeyConditionExpression": "PK = :missing"}),
            ]:
                with pytest.raises(ClientError) as caught:
                    dynamo.call_sync(operation, params, None)
                error = caught.value
                errors.append((type(error).__name__, error.operation_name, error.response["Error"]))
        assert errors[:2] == errors[2:]
        assert [e[2]["Code"] for e in errors[:2]] == [
            "ResourceNotFoundException",
            "ValidationException",
        ]
    finally:
        boto3_only.close()


def test_writes_and_binary_values_take_boto3s_path(services: Services) -> None:
    """Only plain-JSON reads go direct: anything else is left to boto3, with nothing sent."""
    direct = services.dynamo.direct
    assert direct is not None
    table = services.settings.table
    binary = {"TableName": table, "Key": {"PK": {"B": b"\x00\x01"}, "SK": {"S": "x"}}}
    write = {"TableName": table, "Item": {"PK": {"S": "x"}, "SK": {"S": "x"}}}
    sent: list[str] = []

    def count(**_: Any) -> None:
        sent.append("sent")

    events = services.dynamo.client.meta.events
    events.register("before-send.dynamodb", count)
    try:
        assert direct.call("GetItem", binary) is None
        assert direct.call("PutItem", write) is None
    finally:
        events.unregister("before-send.dynamodb", count)
    assert sent == []
