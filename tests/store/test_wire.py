"""The wire (store/wire.py, store/credentials.py, store/wire_errors.py): what a DynamoDB call
is signed with, what its answers become, and what the API process imports.

- Each of botocore's credential sources, faked locally (no network), hands aiodynamo the
  key botocore holds *now*: when botocore refreshes it, the next request is signed with the
  new one.
- Answers and refusals read as a stock boto3 client reads the same ones.
- The API process imports no boto3, and aiobotocore only for the change stream's reader.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import botocore.credentials
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError
from support import Body, HTTPServer, awaited, boto_client, make_settings

from graph_api import __version__
from graph_api.settings import Settings
from graph_api.store import admin
from graph_api.store.client import Dynamo
from graph_api.store.credentials import BotocoreCredentials
from graph_api.store.wire import json_object, proxy_for

# -- credentials: every source rotates -----------------------------------------------------

GET = {"TableName": "t", "Key": {"PK": {"S": "a"}, "SK": {"S": "a"}}}


def _found(request: Any, **_: Any) -> AWSResponse:
    """DynamoDB's answer to a GetItem of a missing item, for the network."""
    body = json.dumps({"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5}})
    return AWSResponse("http://fake", 200, {}, Body(body.encode()))


class Session:
    """A botocore session whose chain found `credentials` (what its provider loaded)."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self.load = load

    def get_credentials(self) -> Any:
        return self.load()


def signed_with(credentials: BotocoreCredentials, calls: int) -> list[tuple[str, str | None]]:
    """The key id and session token each of `calls` GetItems was signed with, sent by the
    API's client (its requests answered here: nothing leaves the process)."""
    settings = Settings(table="t", endpoint_url=None, region="eu-west-1")
    dynamo = Dynamo(settings)
    dynamo._endpoint = "https://dynamodb.eu-west-1.amazonaws.com"  # not resolved: no network
    dynamo.credentials = credentials
    seen: list[tuple[str, str | None]] = []

    def record(request: Any, **_: Any) -> AWSResponse:
        headers = request.headers
        match = re.search(r"Credential=([^/]+)/", headers["Authorization"])
        assert match is not None
        seen.append((match.group(1), headers.get("X-Amz-Security-Token")))
        return _found(request)

    dynamo.register("before-send.dynamodb", record)

    async def run() -> None:
        for _ in range(calls):
            await dynamo.call("GetItem", GET, None)
        await dynamo.aclose()

    asyncio.run(run())
    return seen


def soon() -> str:
    """An expiry within botocore's refresh window: every read of the key refreshes it."""
    at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


class Issuer:
    """Hands out a new key each time it is asked (STS, the container endpoint)."""

    def __init__(self) -> None:
        self.issued = 0

    def next(self) -> dict[str, str]:
        self.issued += 1
        return {
            "AccessKeyId": f"AKID{self.issued}",
            "SecretAccessKey": f"secret{self.issued}",
            "Token": f"token{self.issued}",
            "SessionToken": f"token{self.issued}",
            "Expiration": soon(),
        }


def test_static_environment_credentials_sign_the_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_CREDENTIAL_EXPIRATION", raising=False)
    provider = botocore.credentials.EnvProvider()
    assert signed_with(BotocoreCredentials(lambda: Session(provider.load)), 2) == [  # type: ignore[arg-type,return-value]
        ("AKIDENV", None),
        ("AKIDENV", None),
    ]


def test_expiring_environment_credentials_are_read_again_when_botocore_refreshes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With AWS_CREDENTIAL_EXPIRATION botocore re-reads the environment before expiry."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDOLD")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "old")
    monkeypatch.setenv("AWS_CREDENTIAL_EXPIRATION", soon())
    provider = botocore.credentials.EnvProvider()
    credentials = BotocoreCredentials(lambda: Session(provider.load))  # type: ignore[arg-type,return-value]
    first = signed_with(credentials, 1)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDNEW")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "new")
    assert first + signed_with(credentials, 1) == [("AKIDOLD", "old"), ("AKIDNEW", "new")]


