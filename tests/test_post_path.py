"""A POST of one JSON operation takes `GraphQLEndpoint.answer_post`, not Strawberry's whole
`run`: a client must not be able to tell. Each request below is sent twice, once with the
short path and once with it turned off, and the answers must be the same (status, media
type, the headers a client reads, the body), whether they succeed, fail or are refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from graph_api.http import app as app_module
from graph_api.http.graphql_http import GRAPHQL_RESPONSE_JSON, JSON, is_plain_post

QUERY = '{ student(id: "stu-0001") { id name } }'
TOO_COSTLY = (
    "{ teachers(first: 100) { edges { node { classes(first: 100) { edges { node {"
    " students(first: 100) { edges { cursor } } } } } } } } }"
)
SUBSCRIPTION = "subscription { classChanged { kind } }"
BY_ID = "query One($id: ID!) { student(id: $id) { id name } }"


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


# (name, content type, accept, body): every kind of answer a POST can get.
REQUESTS: list[tuple[str, str, str | None, bytes]] = [
    ("a query", JSON, JSON, _json({"query": QUERY})),
    ("a query, graphql-response+json", JSON, GRAPHQL_RESPONSE_JSON, _json({"query": QUERY})),
    ("no Accept", JSON, None, _json({"query": QUERY})),
    ("a charset", "application/json; charset=utf-8", JSON, _json({"query": QUERY})),
    ("an upper-case media type", "Application/JSON", JSON, _json({"query": QUERY})),
    (
        "variables and an operation name",
        JSON,
        GRAPHQL_RESPONSE_JSON,
        _json({"query": BY_ID, "variables": {"id": "stu-0002"}, "operationName": "One"}),
    ),
    ("a variable of the wrong type", JSON, GRAPHQL_RESPONSE_JSON, _json({"query": BY_ID})),
    ("an unknown operation name", JSON, JSON, _json({"query": BY_ID, "operationName": "Two"})),
    ("not JSON", JSON, JSON, b"{"),
    ("JSON, not an object", JSON, JSON, b"3"),
    ("a batch", JSON, JSON, _json([{"query": QUERY}])),
    ("a query that is not a string", JSON, JSON, _json({"query": 5})),
    ("variables that are not an object", JSON, JSON, _json({"query": QUERY, "variables": "x"})),
    ("extensions that are not an object", JSON, JSON, _json({"query": QUERY, "extensions": []})),
    ("no query", JSON, GRAPHQL_RESPONSE_JSON, _json({})),
    ("a syntax error", JSON, GRAPHQL_RESPONSE_JSON, _json({"query": "{ student("})),
    ("an unknown field", JSON, JSON, _json({"query": "{ nothing }"})),
    ("a field error", JSON, JSON, _json({"query": '{ student(id: "?") { id } }'})),
    ("too costly", JSON, GRAPHQL_RESPONSE_JSON, _json({"query": TOO_COSTLY})),
    ("a subscription", JSON, JSON, _json({"query": SUBSCRIPTION})),
    ("another JSON type", "application/json-seq", JSON, _json({"query": QUERY})),
    ("not JSON at all", "text/plain", JSON, _json({"query": QUERY})),
]
SHORT = {
    "a query",
    "a query, graphql-response+json",
    "no Accept",
    "a charset",
    "variables and an operation name",
    "a variable of the wrong type",
    "an unknown operation name",
    "not JSON",
    "JSON, not an object",
    "a batch",  # seen to be a list, then left to `run`
    "a query that is not a string",
    "variables that are not an object",
    "extensions that are not an object",
    "no query",
    "a syntax error",
    "an unknown field",
    "a field error",
    "too costly",
    "a subscription",
}


def _answer(client: TestClient, content_type: str, accept: str | None, body: bytes) -> Any:
    headers = {"Content-Type": content_type, "X-Request-Id": "post-path-test"}
    if accept is not None:
        headers["Accept"] = accept
    response = client.post("/graphql", content=body, headers=headers)
    seen = {name: response.headers.get(name) for name in ("content-type", "www-authenticate")}
    return response.status_code, seen, response.json()


@pytest.mark.parametrize(("name", "content_type", "accept", "body"), REQUESTS)
def test_a_post_is_answered_as_strawberrys_view_answers_it(
    client: TestClient,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    content_type: str,
    accept: str | None,
    body: bytes,
) -> None:
    taken: list[str] = []
    answer_post = app_module.GraphQLEndpoint.answer_post

    async def counted(self: app_module.GraphQLEndpoint, request: Any) -> Any:
        taken.append(name)
        return await answer_post(self, request)

    monkeypatch.setattr(app_module.GraphQLEndpoint, "answer_post", counted)
    short = _answer(client, content_type, accept, body)
    assert bool(taken) == (name in SHORT)  # the path this request is meant to take

    monkeypatch.setattr(app_module, "is_plain_post", lambda method, headers: False)
    assert _answer(client, content_type, accept, body) == short


def test_answers_it_gives_are_the_usual_ones(client: TestClient) -> None:
    status, _, body = _answer(client, JSON, JSON, _json({"query": QUERY}))
    assert status == 200
    assert body["data"] == {"student": {"id": "stu-0001", "name": body["data"]["student"]["name"]}}
    assert body["extensions"]["dynamodb"]["requests"] == 1
    status, _, body = _answer(client, JSON, JSON, _json({"query": 5}))
    assert status == 400
    assert body["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


@pytest.mark.parametrize(
    "body", [_json({"query": QUERY}), b" \n[" + _json({"query": QUERY}) + b"]"]
)
def test_a_post_authenticates_its_token_once(
    client: TestClient, services: Any, monkeypatch: pytest.MonkeyPatch, body: bytes
) -> None:
    checked: list[str | None] = []
    authenticate = services.auth.authenticate

    async def counted(header: str | None) -> Any:
        checked.append(header)
        return await authenticate(header)

    monkeypatch.setattr(services.auth, "authenticate", counted)
    headers = {"Content-Type": JSON, "Authorization": "Bearer not-a-token"}
    response = client.post("/graphql", content=body, headers=headers)
    assert response.status_code < 500
    assert checked == ["Bearer not-a-token"]


@pytest.mark.parametrize(
    ("method", "headers", "plain"),
    [
        ("POST", {"content-type": "application/json"}, True),
        ("POST", {"content-type": "application/json; charset=utf-8", "accept": "*/*"}, True),
        ("POST", {"content-type": "Application/JSON"}, False),  # Strawberry's 400, as before
        ("POST", {"content-type": "application/json", "accept": "text/event-stream"}, False),
        ("POST", {"content-type": "application/json", "accept": "Text/Event-Stream"}, False),
        ("POST", {"content-type": "application/json", "accept": "multipart/mixed"}, False),
        ("POST", {"content-type": "multipart/form-data"}, False),
        ("POST", {}, False),
        ("GET", {"content-type": "application/json"}, False),
    ],
)
def test_which_requests_take_the_short_path(
    method: str, headers: dict[str, str], plain: bool
) -> None:
    assert is_plain_post(method, headers) is plain
