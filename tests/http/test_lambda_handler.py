"""The Lambda entry point, invoked with API Gateway HTTP API (payload 2.0) events."""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import random
import subprocess
import sys
from typing import Any

import pytest

from graph_api.graph.engine.context import Services
from graph_api.http import hosting, lambda_handler
from graph_api.settings import Settings, SettingsError
from graph_api.store.codec import Item
from graph_api.store.credentials import BotocoreCredentials

# Loaded by the features a Lambda function never runs (nothing scrapes a function's metrics,
# and tracing is off unless configured).
HEAVY = (
    *("moto", "flask", "redis", "boto3", "graph_api.events.reader", "graph_api.embedded"),
    *("prometheus_client", "opentelemetry.sdk"),
)


def http_event(method: str, path: str, body: str | None = None) -> dict[str, Any]:
    """A minimal API Gateway HTTP API event, as the `$default` route delivers it."""
    headers = {"host": "abc123.execute-api.us-east-1.amazonaws.com", "accept": "application/json"}
    if body is not None:
        headers["content-type"] = "application/json"
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abc123",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "pytest",
            },
            "requestId": "test-request",
            "routeKey": "$default",
            "stage": "$default",
            "time": "21/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1795262400000,
        },
        "body": body,
        "isBase64Encoded": False,
    }


def lambda_env(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """The environment Lambda and the template give the function, pointed at moto."""
    for name, value in {
        "AWS_LAMBDA_FUNCTION_NAME": "graph-api-test",
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "GRAPH_API_TABLE": "test-read",
        "GRAPH_API_CURSOR_SECRET": "lambda-test-secret",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GRAPH_API_BACKEND", raising=False)


def body_of(response: dict[str, Any]) -> Any:
    raw = response["body"]
    if response.get("isBase64Encoded"):
        raw = base64.b64decode(raw).decode()
    return json.loads(raw)


def test_in_lambda_auto_settings_choose_the_remote_backend() -> None:
    # Lambda sets AWS_LAMBDA_FUNCTION_NAME (and credentials, which the hint does not need).
    settings = hosting.remote_settings(
        {"AWS_LAMBDA_FUNCTION_NAME": "graph-api-api", "GRAPH_API_OPEN_WRITES": "true"}
    )
    assert settings.backend == "remote"
    assert settings.endpoint_url is None  # botocore resolves DynamoDB's own endpoint


@pytest.mark.parametrize("environ", [{}, {"GRAPH_API_BACKEND": "embedded"}])
def test_the_embedded_backend_is_refused(environ: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match="never embed"):
        hosting.remote_settings(environ)


def test_healthz_answers_without_dynamodb() -> None:
    # Port 9 on loopback: nothing listens, so any DynamoDB call would fail.
    handler = lambda_handler.make_handler(
        Settings(backend="remote", endpoint_url="http://127.0.0.1:9")
    )
    response = handler(http_event("GET", "/healthz"), None)
    assert response["statusCode"] == 200
    assert body_of(response) == {"status": "ok"}
    assert response["headers"]["x-request-id"]


def test_a_graphql_query_is_served_from_the_table(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, services: Services, demo_items: list[Item]
) -> None:
    lambda_env(monkeypatch, endpoint)
    handler = lambda_handler.make_handler(hosting.remote_settings())
    query = {"query": 'query { student(id: "stu-0001") { id name } }'}
    response = handler(http_event("POST", "/graphql", json.dumps(query)), None)
    assert response["statusCode"] == 200
    body = body_of(response)
    name = next(i["name"] for i in demo_items if i["type"] == "student" and i["id"] == "stu-0001")
    assert body["data"] == {"student": {"id": "stu-0001", "name": name}}
    assert body["extensions"]["dynamodb"]["requests"] == 1

    # A second invocation of the same execution environment reuses its services.
    again = handler(http_event("POST", "/graphql", json.dumps(query)), None)
    assert body_of(again)["data"] == body["data"]


def test_the_module_handler_builds_from_the_environment_once(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, services: Services
) -> None:
    lambda_env(monkeypatch, endpoint)
    try:
        response = lambda_handler.handler(http_event("GET", "/healthz"), None)
        assert response["statusCode"] == 200
        assert lambda_handler._default() is lambda_handler._default()
    finally:
        lambda_handler._services().close()
        lambda_handler._default.cache_clear()
        lambda_handler._services.cache_clear()


@pytest.fixture
def lambda_init(monkeypatch: pytest.MonkeyPatch, endpoint: str, services: Services) -> Any:
    """The handler module imported as Lambda's init phase imports it; its SnapStart hooks
    taken out of the registry afterwards."""
    import snapshot_restore_py

    lambda_env(monkeypatch, endpoint)
    registries = snapshot_restore_py.get_before_snapshot(), snapshot_restore_py.get_after_restore()
    sizes = [len(r) for r in registries]
    module = importlib.reload(lambda_handler)
    try:
        yield module
    finally:
        for registry, size in zip(registries, sizes, strict=True):
            del registry[size:]
        asyncio.get_event_loop().run_until_complete(module._services().dynamo.aclose())
        module._services().close()
        asyncio.get_event_loop().close()
        asyncio.set_event_loop(None)
        monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME")
        importlib.reload(lambda_handler)  # outside Lambda: builds nothing


def run_hooks(hooks: list[Any]) -> None:
    """As Lambda runs them (snapshot_restore_py's registry of (function, args, kwargs))."""
    for function, args, kwargs in hooks:
        function(*args, **kwargs)


def open_clients(module: Any) -> int:
    return len(module._services().dynamo._by_loop)


def test_snapstart_closes_the_client_for_the_snapshot_and_serves_after_a_restore(
    lambda_init: Any,
) -> None:
    import snapshot_restore_py

    module = lambda_init
    assert open_clients(module) == 1  # opened by the init: the first request finds it ready
    credentials = module._services().dynamo.credentials
    assert isinstance(credentials, BotocoreCredentials)
    assert credentials.resolved is not None  # resolved by the init
    run_hooks(snapshot_restore_py.get_before_snapshot())
    assert open_clients(module) == 0  # no connection in the snapshot...
    assert credentials.resolved is None  # ...nor credentials: resolved again after a restore

    state = random.getstate()  # two environments resumed from one snapshot...
    drawn = []
    for _ in range(2):
        random.setstate(state)
        run_hooks(snapshot_restore_py.get_after_restore())
        drawn.append(random.random())
    assert drawn[0] != drawn[1]  # ...draw their retries' jitter apart
    assert open_clients(module) == 1

    query = {"query": 'query { student(id: "stu-0001") { id } }'}
    response = module.handler(http_event("POST", "/graphql", json.dumps(query)), None)
    assert body_of(response)["data"] == {"student": {"id": "stu-0001"}}


def test_lambda_imports_no_embedded_backend_redis_nor_events_pipeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a Lambda function never runs is not loaded by its init: moto and Flask, Redis's
    client, the stream reader, boto3 (the command line's client), telemetry's exporters."""
    code = (
        "import sys; from graph_api.http import lambda_handler;"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == ""
