"""The path production takes: the API reaching DynamoDB over HTTPS, the endpoint's
certificate verified against AWS_CA_BUNDLE (the session's DynamoDB behind stunnel4,
tests/conftest.py's `tls`; on every backend). Over it the API answers what it answers over
plain HTTP, with the same DynamoDB requests; an endpoint whose certificate it cannot verify
is a coded UNAVAILABLE, not a 500, and no write."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import STUDENT_FIELDS, USER_ERRORS, awaited, fresh_services, make_settings, post, scan

from bench import queries as peer_queries
from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.store import admin
from graph_api.store.client import LOCAL_CREDENTIALS
from graph_api.store.codec import Item
from tools.api_server import served
from tools.tls_terminator import Terminator

CREATE_STUDENT = f"""mutation($i: CreateStudentInput!) {{
  createStudent(input: $i) {{ student {{ {STUDENT_FIELDS} }} {USER_ERRORS} }} }}"""
RENAME_TEACHER = f"""mutation($id: ID!, $name: String!) {{
  updateTeacher(id: $id, input: {{name: $name}}) {{ teacher {{ id name version }} {USER_ERRORS} }}
}}"""
STUDENT = f"query($id: ID!) {{ student(id: $id) {{ {STUDENT_FIELDS} }} }}"


def bench_queries(demo: list[Item]) -> list[tuple[str, dict[str, Any]]]:
    """The bench's five queries (tools/peer_queries.py), on targets in the seeded school."""

    def first(kind: str) -> Item:
        return next(i for i in demo if i["type"] == kind)

    students = sorted(i["id"] for i in demo if i["type"] == "student")[:30]
    home = first("student")["home"]
    return [
        (peer_queries.Q1, {"ids": students}),
        (peer_queries.Q2, {"id": first("class")["id"]}),
        (peer_queries.Q3, {"id": first("teacher")["id"]}),
        (peer_queries.Q4, {"id": first("sport")["id"]}),
        (peer_queries.Q5, {"country": home["country"], "state": home["state"]}),
    ]


@pytest.fixture
def trusted(tls: Terminator, monkeypatch: pytest.MonkeyPatch) -> Terminator:
    """The terminator, with its CA in AWS_CA_BUNDLE for the clients the test makes."""
    monkeypatch.setenv("AWS_CA_BUNDLE", str(tls.ca_bundle))
    return tls


@pytest.fixture
def over(services: Services) -> Iterator[Callable[..., Services]]:
    """`over(endpoint, **settings)`: Services over the seeded read table, reached at
    `endpoint`; closed after the test."""
    made: list[Services] = []

    def make(endpoint: str, **settings: Any) -> Services:
        table = services.settings.table
        reached = Services.create(make_settings(endpoint, table=table, **settings))
        made.append(reached)
        return reached

    yield make
    for reached in made:
        reached.close()


def sent_to(services: Services) -> list[str]:
    """The URLs of the HTTP requests `services`' DynamoDB client sends from now on."""
    urls: list[str] = []

    def record(request: Any, **_: Any) -> None:
        urls.append(request.url)

    services.dynamo.register("before-send.dynamodb", record)
    return urls


