"""CORS (graph_api/http/cors.py): browser pages on the configured origins may call the API,
preflight included; `make run` allows localhost on any port, a remote backend nobody until
GRAPH_API_CORS_ORIGINS says; Lambda answers as a container does."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

import pytest
from starlette.testclient import TestClient
from test_lambda_handler import http_event, lambda_env

from graph_api.graph.engine.context import Services
from graph_api.http import hosting, lambda_handler
from graph_api.http.app import create_app
from graph_api.settings import LOCAL_ORIGINS, Settings, SettingsError

QUERY = {"query": '{ student(id: "stu-0001") { id } }'}
APP = "https://app.example.org"


def preflight(origin: str) -> dict[str, str]:
    return {
        "origin": origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, authorization",
    }


@pytest.fixture
def client_with(services_with: Callable[..., Services]) -> Iterator[Callable[..., TestClient]]:
    """A client of the app over the read table, with the CORS settings given."""
    with contextlib.ExitStack() as stack:

        def make(**cors: str) -> TestClient:
            return stack.enter_context(TestClient(create_app(services_with(**cors))))

        yield make


def test_the_embedded_backend_allows_localhost_on_any_port_and_remote_nobody() -> None:
    embedded = Settings.from_env({})
    assert (embedded.cors_origins, embedded.cors_origin_regex) == ("", LOCAL_ORIGINS)
    remote = Settings.from_env({"GRAPH_API_BACKEND": "remote"})
    assert (remote.cors_origins, remote.cors_origin_regex) == ("", "")
    configured = Settings.from_env({"GRAPH_API_CORS_ORIGINS": f" {APP}/, HTTP://Dev.Example:3000"})
    assert configured.cors_origins == f"{APP},http://dev.example:3000"
    assert configured.cors_origin_regex == ""  # the list replaces the localhost default


@pytest.mark.parametrize(
    "origins", ["app.example.org", "https://app.example.org/graphql", "ftp://x", "https://x:y"]
)
def test_an_origin_that_is_not_one_is_refused_at_startup(origins: str) -> None:
    with pytest.raises(SettingsError, match="GRAPH_API_CORS_ORIGINS"):
        Settings.from_env({"GRAPH_API_CORS_ORIGINS": origins})


def test_a_configured_origin_gets_its_preflight_and_reads_answers(
    client_with: Callable[..., TestClient],
) -> None:
    client = client_with(cors_origins=APP)
    answer = client.options("/graphql", headers=preflight(APP))
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == APP
    allowed = answer.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed and "content-type" in allowed
    assert "POST" in answer.headers["access-control-allow-methods"]

    response = client.post("/graphql", json=QUERY, headers={"origin": APP})
    assert response.json()["data"]["student"]["id"] == "stu-0001"
    assert response.headers["access-control-allow-origin"] == APP
    assert "x-request-id" in response.headers["access-control-expose-headers"].lower()

    other = client.options("/graphql", headers=preflight("https://evil.example"))
    assert other.status_code == 400
    assert "access-control-allow-origin" not in other.headers


def test_localhost_on_any_port_is_allowed_by_the_embedded_default(
    client_with: Callable[..., TestClient],
) -> None:
    client = client_with(cors_origin_regex=LOCAL_ORIGINS)
    for origin in ("http://localhost:5173", "http://127.0.0.1:3000", "http://[::1]:8080"):
        answer = client.options("/graphql", headers=preflight(origin))
        assert answer.headers.get("access-control-allow-origin") == origin, origin
    for origin in ("http://localhost.evil.example", "http://192.168.1.2:3000"):
        assert client.options("/graphql", headers=preflight(origin)).status_code == 400


def test_without_origins_there_is_no_cors(client_with: Callable[..., TestClient]) -> None:
    client = client_with(cors_origins="", cors_origin_regex="")
    assert client.options("/graphql", headers=preflight(APP)).status_code == 405
    response = client.post("/graphql", json=QUERY, headers={"origin": APP})
    assert "access-control-allow-origin" not in response.headers


def test_lambda_answers_a_preflight_from_the_templates_setting(
    monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    lambda_env(monkeypatch, endpoint)
    monkeypatch.setenv("GRAPH_API_CORS_ORIGINS", APP)  # the template's AllowedOrigins
    handler = lambda_handler.make_handler(hosting.remote_settings())
    event = http_event("OPTIONS", "/graphql")
    event["headers"].update(preflight(APP))
    response = handler(event, None)
    assert response["statusCode"] == 200
    assert response["headers"]["access-control-allow-origin"] == APP


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({}, "localhost and 127.0.0.1, any port"),
        ({"GRAPH_API_BACKEND": "remote"}, "no other origin's page"),
        ({"GRAPH_API_CORS_ORIGINS": APP}, APP),
    ],
)
def test_serve_says_which_origins_may_call_it(
    caplog: pytest.LogCaptureFixture, env: dict[str, str], said: str
) -> None:
    with caplog.at_level(logging.INFO, logger="graph_api"):
        hosting.announce(Settings.from_env(env))
    cors = [r.getMessage() for r in caplog.records if r.getMessage().startswith("CORS:")]
    assert len(cors) == 1 and said in cors[0], cors