def test_assumed_role_credentials_rotate_when_botocore_refreshes_them() -> None:
    """RefreshableCredentials as the assume-role and SSO providers make them."""
    issuer = Issuer()

    def refresh() -> dict[str, str]:
        issued = issuer.next()
        return {
            "access_key": issued["AccessKeyId"],
            "secret_key": issued["SecretAccessKey"],
            "token": issued["Token"],
            "expiry_time": issued["Expiration"],
        }

    def load() -> Any:
        return botocore.credentials.RefreshableCredentials.create_from_metadata(
            refresh(), refresh_using=refresh, method="assume-role"
        )

    assert signed_with(BotocoreCredentials(lambda: Session(load)), 3) == [  # type: ignore[arg-type,return-value]
        ("AKID2", "token2"),  # issued at load, then refreshed once before the first use
        ("AKID3", "token3"),
        ("AKID4", "token4"),
    ]


def test_container_role_credentials_rotate_when_botocore_refreshes_them() -> None:
    """ECS's (and EKS Pod Identity's) container credentials endpoint, faked."""
    issuer = Issuer()

    class Fetcher:
        def full_url(self, relative: str) -> str:
            return f"http://169.254.170.2{relative}"

        def retrieve_full_uri(self, url: str, headers: Any = None) -> dict[str, str]:
            return issuer.next()

    provider = botocore.credentials.ContainerProvider(
        environ={"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/x"},
        fetcher=Fetcher(),
    )
    seen = signed_with(BotocoreCredentials(lambda: Session(provider.load)), 3)  # type: ignore[arg-type,return-value]
    assert [key for key, _ in seen] == ["AKID2", "AKID3", "AKID4"]
    assert [token for _, token in seen] == ["token2", "token3", "token4"]


def test_web_identity_credentials_rotate_when_botocore_refreshes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """EKS's web identity (IRSA): STS's AssumeRoleWithWebIdentity, faked."""
    issuer = Issuer()
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/api")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token")

    class STS:
        def assume_role_with_web_identity(self, **_: Any) -> dict[str, Any]:
            issued = issuer.next()
            return {
                "Credentials": {**issued, "Expiration": issued["Expiration"]},
                "AssumedRoleUser": {"Arn": "arn:aws:sts::123456789012:assumed-role/api/x"},
            }

    provider = botocore.credentials.AssumeRoleWithWebIdentityProvider(
        load_config=lambda: {},
        client_creator=lambda *_, **__: STS(),
        profile_name="default",
        token_loader_cls=lambda path: lambda: "a.jwt.token",
    )
    seen = signed_with(BotocoreCredentials(lambda: Session(provider.load)), 3)  # type: ignore[arg-type,return-value]
    assert [key for key, _ in seen] == ["AKID1", "AKID2", "AKID3"]
    assert [token for _, token in seen] == ["token1", "token2", "token3"]


# -- answers and refusals, as a stock boto3 client reads them ---------------------------


@pytest.fixture
def table(endpoint: str) -> Iterator[tuple[Dynamo, Any, str]]:
    settings = make_settings(endpoint, table=f"wire-{uuid.uuid4().hex[:8]}")
    dynamo = Dynamo(settings)
    awaited(admin.create(dynamo, settings.table))
    yield dynamo, boto_client(endpoint), settings.table
    awaited(dynamo.call("DeleteTable", {"TableName": settings.table}, None, missing_table=False))


def s(value: str) -> dict[str, str]:
    return {"S": value}


def key(n: int) -> dict[str, Any]:
    return {"PK": s(f"STUDENT#{n}"), "SK": s(f"STUDENT#{n}")}


def student(n: int) -> dict[str, Any]:
    return {
        **key(n),
        "GSI1PK": s("CATALOG#STUDENT"),
        "GSI1SK": s(f"STUDENT#{n}"),
        "name": s(f'Ana Ø {n} \u2603 "quoted" \\ back'),
        "grade": {"N": str(n)},
        "home": {"NULL": True},
        "classes": {"M": {"c1": {"M": {"name": s("Maths"), "room": {"N": "7"}}}}},
        "tags": {"L": [s("a"), {"N": "-12"}, {"L": []}, {"M": {}}, {"BOOL": False}]},
    }


def without_metadata(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k != "ResponseMetadata"}


