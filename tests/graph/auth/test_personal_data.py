"""Personal data (a student's email and street) is served only to an authenticated reader,
unless the server is set to make it public: anyone else gets null for those fields, each
with a coded error, and the rest of the answer as usual."""

from __future__ import annotations

import contextlib
import http.server
import logging
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from starlette.testclient import TestClient
from support import (
    AUDIENCE,
    AUTH,
    GRJ,
    ISSUER,
    SECRET,
    awaited,
    bearer,
    hs256,
    make_settings,
    post,
    roster_size,
)

from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.http.hosting import announce
from graph_api.ops import demo
from graph_api.settings import Settings, SettingsError
from graph_api.store import admin
from graph_api.store.codec import Item

AUTH_ENV = {
    "GRAPH_API_JWT_SECRET": SECRET,
    "GRAPH_API_JWT_ISSUER": ISSUER,
    "GRAPH_API_JWT_AUDIENCE": AUDIENCE,
}

STUDENT = """query($id: ID!) {
  student(id: $id) { id name email version home { country city street } } }"""
ROSTER = """query($id: ID!) {
  class(id: $id) { subject students(first: 50) { edges { node { id name email } } } } }"""


@pytest.fixture(scope="module")
def school(endpoint: str) -> Iterator[tuple[str, list[Item]]]:
    """A small school in a table of its own, shared by the apps below (which only read)."""
    settings = make_settings(endpoint)
    services = Services.create(settings)
    items = demo.generate(students=20, seed=5)
    awaited(admin.create(services.dynamo, settings.table))
    awaited(admin.batch_write(services.dynamo, settings.table, items))
    yield settings.table, items
    awaited(
        services.dynamo.call(
            "DeleteTable", {"TableName": settings.table}, None, missing_table=False
        )
    )
    services.close()


@contextlib.contextmanager
def app(endpoint: str, name: str, **overrides: Any) -> Iterator[TestClient]:
    services = Services.create(make_settings(endpoint, table=name, **overrides))
    try:
        with TestClient(create_app(services)) as client:
            yield client
    finally:
        services.close()


@pytest.fixture
def private(endpoint: str, school: tuple[str, list[Item]]) -> Iterator[TestClient]:
    """Auth configured, personal data not public: the production default."""
    with app(endpoint, school[0], public_personal_data=False, **AUTH) as client:
        yield client


def with_street(items: list[Item]) -> tuple[Item, dict[str, Any]]:
    """A student whose home has a street, and that home (the student item's `home` map)."""
    student = next(
        i for i in items if i["type"] == "student" and (i.get("home") or {}).get("street")
    )
    return student, student["home"]


def as_public(student: Item, home: dict[str, Any]) -> dict[str, Any]:
    """The student as a reader allowed to see personal data gets it."""
    return {
        "id": student["id"],
        "name": student["name"],
        "email": student["email"],
        "version": student["version"],
        "home": {"country": home["country"], "city": home["city"], "street": home["street"]},
    }


def codes_by_path(body: dict[str, Any]) -> dict[tuple[Any, ...], str]:
    return {tuple(e["path"]): e["extensions"]["code"] for e in body.get("errors", [])}


# -- private (the default off the embedded backend) ------------------------------------------


@pytest.mark.parametrize("headers", [{}, GRJ], ids=["json", "graphql-response+json"])
def test_an_anonymous_reader_gets_no_email_or_street_and_everything_else(
    private: TestClient, school: tuple[str, list[Item]], headers: dict[str, str]
) -> None:
    student, home = with_street(school[1])
    body = post(private, STUDENT, {"id": student["id"]}, headers, status=200)
    expected = as_public(student, home)
    assert body["data"]["student"] == {
        **expected,
        "email": None,
        "home": {**expected["home"], "street": None},
    }
    assert codes_by_path(body) == {
        ("student", "email"): "UNAUTHENTICATED",
        ("student", "home", "street"): "UNAUTHENTICATED",
    }
    message = body["errors"][0]["message"]
    assert "personal data" in message and "Bearer" in message
    assert student["email"] not in str(body) and home["street"] not in str(body)


def test_a_reader_with_a_valid_token_gets_email_and_street(
    private: TestClient, school: tuple[str, list[Item]]
) -> None:
    student, home = with_street(school[1])
    body = post(private, STUDENT, {"id": student["id"]}, bearer(hs256()), status=200)
    assert "errors" not in body
    assert body["data"]["student"] == as_public(student, home)


def test_a_home_without_a_street_is_null_without_an_error_for_a_reader_with_a_token(
    private: TestClient, school: tuple[str, list[Item]]
) -> None:
    student = next(
        i
        for i in school[1]
        if i["type"] == "student" and i.get("home") and not i["home"].get("street")
    )
    body = post(private, STUDENT, {"id": student["id"]}, bearer(hs256()), status=200)
    assert "errors" not in body
    assert body["data"]["student"]["home"]["street"] is None


