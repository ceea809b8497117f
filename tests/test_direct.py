"""Reads sent straight to our transport (`store/direct.py`, `store/signing.py`): on the wire
and to their callers, what boto3's own path would have sent and answered."""

from __future__ import annotations

import dataclasses
import datetime as dt
import socket
from collections.abc import Iterator
from typing import Any

import boto3
import orjson
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from support import HTTPServer

from graph_api.graph.context import Services
from graph_api.settings import Settings
from graph_api.store.client import Dynamo
from graph_api.store.direct import DirectCalls
from graph_api.store.ledger import Ledger
from graph_api.store.signing import Signer, timestamp
from graph_api.store.transport import Transport

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


def test_the_date_signed_is_the_second_of_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """`X-Amz-Date` names the second the request is signed in, across midnight too."""
    for now, expected in [
        (1_795_823_999.2, "20261127T235959Z"),
        (1_795_823_999.9, "20261127T235959Z"),
        (1_795_824_000.0, "20261128T000000Z"),
        (1_795_824_061.5, "20261128T000101Z"),
    ]:
        monkeypatch.setattr("graph_api.store.signing.clock", lambda now=now: now)
        assert timestamp() == expected


# -- on the wire -----------------------------------------------------------------------------


ANSWER = b'{"Count":0,"Items":[],"ScannedCount":0}'


def answer_empty(conn: socket.socket, _: bytes) -> bool:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
        b"x-amzn-RequestId: r1\r\nContent-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
    )
    return True


def received(raw: bytes) -> tuple[dict[str, str], bytes]:
    """A recorded request's headers and body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines)}, body


class Ways:
    """Which way each call of a Dynamo went out: botocore's prepared request (`send`) or the
    plain headers and bytes of `_call_plain` (`exchange`)."""

    def __init__(self, dynamo: Dynamo, monkeypatch: pytest.MonkeyPatch) -> None:
        self.taken: list[str] = []
        transport = dynamo.transport
        assert transport is not None
        for way in ("send", "exchange"):
            monkeypatch.setattr(transport, way, self._spy(way, getattr(transport, way)))

    def _spy(self, way: str, real: Any) -> Any:
        def spy(*args: Any) -> Any:
            self.taken.append(way)
            return real(*args)

        return spy

    def last(self) -> str:
        return self.taken[-1]


def dynamo_for(server: HTTPServer) -> Dynamo:
    """A client of the API for `server`'s endpoint, made as the API makes its own."""
    return Dynamo(
        Settings(
            backend="remote",
            endpoint_url=f"http://127.0.0.1:{server.port}",
            region="eu-west-1",
            cursor_secret=b"x",
        )
    )


@pytest.fixture
def recorded() -> Iterator[tuple[HTTPServer, Dynamo]]:
    server = HTTPServer(answer_empty)
    dynamo = dynamo_for(server)
    yield server, dynamo
    dynamo.close()
    server.close()