def answers(services: Services, operations: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each operation's response through the HTTP app: data, errors and DynamoDB requests."""
    with TestClient(create_app(services)) as client:
        bodies = [post(client, query, variables) for query, variables in operations]
    return [
        (body["data"], body.get("errors"), body["extensions"]["dynamodb"]["requests"])
        for body in bodies
    ]


def test_the_bench_queries_answer_over_tls_as_over_plain_http(
    trusted: Terminator,
    plain_endpoint: str,
    over: Callable[..., Services],
    demo_items: list[Item],
) -> None:
    queries = bench_queries(demo_items)
    secure = over(trusted.endpoint)
    urls = sent_to(secure)
    over_tls = answers(secure, queries)
    assert urls and all(url.startswith(f"{trusted.endpoint}/") for url in urls)
    over_http = answers(over(plain_endpoint), queries)
    assert over_tls == over_http
    for data, errors, _ in over_tls:
        assert errors is None
        assert all(value for value in data.values())  # every target found


def test_a_mutation_over_tls_writes_what_plain_http_reads(
    trusted: Terminator, plain_endpoint: str
) -> None:
    with (
        fresh_services(trusted.endpoint) as secure,
        TestClient(create_app(secure)) as over_tls,
    ):
        plain = Services.create(make_settings(plain_endpoint, table=secure.settings.table))
        try:
            made = post(
                over_tls, CREATE_STUDENT, {"i": {"id": "ada", "name": "Ada", "email": "a@ex.org"}}
            )
            assert made.get("errors") is None
            assert made["data"]["createStudent"]["userErrors"] == []
            student = made["data"]["createStudent"]["student"]
            assert student["name"] == "Ada" and student["version"] == 1
            with TestClient(create_app(plain)) as over_http:
                assert post(over_http, STUDENT, {"id": "ada"})["data"]["student"] == student
                assert post(over_tls, STUDENT, {"id": "ada"})["data"]["student"] == student
        finally:
            plain.close()


def test_an_endpoint_whose_certificate_is_not_trusted_is_unavailable(
    tls: Terminator,
    plain_endpoint: str,
    over: Callable[..., Services],
    demo_items: list[Item],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No AWS_CA_BUNDLE: the system's CAs, which never signed the generated certificate.
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    untrusting = over(tls.endpoint)
    plain = over(plain_endpoint)
    before = scan(plain)
    urls = sent_to(untrusting)
    query, variables = bench_queries(demo_items)[1]
    # Not entered: no lifespan, so no stream reader sending requests of its own.
    client = TestClient(create_app(untrusting), raise_server_exceptions=False)
    body = post(client, query, variables, status=200)
    assert body["data"] == {"class": None}
    assert [e["extensions"]["code"] for e in body["errors"]] == ["UNAVAILABLE"]
    assert "certificate" not in json.dumps(body).lower()  # no detail of ours leaks
    # It tried the endpoint once: a certificate it does not trust is not retried.
    assert len(urls) == 1
    # A write: refused the same way, and nothing written.
    renamed = post(client, RENAME_TEACHER, {"id": "tch-001", "name": "Nobody"}, status=200)
    assert renamed["data"] == {"updateTeacher": None}
    assert [e["extensions"]["code"] for e in renamed["errors"]] == ["UNAVAILABLE"]
    assert scan(plain) == before


def _post_json(url: str, query: str, variables: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def test_serve_configured_as_for_aws_answers_a_query_and_a_mutation_over_tls(
    trusted: Terminator, demo_items: list[Item]
) -> None:
    """`graph-api serve` set up only by the environment a deployment gives it: an https
    endpoint, the CA bundle, credentials; a query and a mutation over real HTTP."""
    with fresh_services(trusted.endpoint) as seeder:
        table = seeder.settings.table
        awaited(admin.batch_write(seeder.dynamo, table, demo_items))
        env = {
            "GRAPH_API_BACKEND": "remote",
            "AWS_ENDPOINT_URL_DYNAMODB": trusted.endpoint,
            "AWS_CA_BUNDLE": str(trusted.ca_bundle),
            "AWS_ACCESS_KEY_ID": LOCAL_CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": LOCAL_CREDENTIALS["aws_secret_access_key"],
            "AWS_REGION": "us-east-1",
            "GRAPH_API_TABLE": table,
            "WEB_CONCURRENCY": "1",
        }
        with served(**env) as server:
            query, variables = bench_queries(demo_items)[2]  # a teacher and their classes
            teacher = _post_json(server.url, query, variables)
            assert teacher.get("errors") is None
            assert teacher["data"]["teacher"]["classes"]["edges"]
            renamed = _post_json(
                server.url, RENAME_TEACHER, {"id": variables["id"], "name": "Grace Hopper"}
            )
            assert renamed.get("errors") is None
            payload = renamed["data"]["updateTeacher"]
            assert payload["userErrors"] == []
            assert payload["teacher"]["name"] == "Grace Hopper"
            again = _post_json(server.url, query, variables)
            assert again["data"]["teacher"]["name"] == "Grace Hopper"
        items = scan(seeder)
        assert next(i for i in items if i.get("id") == variables["id"])["name"] == "Grace Hopper"