@pytest.mark.parametrize(
    "authorization",
    [
        f"Bearer {hs256(exp=int(time.time()) - 3600)}",
        f"Bearer {jwt.encode({'sub': 'x'}, 'o' * 32, algorithm='HS256')}",
        "Basic dGVhY2hlcjpzZWNyZXQ=",
    ],
    ids=["expired", "other signer", "basic"],
)
def test_an_invalid_token_is_unauthenticated_and_says_why(
    private: TestClient, school: tuple[str, list[Item]], authorization: str
) -> None:
    student, _ = with_street(school[1])
    body = post(
        private, STUDENT, {"id": student["id"]}, {"Authorization": authorization}, status=200
    )
    assert body["data"]["student"]["email"] is None
    assert set(codes_by_path(body).values()) == {"UNAUTHENTICATED"}
    assert "no token was sent" not in body["errors"][0]["message"]
    assert authorization.split()[-1] not in str(body)


def test_a_roster_keeps_every_student_and_nulls_only_the_emails(
    private: TestClient, school: tuple[str, list[Item]]
) -> None:
    items = school[1]
    klass = next(i for i in items if i["type"] == "class" and roster_size(items, i) >= 3)
    enrolled = sorted(
        i["studentId"] for i in items if i["type"] == "enrolment" and i["classId"] == klass["id"]
    )
    body = post(private, ROSTER, {"id": klass["id"]}, status=200)
    nodes = [e["node"] for e in body["data"]["class"]["students"]["edges"]]
    assert [n["id"] for n in nodes] == enrolled
    assert all(n["name"] and n["email"] is None for n in nodes)
    assert len(body["errors"]) == len(enrolled)
    assert set(codes_by_path(body).values()) == {"UNAUTHENTICATED"}

    allowed = post(private, ROSTER, {"id": klass["id"]}, bearer(hs256()), status=200)
    assert "errors" not in allowed
    emails = {i["id"]: i["email"] for i in items if i["type"] == "student"}
    assert [e["node"]["email"] for e in allowed["data"]["class"]["students"]["edges"]] == [
        emails[s] for s in enrolled
    ]


def test_without_auth_configured_personal_data_is_forbidden_to_everyone(
    endpoint: str, school: tuple[str, list[Item]]
) -> None:
    student, _ = with_street(school[1])
    # A remote table's: the embedded backend checks tokens of its own (test_authz_reads.py).
    with app(endpoint, school[0], public_personal_data=False, backend="remote") as client:
        for headers in ({}, bearer(hs256())):  # no token can help: nothing checks it
            body = post(client, STUDENT, {"id": student["id"]}, headers, status=200)
            assert body["data"]["student"]["email"] is None
            assert body["data"]["student"]["home"]["street"] is None
            assert body["data"]["student"]["name"] == student["name"]
            assert set(codes_by_path(body).values()) == {"FORBIDDEN"}
            assert "no sign-in configured" in body["errors"][0]["message"]


def test_an_unreachable_jwks_makes_personal_data_unavailable_not_unauthenticated(
    endpoint: str, school: tuple[str, list[Item]]
) -> None:
    with http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler) as closed:
        port = closed.server_port  # bound then closed: nothing listens there afterwards
    student, _ = with_street(school[1])
    jwks = {"jwks_url": f"http://127.0.0.1:{port}/jwks.json", "jwt_issuer": ISSUER}
    with app(
        endpoint, school[0], public_personal_data=False, jwt_audience=AUDIENCE, **jwks
    ) as client:
        signed = jwt.encode({"sub": "x"}, "k" * 32, algorithm="HS256", headers={"kid": "k1"})
        body = post(client, STUDENT, {"id": student["id"]}, bearer(signed), status=200)
    assert body["data"]["student"]["email"] is None
    assert set(codes_by_path(body).values()) == {"UNAVAILABLE"}


# -- public --------------------------------------------------------------------------------


@pytest.mark.parametrize("auth", [AUTH, {}], ids=["auth configured", "no auth"])
def test_public_personal_data_serves_email_and_street_to_anyone(
    endpoint: str, school: tuple[str, list[Item]], auth: dict[str, str]
) -> None:
    student, home = with_street(school[1])
    with app(endpoint, school[0], public_personal_data=True, **auth) as client:
        body = post(client, STUDENT, {"id": student["id"]}, status=200)
    assert "errors" not in body
    assert body["data"]["student"] == as_public(student, home)


# -- the setting ---------------------------------------------------------------------------

REMOTE = {"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1"}


@pytest.mark.parametrize(
    ("env", "public"),
    [
        ({}, False),  # `make run`: its dev tokens show the policy at work
        ({"GRAPH_API_PUBLIC_PERSONAL_DATA": "true"}, True),
        (REMOTE, False),  # a real table: private unless asked
        ({**REMOTE, "GRAPH_API_BACKEND": "remote"}, False),
        ({**REMOTE, "GRAPH_API_PUBLIC_PERSONAL_DATA": "true"}, True),
    ],
    ids=["embedded", "embedded, on", "remote", "remote, explicit", "remote, on"],
)
def test_personal_data_is_public_only_when_asked(env: dict[str, str], public: bool) -> None:
    assert Settings.from_env(env).public_personal_data is public


def test_the_setting_must_be_a_boolean_and_defaults_to_private_in_code() -> None:
    with pytest.raises(SettingsError):
        Settings.from_env({"GRAPH_API_PUBLIC_PERSONAL_DATA": "emails only"})
    assert Settings().public_personal_data is False


def test_a_public_remote_server_warns_at_startup(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.from_env({**REMOTE, "GRAPH_API_PUBLIC_PERSONAL_DATA": "true", **AUTH_ENV})
    with caplog.at_level(logging.INFO, logger="graph_api"):
        announce(settings)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("served to anyone" in w for w in warnings), warnings