@pytest.mark.parametrize("token", [None, "session-token"])
def test_a_read_goes_out_signed_as_botocore_would_sign_it(
    recorded: tuple[HTTPServer, Dynamo], monkeypatch: pytest.MonkeyPatch, token: str | None
) -> None:
    """A server that checks signatures (AWS) would accept the request: signing what arrived
    with botocore, at the request's own X-Amz-Date, gives the Authorization it carries. So
    for the first call, which looks botocore's handlers up on its path, and for the next,
    which goes plain, and both answer alike, to the headers."""
    server, dynamo = recorded
    assert dynamo.direct is not None
    credentials = Credentials("local", "local", token)
    monkeypatch.setattr(dynamo.direct, "_credentials", credentials)
    ways = Ways(dynamo, monkeypatch)
    params = {
        "TableName": "graph",
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": {"S": "CLASS#ünïcode"}},
        "Limit": 3,
    }
    answers = [dynamo.call_sync("Query", params, None) for _ in range(2)]
    assert ways.taken == ["send", "exchange"]
    assert answers[0] == answers[1]
    assert answers[0]["Items"] == [] and answers[0]["ResponseMetadata"]["RequestId"] == "r1"
    assert answers[0]["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"] == "r1"
    assert len(server.requests) == 2
    for raw in server.requests:
        headers, body = received(raw)
        assert headers["X-Amz-Target"] == "DynamoDB_20120810.Query"
        assert headers["Content-Type"] == "application/x-amz-json-1.0"
        assert headers.get("X-Amz-Security-Token") == token
        assert orjson.loads(body) == {**params, "ReturnConsumedCapacity": "TOTAL"}
        when = dt.datetime.strptime(headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
        # Accept-Encoding is written by the transport after signing, as http.client writes
        # it under botocore's own path.
        unsigned = ("Authorization", "Content-Length", "Accept-Encoding")
        sent = {k: v for k, v in headers.items() if k not in unsigned}
        expected = botocore_authorization(
            f"http://127.0.0.1:{server.port}/", sent, body, credentials, when, monkeypatch
        )
        assert headers["Authorization"] == expected


# -- to the caller ---------------------------------------------------------------------------


class Pipeline:
    """Counts the calls that went through botocore's request pipeline (its signer runs on
    `request-created`, which the direct path does not emit) on a client."""

    def __init__(self, dynamo: Dynamo) -> None:
        self.calls = 0
        self.events = dynamo.client.meta.events
        self.events.register("request-created.dynamodb", self._count)

    def _count(self, **_: Any) -> None:
        self.calls += 1

    def close(self) -> None:
        self.events.unregister("request-created.dynamodb", self._count)


def outcome(dynamo: Dynamo, operation: str, params: dict[str, Any]) -> tuple[Any, ...]:
    """What a call gave: its answer or its error, but the request's own id and headers
    (dates, lengths); a BatchGetItem's items in key order (DynamoDB answers unordered)."""
    try:
        answer = dynamo.call_sync(operation, params, None)
    except ClientError as error:
        response = {**error.response, "ResponseMetadata": dict(error.response["ResponseMetadata"])}
        del response["ResponseMetadata"]["RequestId"], response["ResponseMetadata"]["HTTPHeaders"]
        return ("error", type(error).__name__, str(error), response)
    metadata = answer["ResponseMetadata"]
    del metadata["RequestId"], metadata["HTTPHeaders"]
    for items in answer.get("Responses", {}).values():
        items.sort(key=lambda item: item["PK"]["S"])
    return ("answer", answer)


def test_answers_and_errors_are_boto3s(
    services: Services, demo_items: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same calls through the direct path and through boto3's own: equal answers (but
    the request id), equal errors, and only boto3's went through botocore's pipeline."""
    ours = services.dynamo
    assert ours.direct is not None
    boto3_only = Dynamo(services.settings)
    boto3_only.direct = None
    pipelines = Pipeline(ours), Pipeline(boto3_only)
    ways = Ways(ours, monkeypatch)
    table = services.settings.table
    students = [i for i in demo_items if i["type"] == "student"]
    first = students[0]
    key = keys_of(first)
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
        ("BatchGetItem", {"RequestItems": {table: {"Keys": [keys_of(s) for s in students]}}}),
        ("GetItem", {"TableName": "no-such-table", "Key": key}),
        ("Query", {"TableName": table, "KeyConditionExpression": "PK = :missing"}),
        # A binary value: written as base64 by botocore's serializer on both paths.
        ("GetItem", {"TableName": table, "Key": {"PK": {"B": b"\x00\xff"}, "SK": {"S": "x"}}}),
    ]
    try:
        outcomes = []
        for operation, params in calls:
            # Ours twice: the first call of an operation looks botocore's handlers up on
            # the path that emits (registering the counters emptied its cache), the second
            # goes plain.
            emitted, plain = outcome(ours, operation, params), outcome(ours, operation, params)
            theirs = outcome(boto3_only, operation, params)
            assert emitted == plain == theirs, operation
            outcomes.append((plain, theirs))
        assert ways.taken[1::2] == ["exchange"] * len(calls)  # each second call plain
        answers = [a[1] for a, _ in outcomes[:4]]
        assert answers[0]["Item"]["PK"] == key["PK"] and "Item" not in answers[1]
        assert len(answers[2]["Items"]) == 2 and "LastEvaluatedKey" in answers[2]
        assert len(answers[3]["Responses"][table]) == len(students)
        assert {**answers[0]["ResponseMetadata"]} == {
            "HTTPStatusCode": 200,
            "RetryAttempts": 0,
            "MaxAttemptsReached": True,
        }
        refused = [a for a, _ in outcomes[4:6]]
        assert [r[1] for r in refused] == ["ResourceNotFoundException", "ClientError"]
        assert refused[1][3]["Error"]["Code"] == "ValidationException"
        assert "(reached max retries: 0)" in refused[0][2]
        assert pipelines[0].calls == 0
        assert pipelines[1].calls == len(calls)
    finally:
        for pipeline in pipelines:
            pipeline.close()
        boto3_only.close()


def keys_of(item: dict[str, Any]) -> dict[str, Any]:
    return {"PK": {"S": item["PK"]}, "SK": {"S": item["SK"]}}


def test_handlers_still_edit_a_direct_call(services: Services) -> None:
    """A `before-parameter-build` handler's edit is what is sent, as on boto3's path."""
    events = services.dynamo.client.meta.events

    def one_only(params: dict[str, Any], **_: Any) -> None:
        params["Limit"] = 1

    params = {
        "TableName": services.settings.table,
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": {"S": "CLASS#cls-001"}},
    }
    assert services.dynamo.call_sync("Query", params, None)["Count"] > 1
    events.register("before-parameter-build.dynamodb.Query", one_only)
    try:
        assert services.dynamo.call_sync("Query", params, None)["Count"] == 1
    finally:
        events.unregister("before-parameter-build.dynamodb.Query", one_only)


def test_writes_take_boto3s_path(services: Services) -> None:
    """Only reads go direct: anything else is left to boto3, with nothing sent."""
    direct = services.dynamo.direct
    assert direct is not None
    write = {"TableName": services.settings.table, "Item": {"PK": {"S": "x"}, "SK": {"S": "x"}}}
    sent: list[str] = []

    def count(**_: Any) -> None:
        sent.append("sent")

    events = services.dynamo.client.meta.events
    events.register("before-send.dynamodb", count)
    try:
        assert direct.call("PutItem", write) is None
        assert direct.call("TransactWriteItems", {"TransactItems": []}) is None
    finally:
        events.unregister("before-send.dynamodb", count)
    assert sent == []


@pytest.mark.parametrize(("attempts", "direct"), [(1, True), (3, False)])
def test_only_a_client_that_makes_one_attempt_goes_direct(
    endpoint: str, attempts: int, direct: bool
) -> None:
    """Direct calls make one attempt: a client configured for botocore's retries keeps
    botocore's path, retries included."""
    client = boto3.session.Session().client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"mode": "standard", "total_max_attempts": attempts}),
    )
    transport = Transport.for_endpoint(endpoint, 1, 1, 1)
    try:
        assert (DirectCalls.for_client(client, transport) is not None) is direct
    finally:
        client.close()
        if transport is not None:
            transport.close()