def test_answers_are_what_a_stock_client_reads(table: tuple[Dynamo, Any, str]) -> None:
    dynamo, stock, name = table
    items = [{"PutRequest": {"Item": student(n)}} for n in range(6)]
    awaited(
        dynamo.call("BatchWriteItem", {"RequestItems": {name: items}}, None, missing_table=False)
    )
    reads = [
        ("GetItem", {"TableName": name, "Key": key(3)}),
        ("GetItem", {"TableName": name, "Key": key(99)}),
        ("BatchGetItem", {"RequestItems": {name: {"Keys": [key(1), key(2), key(99)]}}}),
        (
            "Query",
            {
                "TableName": name,
                "IndexName": "GSI1",
                "KeyConditionExpression": "GSI1PK = :pk",
                "ExpressionAttributeValues": {":pk": s("CATALOG#STUDENT")},
                "Limit": 4,
            },
        ),
        ("Scan", {"TableName": name, "Limit": 2, "ConsistentRead": True}),
    ]
    for operation, params in reads:
        params = {**params, "ReturnConsumedCapacity": "TOTAL"}
        ours = awaited(dynamo.call(operation, params, None, missing_table=False))
        snake = re.sub(r"(?<!^)([A-Z])", r"_\1", operation).lower()
        theirs = getattr(stock, snake)(**params)
        if operation == "BatchGetItem":  # the order of a batch's items is DynamoDB's choice
            for answer in (ours, theirs):
                answer["Responses"][name].sort(key=lambda i: i["PK"]["S"])
        assert without_metadata(ours) == without_metadata(theirs), operation
        assert ours["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_refusals_are_the_client_errors_a_stock_client_raises(
    table: tuple[Dynamo, Any, str],
) -> None:
    """Code, message, modeled members (a cancelled transaction's reasons, the item a failed
    condition found) as botocore parses them from the same answer."""
    dynamo, stock, name = table
    awaited(
        dynamo.call("PutItem", {"TableName": name, "Item": student(1)}, None, missing_table=False)
    )
    refused = [
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
                        }
                    },
                ]
            },
        ),
        ("Query", {"TableName": name, "KeyConditionExpression": "PK = :missing"}),
    ]
    for operation, params in refused:
        with pytest.raises(ClientError) as ours:
            awaited(dynamo.call(operation, params, None, missing_table=False))
        snake = re.sub(r"(?<!^)([A-Z])", r"_\1", operation).lower()
        with pytest.raises(ClientError) as theirs:
            getattr(stock, snake)(**params)
        assert ours.value.operation_name == theirs.value.operation_name
        assert ours.value.response["Error"] == theirs.value.response["Error"], operation
        for member in ("CancellationReasons", "Item"):
            assert ours.value.response.get(member) == theirs.value.response.get(member)
        assert ours.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as cancelled:
        awaited(dynamo.call(*refused[1], None, missing_table=False))
    reasons = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
    assert reasons == ["None", "ConditionalCheckFailed"]


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"<html><body>502 Bad Gateway</body></html>", b"[]", b"null", b'"x"'],
)
def test_a_successful_answer_that_is_not_a_json_object_is_refused(body: bytes) -> None:
    """botocore would read it as an empty result; taking it so would be a lie."""
    with pytest.raises(ResponseParserError):
        json_object(body)


def test_json_that_only_the_stdlib_reads_is_still_read() -> None:
    assert json_object(b'{"Count": NaN}')["Count"] != 0
    assert json_object(b'{"a": {"S": "\\ud800"}}') == {"a": {"S": "\ud800"}}


# -- what the API process imports ---------------------------------------------------------


