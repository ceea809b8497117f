"""The Lambda entry point, invoked with API Gateway HTTP API (payload 2.0) events."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from graph_api.graph.context import Services
from graph_api.http import hosting, lambda_handler
from graph_api.settings import Settings, SettingsError
from graph_api.store.codec import Item


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
    settings = hosting.remote_settings({"AWS_LAMBDA_FUNCTION_NAME": "graph-api-api"})
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
    lambda_handler._default.cache_clear()
    try:
        response = lambda_handler.handler(http_event("GET", "/healthz"), None)
        assert response["statusCode"] == 200
        assert lambda_handler._default() is lambda_handler._default()
    finally:
        lambda_handler._default.cache_clear()