# -- plain calls: no botocore objects when nothing would see them ----------------------------


def class_query(table: str, class_id: str = "cls-001") -> dict[str, Any]:
    return {
        "TableName": table,
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": {"S": f"CLASS#{class_id}"}},
    }


def test_a_read_nobody_listens_to_goes_plain_and_answers_the_same(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With only botocore's own handlers and our counter on its events, a read goes out
    plain, counted, with the answer of botocore's objects' path; a handler that needs those
    objects takes the read back to that path while it is registered."""
    dynamo = services.dynamo
    ways = Ways(dynamo, monkeypatch)
    params = class_query(services.settings.table)
    dynamo.call_sync("Query", params, None)  # looks the events' handlers up, once
    ledger = Ledger()
    plain = dynamo.call_sync("Query", params, ledger)
    assert ways.last() == "exchange" and ledger.requests == 1
    seen: list[Any] = []

    def inspect(request: Any, **_: Any) -> None:
        seen.append(request)

    events = dynamo.client.meta.events
    events.register("before-send.dynamodb", inspect)
    try:
        ledger = Ledger()
        full = dynamo.call_sync("Query", params, ledger)
        assert ways.last() == "send" and ledger.requests == 1
        assert [r.headers["X-Amz-Target"] for r in seen] == ["DynamoDB_20120810.Query"]
    finally:
        events.unregister("before-send.dynamodb", inspect)
    for answer in (plain, full):
        del answer["ResponseMetadata"]["RequestId"], answer["ResponseMetadata"]["HTTPHeaders"]
    assert plain == full and plain["Count"] > 1
    dynamo.call_sync("Query", params, None)
    dynamo.call_sync("Query", params, None)
    assert ways.taken[-1] == "exchange" and len(seen) == 1  # plain again, unseen


def test_observers_of_a_plain_read_see_it_as_boto3_would_show_it(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`before-parameter-build` and `after-call` handlers (what times or counts calls) keep
    a read plain and are called as on boto3's path: an edit of the parameters is what is
    sent, and the call's end sees the HTTP response, the parsed answer and the context its
    start saw."""
    dynamo = services.dynamo
    ways = Ways(dynamo, monkeypatch)
    ended: list[tuple[int, int, Any]] = []

    def one_only(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        params["Limit"] = 1
        context["mark"] = "started"

    def end(http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        ended.append((http_response.status_code, parsed["Count"], context.get("mark")))

    events = dynamo.client.meta.events
    events.register("before-parameter-build.dynamodb.Query", one_only)
    events.register("after-call.dynamodb.Query", end)
    try:
        params = class_query(services.settings.table)
        dynamo.call_sync("Query", params, None)
        answer = dynamo.call_sync("Query", params, None)
    finally:
        events.unregister("before-parameter-build.dynamodb.Query", one_only)
        events.unregister("after-call.dynamodb.Query", end)
    assert ways.last() == "exchange"
    assert answer["Count"] == 1
    assert ended == [(200, 1, "started")] * 2


def test_a_client_configured_from_the_environment_reads_plain(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`graph-api serve` leaves the endpoint to botocore (`AWS_ENDPOINT_URL_DYNAMODB`), which
    then adds a handler of its own to every call (endpoint discovery, not required by these
    reads): a read still goes plain."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    dynamo = Dynamo(Settings(backend="remote", region="eu-west-1", cursor_secret=b"x"))
    try:
        ways = Ways(dynamo, monkeypatch)
        params = {"TableName": "no-such-table", "Key": {"PK": {"S": "x"}, "SK": {"S": "x"}}}
        for _ in range(2):
            with pytest.raises(ClientError, match="ResourceNotFoundException"):
                dynamo.call_sync("GetItem", params, None)
        assert ways.taken == ["send", "exchange"]  # the first looked the handlers up
    finally:
        dynamo.close()


def test_in_lambda_a_read_carries_the_trace_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """In AWS Lambda botocore adds the invocation's trace id to every request (recursion
    detection): a read there takes the path that runs botocore's handler."""
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "graph-api")
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "Root=1-5e1b4151-5ac6c58f3b0e4f1fb8d8c1a5")
    server = HTTPServer(answer_empty)
    dynamo = dynamo_for(server)  # made in Lambda's environment, as the API is there
    try:
        for _ in range(2):
            dynamo.call_sync("Query", class_query("graph"), None)
        for raw in server.requests:
            headers, _ = received(raw)
            assert headers["X-Amzn-Trace-Id"] == "Root=1-5e1b4151-5ac6c58f3b0e4f1fb8d8c1a5"
        assert len(server.requests) == 2
    finally:
        dynamo.close()
        server.close()


@dataclasses.dataclass
class Tally:
    """A handler that cannot be hashed (a dataclass that compares by value)."""

    calls: int = 0

    def __call__(self, **_: Any) -> None:
        self.calls += 1


def test_a_handler_that_cannot_be_hashed_sees_every_read(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore takes any callable as a handler: one that cannot be hashed, on the reads'
    answers, is called for each, and the reads still answer, plain."""
    dynamo = services.dynamo
    ways = Ways(dynamo, monkeypatch)
    tally = Tally()
    with pytest.raises(TypeError):
        hash(tally)
    events = dynamo.client.meta.events
    events.register("after-call.dynamodb.Query", tally)
    try:
        for _ in range(2):
            assert dynamo.call_sync("Query", class_query(services.settings.table), None)["Count"]
    finally:
        events.unregister("after-call.dynamodb.Query", tally)
    assert tally.calls == 2 and ways.last() == "exchange"