def test_the_api_imports_no_boto3_and_aiobotocore_only_for_the_stream_reader() -> None:
    """The request path (the app, its handlers, a served request) loads neither boto3 nor
    aiobotocore; aiobotocore comes with the stream reader's client module alone."""
    script = textwrap.dedent(
        """
        import json, sys
        from graph_api.settings import Settings
        from graph_api.http.app import create_app
        from graph_api.graph.engine.context import Services
        import graph_api.http.lambda_handler  # noqa: F401
        import graph_api.cli  # noqa: F401
        services = Services.create(Settings(table="t", endpoint_url="http://127.0.0.1:9"))
        create_app(services)
        before = sorted({m.split(".")[0] for m in sys.modules} & {"boto3", "aiobotocore"})
        import graph_api.store.streams_client  # noqa: F401
        after = sorted({m.split(".")[0] for m in sys.modules} & {"boto3", "aiobotocore"})
        print(json.dumps([before, after]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == []
    assert after == ["aiobotocore"]


def test_the_production_path_imports_neither_moto_nor_the_embedded_backend() -> None:
    """Every module of the door to DynamoDB (`graph_api.store`), the app and the Lambda
    handler load without moto, Flask or `graph_api.embedded`: the container image and the
    Lambda package lack them, and a served request must not depend on a development backend."""
    script = textwrap.dedent(
        """
        import importlib, json, pkgutil, sys
        import graph_api.store
        for module in pkgutil.walk_packages(graph_api.store.__path__, "graph_api.store."):
            importlib.import_module(module.name)
        from graph_api.settings import Settings
        from graph_api.http.app import create_app
        from graph_api.graph.engine.context import Services
        import graph_api.http.lambda_handler  # noqa: F401
        services = Services.create(Settings(table="t", endpoint_url="http://127.0.0.1:9"))
        create_app(services)
        development = ("moto", "flask", "graph_api.embedded")
        loaded = {m for m in sys.modules if m.startswith(development)}
        print(json.dumps(sorted(loaded)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_proxy_is_the_one_botocore_would_use(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    aws = "https://dynamodb.eu-west-1.amazonaws.com"
    assert proxy_for(aws) is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert proxy_for(aws) == "http://proxy.internal:3128"
    assert proxy_for("http://127.0.0.1:8001") is None  # plain HTTP: HTTP_PROXY's, unset
    monkeypatch.setenv("NO_PROXY", ".amazonaws.com")
    assert proxy_for(aws) is None


def test_requests_say_who_sends_them_and_ask_for_an_uncompressed_answer() -> None:
    """The User-Agent names the API (an operator finds its requests in CloudTrail by it);
    `Accept-Encoding: identity`, as botocore asks: the answer's CRC32 is checked on the bytes
    as sent, and a gzipped body would be refused as not DynamoDB's."""
    body = b'{"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5}}'

    def reply(conn: socket.socket, _: bytes) -> bool:
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        conn.sendall(head + body)
        return True

    server = HTTPServer(reply)
    dynamo = Dynamo(make_settings(f"http://127.0.0.1:{server.port}"))
    try:
        assert (
            awaited(dynamo.call("GetItem", GET, None, missing_table=False))["ConsumedCapacity"][
                "CapacityUnits"
            ]
            == 0.5
        )
    finally:
        server.close()
    (request,) = server.requests
    head = request.split(b"\r\n\r\n")[0].decode().lower().split("\r\n")
    assert f"user-agent: graph-api/{__version__} aiodynamo aiohttp/{aiohttp.__version__}" in head
    assert "accept-encoding: identity" in head


def test_a_request_to_an_endpoint_on_a_port_carries_a_signature_that_verifies() -> None:
    """An endpoint that checks SigV4 (Alternator with authorization on, a signing proxy)
    recomputes the signature from the headers it received: botocore's signer, fed what the
    server got, must find the signature the request carries."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    body = b'{"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5}}'

    def reply(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        return True

    server = HTTPServer(reply)
    endpoint = f"http://127.0.0.1:{server.port}"
    dynamo = Dynamo(make_settings(endpoint))
    try:
        awaited(dynamo.call("GetItem", GET, None, missing_table=False))
    finally:
        server.close()
    (request,) = server.requests
    head, sent = request.split(b"\r\n\r\n", 1)
    received = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    headers = {name.lower(): value for name, value in received.items()}
    authorization = headers["authorization"]
    signed = re.search(r"SignedHeaders=([^,]+)", authorization).group(1).split(";")  # type: ignore[union-attr]
    assert "host" in signed
    checked = AWSRequest(
        method="POST",
        url=f"{endpoint}/",
        data=sent,
        headers={name: headers[name] for name in signed},
    )
    checked.context["timestamp"] = headers["x-amz-date"]
    auth = SigV4Auth(botocore.credentials.Credentials("local", "local"), "dynamodb", "us-east-1")
    expected = auth.signature(
        auth.string_to_sign(checked, auth.canonical_request(checked)), checked
    )
    assert authorization.endswith(f"Signature={expected}")
