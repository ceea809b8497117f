"""GraphQL over HTTP: media types and statuses (graph_api.http.graphql_http and the view).

`application/graphql-response+json` answers a request error (nothing executed) with a 4xx
and no `data`; `application/json`, the default, keeps 200. Both keep coded errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from graphql import GraphQLError
from starlette.testclient import TestClient
from strawberry.types import ExecutionResult
from support import GRJ, codes, make_settings

from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.http.graphql_http import GRAPHQL_RESPONSE_JSON, JSON, is_request_error, status_for
from graph_api.http.negotiation import (
    EVENT_STREAM,
    Negotiated,
    Stream,
    negotiate,
    response_media_type,
)

LEGACY = {"Accept": JSON}
QUERY = '{ student(id: "stu-0001") { id name } }'
# Depth 9 (the limit is 10), but 100 + 100·100 + 100·100·100 over the cost limit.
TOO_COSTLY = (
    "{ teachers(first: 100) { edges { node { classes(first: 100) { edges { node {"
    " students(first: 100) { edges { cursor } } } } } } } } }"
)


def media_type(response: Any) -> str:
    return str(response.headers["content-type"]).split(";")[0]


# -- negotiation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, JSON),  # the spec's default for a client that says nothing
        ("", JSON),
        ("*/*", JSON),
        ("application/*", JSON),
        ("application/json", JSON),
        ("text/html", JSON),  # acceptable to neither: answer in the default, not 406
        (GRAPHQL_RESPONSE_JSON, GRAPHQL_RESPONSE_JSON),
        (f"{GRAPHQL_RESPONSE_JSON}, application/json;q=0.9", GRAPHQL_RESPONSE_JSON),
        (f"application/json, {GRAPHQL_RESPONSE_JSON}", GRAPHQL_RESPONSE_JSON),
        (f"{GRAPHQL_RESPONSE_JSON};q=0.5, application/json", JSON),
        (f"{GRAPHQL_RESPONSE_JSON};q=0, */*", JSON),
        (f"*/*;q=0.8, {GRAPHQL_RESPONSE_JSON}", GRAPHQL_RESPONSE_JSON),
        (f"  {GRAPHQL_RESPONSE_JSON.upper()} ; charset=utf-8", GRAPHQL_RESPONSE_JSON),
        (f"{GRAPHQL_RESPONSE_JSON};q=oops, application/json", JSON),
    ],
)
def test_response_media_type_follows_accept(accept: str | None, expected: str) -> None:
    assert response_media_type(accept) == expected


# What urql (@urql/core 6) sends by default: every type alike, no quality.
URQL_ACCEPT = (
    "application/graphql-response+json, application/graphql+json, application/json,"
    " text/event-stream, multipart/mixed"
)


@pytest.mark.parametrize(
    ("accept", "media", "stream"),
    [
        (URQL_ACCEPT, GRAPHQL_RESPONSE_JSON, Stream.SUBSCRIPTIONS),
        (f"{JSON}, {EVENT_STREAM};q=0.1", JSON, Stream.SUBSCRIPTIONS),
        (f"{JSON};q=0.5, {EVENT_STREAM}", JSON, Stream.ALWAYS),
        (EVENT_STREAM, JSON, Stream.ALWAYS),  # graphql-sse's client
        (f"{EVENT_STREAM};q=0, {JSON}", JSON, Stream.NEVER),
        ("*/*", JSON, Stream.NEVER),  # a wildcard is JSON, never a stream
        (None, JSON, Stream.NEVER),
        # The most specific range wins: JSON refused, whatever */* says.
        (f"{JSON};q=0, */*, {EVENT_STREAM};q=0.2", JSON, Stream.ALWAYS),
    ],
)
def test_accept_qualities_choose_json_or_a_stream(
    accept: str | None, media: str, stream: Stream
) -> None:
    assert negotiate(accept) == Negotiated(media, stream)


def events_of(response: Any) -> list[str]:
    return [line for line in response.text.splitlines() if line.startswith("event:")]


@pytest.mark.parametrize("accept", [URQL_ACCEPT, f"{JSON}, {EVENT_STREAM};q=0.1"])
def test_a_query_is_json_when_json_is_accepted_as_much_as_a_stream(
    client: TestClient, accept: str
) -> None:
    response = client.post("/graphql", json={"query": QUERY}, headers={"Accept": accept})
    assert response.status_code == 200
    assert media_type(response) in (GRAPHQL_RESPONSE_JSON, JSON)
    assert response.json()["data"]["student"]["id"] == "stu-0001"


def test_a_query_streams_when_the_client_prefers_a_stream(client: TestClient) -> None:
    response = client.post("/graphql", json={"query": QUERY}, headers={"Accept": EVENT_STREAM})
    assert media_type(response) == EVENT_STREAM
    assert events_of(response) == ["event: next", "event: complete"]
    assert "stu-0001" in response.text
    # Lines end with LF alone: urql's parser splits events on "\n\n" (graph_api/http/sse.py).
    assert "\r" not in response.text and response.text.endswith("\n\n")


def test_a_subscription_streams_for_a_client_that_accepts_a_stream(client: TestClient) -> None:
    # An unknown field: the stream carries the validation error, then completes.
    subscription = 'subscription { studentChanged(id: "stu-0001") { nope } }'
    response = client.post(
        "/graphql", json={"query": subscription}, headers={"Accept": URQL_ACCEPT}
    )
    assert media_type(response) == EVENT_STREAM
    assert events_of(response) == ["event: next", "event: complete"]
    assert "BAD_USER_INPUT" in response.text

    refused = client.post("/graphql", json={"query": subscription}, headers=GRJ)
    assert refused.status_code == 400
    assert "text/event-stream" in refused.json()["errors"][0]["message"]


def test_a_field_error_is_not_a_request_error() -> None:
    located = GraphQLError("boom", path=["teachers"], extensions={"code": "UNAVAILABLE"})
    assert not is_request_error(ExecutionResult(data=None, errors=[located]))
    assert is_request_error(ExecutionResult(data=None, errors=[GraphQLError("Syntax Error")]))
    assert not is_request_error(ExecutionResult(data={"x": 1}, errors=None))
    # data: null from a non-null root field that failed is still a 2xx (spec: "data" entry).
    field_error = {"data": None, "errors": [{"message": "boom", "path": ["teachers"]}]}
    assert status_for(field_error, GRAPHQL_RESPONSE_JSON) == 200


@pytest.mark.parametrize(
    ("code", "status"),
    [("BAD_USER_INPUT", 400), ("UNAUTHENTICATED", 401), ("INTERNAL_SERVER_ERROR", 500)],
)
def test_request_error_status_follows_its_code(code: str, status: int) -> None:
    body = {"errors": [{"message": "no", "extensions": {"code": code}}]}
    assert status_for(body, GRAPHQL_RESPONSE_JSON) == status
    assert status_for(body, JSON) == 200


# -- over HTTP --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({}, JSON), ({"Accept": "*/*"}, JSON), (LEGACY, JSON), (GRJ, GRAPHQL_RESPONSE_JSON)],
)
def test_success_is_200_in_the_negotiated_type(
    client: TestClient, headers: dict[str, str], expected: str
) -> None:
    response = client.post("/graphql", json={"query": QUERY}, headers=headers)
    assert response.status_code == 200
    assert media_type(response) == expected
    assert response.json()["data"]["student"]["id"] == "stu-0001"


@pytest.mark.parametrize(
    ("query", "variables", "code"),
    [
        pytest.param("{ student(id: ", None, "BAD_USER_INPUT", id="parse"),
        pytest.param("{ nope }", None, "BAD_USER_INPUT", id="validation"),
        pytest.param(
            "query($id: ID!) { student(id: $id) { id } }",
            {"id": None},
            "BAD_USER_INPUT",
            id="variables",
        ),
        pytest.param(TOO_COSTLY, None, "QUERY_TOO_COSTLY", id="cost"),
    ],
)
def test_request_errors_are_400_without_data_in_graphql_response_json(
    client: TestClient, query: str, variables: dict[str, Any] | None, code: str
) -> None:
    payload = {"query": query, "variables": variables}
    response = client.post("/graphql", json=payload, headers=GRJ)
    assert response.status_code == 400
    assert media_type(response) == GRAPHQL_RESPONSE_JSON
    body = response.json()
    assert "data" not in body
    assert codes(body) == [code]

    legacy = client.post("/graphql", json=payload, headers=LEGACY)
    assert legacy.status_code == 200
    assert media_type(legacy) == JSON
    assert "data" not in legacy.json()
    assert codes(legacy.json()) == [code]


def test_execution_errors_with_data_stay_200(client: TestClient) -> None:
    response = client.post("/graphql", json={"query": '{ student(id: "a#b") { id } }'}, headers=GRJ)
    assert response.status_code == 200
    assert media_type(response) == GRAPHQL_RESPONSE_JSON
    body = response.json()
    assert body["data"] == {"student": None}
    assert codes(body) == ["BAD_USER_INPUT"]


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        pytest.param(b'{"variables": {}}', "application/json", id="no-query"),
        pytest.param(b'{ "not json', "application/json", id="bad-json"),
        pytest.param(b"", "application/json", id="no-body"),
        pytest.param(
            b'{"query": "{ __typename }", "variables": "x"}',
            "application/json",
            id="variables-not-a-map",
        ),
        pytest.param(b'{"query": 7}', "application/json", id="query-not-a-string"),
        pytest.param(b'{"query": "{ __typename }"}', "text/plain", id="content-type"),
    ],
)
@pytest.mark.parametrize("accept", [GRAPHQL_RESPONSE_JSON, JSON])
def test_malformed_requests_are_400_with_a_coded_error(
    client: TestClient, content: bytes, content_type: str, accept: str
) -> None:
    response = client.post(
        "/graphql", content=content, headers={"Content-Type": content_type, "Accept": accept}
    )
    assert response.status_code == 400
    assert media_type(response) == accept
    body = response.json()
    assert "data" not in body
    assert codes(body) == ["BAD_REQUEST"]
    assert body["errors"][0]["message"]


@pytest.fixture
def write_client(empty_services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(empty_services)) as test_client:
        yield test_client


def test_get_never_runs_a_mutation(write_client: TestClient) -> None:
    mutation = (
        'mutation { createStudent(input: {name: "Via Get", email: "get@example.org",'
        ' home: {country: "Getland", state: "G", city: "G"}}) { student { id } } }'
    )
    response = write_client.get("/graphql", params={"query": mutation}, headers=GRJ)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert media_type(response) == GRAPHQL_RESPONSE_JSON
    assert codes(response.json()) == ["BAD_REQUEST"]

    check = write_client.post(
        "/graphql",
        json={"query": '{ studentsByLocation(country: "Getland") { edges { cursor } } }'},
    )
    assert check.json()["data"]["studentsByLocation"]["edges"] == []


@pytest.mark.parametrize("accept", [EVENT_STREAM, URQL_ACCEPT])
def test_get_never_streams_a_mutation(
    write_client: TestClient, accept: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Asked as a stream, the refusal once came inside it: a 200 carrying
    # INTERNAL_SERVER_ERROR, and a traceback in the log.
    mutation = (
        'mutation { createStudent(input: {name: "Via Get", email: "sse@example.org",'
        ' home: {country: "Getland", state: "G", city: "G"}}) { student { id } } }'
    )
    response = write_client.get("/graphql", params={"query": mutation}, headers={"Accept": accept})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert codes(response.json()) == ["BAD_REQUEST"]
    assert response.json()["errors"][0]["message"] == "mutations are not allowed when using GET"
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"

    # A query over GET still streams; nothing was written.
    check = '{ studentsByLocation(country: "Getland") { edges { cursor } } }'
    streamed = write_client.get("/graphql", params={"query": check}, headers={"Accept": accept})
    expected = EVENT_STREAM if accept == EVENT_STREAM else GRAPHQL_RESPONSE_JSON
    assert media_type(streamed) == expected
    assert '"edges":[]' in streamed.text


def test_get_runs_queries_in_the_negotiated_type(client: TestClient) -> None:
    response = client.get("/graphql", params={"query": QUERY}, headers=GRJ)
    assert response.status_code == 200
    assert media_type(response) == GRAPHQL_RESPONSE_JSON
    assert response.json()["data"]["student"]["id"] == "stu-0001"


def test_a_mutation_is_json_for_urqls_default_accept(write_client: TestClient) -> None:
    mutation = (
        'mutation { createStudent(input: {name: "Urql", email: "urql@example.org",'
        ' home: {country: "Urqland", state: "U", city: "U"}}) { student { name } } }'
    )
    response = write_client.post(
        "/graphql", json={"query": mutation}, headers={"Accept": URQL_ACCEPT}
    )
    assert response.status_code == 200
    assert media_type(response) == GRAPHQL_RESPONSE_JSON
    assert response.json()["data"]["createStudent"]["student"]["name"] == "Urql"


@pytest.fixture
def auth_client(endpoint: str, services: Services) -> Iterator[TestClient]:
    # The shared read table, with auth on; the refused mutation names no student anyway.
    settings = make_settings(
        endpoint,
        table="test-read",
        jwt_secret="s" * 32,
        jwt_issuer="https://issuer.example",
        jwt_audience="graph-api",
    )
    with_auth = Services.create(settings)
    with TestClient(create_app(with_auth)) as test_client:
        yield test_client
    with_auth.close()


def test_unauthenticated_request_error_is_401_in_graphql_response_json(
    auth_client: TestClient,
) -> None:
    mutation = {"query": 'mutation { deleteStudent(id: "stu-9999") { deletedId } }'}
    response = auth_client.post("/graphql", json=mutation, headers=GRJ)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert codes(response.json()) == ["UNAUTHENTICATED"]
    legacy = auth_client.post("/graphql", json=mutation, headers=LEGACY)
    assert legacy.status_code == 200
    assert codes(legacy.json()) == ["UNAUTHENTICATED"]


# -- several operations in one document ----------------------------------------------------

TWO_OPERATIONS = (
    'query A { teacher(id: "tch-001") { name } } query B { sports(first: 1) { edges { cursor } } }'
)


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_several_operations_without_an_operation_name_are_a_request_error(
    client: TestClient, method: str
) -> None:
    # GraphQL spec, GetOperation: "If operationName is null: if document contains exactly one
    # operation, return it; otherwise raise a request error". Strawberry ran the first.
    for accept, status in ((GRAPHQL_RESPONSE_JSON, 400), (JSON, 200)):
        if method == "POST":
            response = client.post(
                "/graphql", json={"query": TWO_OPERATIONS}, headers={"Accept": accept}
            )
        else:
            response = client.get(
                "/graphql", params={"query": TWO_OPERATIONS}, headers={"Accept": accept}
            )
        assert response.status_code == status
        body = response.json()
        assert "data" not in body, body
        assert codes(body) == ["BAD_USER_INPUT"]
        assert "operation name" in body["errors"][0]["message"]
        assert body.get("extensions", {}).get("dynamodb", {}).get("requests", 0) == 0


@pytest.mark.parametrize(("name", "field"), [("A", "teacher"), ("B", "sports")])
def test_the_named_operation_of_several_runs(client: TestClient, name: str, field: str) -> None:
    response = client.post(
        "/graphql", json={"query": TWO_OPERATIONS, "operationName": name}, headers=GRJ
    )
    assert response.status_code == 200
    assert list(response.json()["data"]) == [field]


def test_a_lone_named_operation_runs_without_an_operation_name(client: TestClient) -> None:
    response = client.post("/graphql", json={"query": "query Only { __typename }"}, headers=GRJ)
    assert response.status_code == 200
    assert response.json()["data"] == {"__typename": "Query"}


def test_a_mutation_among_several_operations_does_not_run_unnamed(
    write_client: TestClient,
) -> None:
    document = (
        'mutation M { createTeacher(input: {name: "Unnamed"}) { teacher { id } } }'
        " query Q { teachers { edges { node { name } } } }"
    )
    response = write_client.post("/graphql", json={"query": document}, headers=GRJ)
    assert response.status_code == 400
    assert codes(response.json()) == ["BAD_USER_INPUT"]
    after = write_client.post("/graphql", json={"query": document, "operationName": "Q"})
    assert after.json()["data"]["teachers"]["edges"] == []
