"""Limits on what one request may ask: depth, aliases, tokens, body size, static cost and
introspection. Each refusal is a coded GraphQL error (never a 5xx) sent before anything
reaches DynamoDB; each limit is a setting."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from graphql import OperationDefinitionNode, parse
from graphql.execution.values import get_variable_values
from starlette.testclient import TestClient
from support import codes, post

from graph_api.graph.engine.context import Services
from graph_api.graph.engine.plan.pricing import as_given
from graph_api.graph.schema import build_schema
from graph_api.http.app import create_app
from graph_api.http.middleware import RequestGuard
from graph_api.settings import Settings, SettingsError

MakeClient = Callable[..., TestClient]

IDS_100 = [f"stu-{i:04d}" for i in range(1, 101)]
NESTED = """query($ids: [ID!]!, $c: Int, $s: Int) {
  students(ids: $ids) {
    classes(first: $c) { edges { node { students(first: $s) { edges { node { id } } } } } }
  }
}"""
DEPTH_10 = """{ student(id: "stu-0001") { classes(first: 1) { edges { node {
  students(first: 1) { edges { node { classes(first: 1) { edges { node { id } } } } } }
} } } } }"""
DEPTH_11 = DEPTH_10.replace("node { id }", "node { teacher { id } }")
INTROSPECTION = "{ __schema { types { name } } }"


def requests_sent(body: Any) -> int:
    return body.get("extensions", {}).get("dynamodb", {}).get("requests", 0)  # type: ignore[no-any-return]


def cost_of(body: Any) -> dict[str, Any]:
    """`extensions.cost` without the rate limit's bucket (test_rate_limits.py)."""
    return {k: v for k, v in body["extensions"]["cost"].items() if k != "throttleStatus"}


def assert_refused(body: Any, code: str) -> None:
    assert body.get("data") is None
    assert codes(body) and set(codes(body)) == {code}, body
    assert requests_sent(body) == 0


@pytest.fixture
def client_with(services_with: Callable[..., Services]) -> Iterator[MakeClient]:
    """Clients over the seeded read table with other settings (`services_with`)."""
    with contextlib.ExitStack() as stack:

        def make(**overrides: Any) -> TestClient:
            return stack.enter_context(TestClient(create_app(services_with(**overrides))))

        yield make


# -- settings ----------------------------------------------------------------------------


def test_limits_default_to_the_documented_values() -> None:
    for settings in (Settings(), Settings.from_env({})):
        assert settings.max_depth == 10
        assert settings.max_aliases == 30
        assert settings.max_tokens == 5000
        assert settings.max_body_bytes == 100_000
        assert settings.max_cost == 50_000
        assert settings.introspection is True
        assert settings.graphiql is True


def test_limits_are_read_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "GRAPH_API_MAX_DEPTH": "4",
            "GRAPH_API_MAX_ALIASES": "5",
            "GRAPH_API_MAX_TOKENS": "600",
            "GRAPH_API_MAX_BODY_BYTES": "7000",
            "GRAPH_API_MAX_COST": "800",
            "GRAPH_API_INTROSPECTION": "false",
            "GRAPH_API_GRAPHIQL": "off",
        }
    )
    assert (settings.max_depth, settings.max_aliases, settings.max_tokens) == (4, 5, 600)
    assert (settings.max_body_bytes, settings.max_cost) == (7000, 800)
    assert settings.introspection is False
    assert settings.graphiql is False


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GRAPH_API_MAX_DEPTH", "0"),
        ("GRAPH_API_MAX_TOKENS", "ten"),
        ("GRAPH_API_MAX_BODY_BYTES", "0"),
        ("GRAPH_API_MAX_COST", "-1"),
        ("GRAPH_API_MAX_ALIASES", "1.5"),
        ("GRAPH_API_INTROSPECTION", "maybe"),
    ],
)
def test_invalid_limit_settings_are_refused(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value})


# -- depth, aliases, tokens ------------------------------------------------------------------


def test_depth_of_10_is_allowed(client: TestClient) -> None:
    body = post(client, DEPTH_10)
    assert "errors" not in body
    assert body["data"]["student"]["classes"]["edges"]


def test_depth_over_10_is_bad_user_input_before_any_request(client: TestClient) -> None:
    assert_refused(post(client, DEPTH_11), "BAD_USER_INPUT")


def test_depth_counts_fields_inside_fragments(client: TestClient) -> None:
    query = """{ student(id: "stu-0001") { ...A } }
    fragment A on Student { classes(first: 1) { edges { node { ...B } } } }
    fragment B on Class { students(first: 1) { edges { node { ...C } } } }
    fragment C on Student { classes(first: 1) { edges { node { teacher { id } } } } }"""
    assert_refused(post(client, query), "BAD_USER_INPUT")


def aliases(count: int) -> str:
    return "{ " + " ".join(f'a{i}: teacher(id: "tch-001") {{ id }}' for i in range(count)) + " }"


def test_30_aliases_are_allowed(client: TestClient) -> None:
    body = post(client, aliases(30))
    assert "errors" not in body
    assert len(body["data"]) == 30


def test_31_aliases_are_bad_user_input_before_any_request(client: TestClient) -> None:
    assert_refused(post(client, aliases(31)), "BAD_USER_INPUT")


def test_aliases_inside_fragments_count(client: TestClient) -> None:
    fields = " ".join(f'a{i}: teacher(id: "tch-001") {{ id }}' for i in range(31))
    query = f"{{ ...F }} fragment F on Query {{ {fields} }}"
    assert_refused(post(client, query), "BAD_USER_INPUT")


def test_over_5000_tokens_is_bad_user_input_before_any_request(client: TestClient) -> None:
    query = "{ " + "__typename " * 5000 + "}"
    assert len(query.encode()) < 100_000  # the token limit, not the body limit, refuses it
    assert_refused(post(client, query), "BAD_USER_INPUT")


# -- static cost ---------------------------------------------------------------------------


def test_costly_query_is_refused_before_any_request(client: TestClient) -> None:
    body = post(client, NESTED, {"ids": IDS_100, "c": 100, "s": 100})
    assert_refused(body, "QUERY_TOO_COSTLY")
    requested = 100 + 100 * 100 + 100 * 100 * 100
    assert body["errors"][0]["extensions"]["cost"] == {"requested": requested, "limit": 50_000}
    assert cost_of(body) == {"requested": requested, "limit": 50_000}


def test_costly_query_with_literal_arguments_is_refused(client: TestClient) -> None:
    query = (
        f"{{ students(ids: {json.dumps(IDS_100)}) {{ classes(first: 100) {{ edges {{ node {{"
        " students(first: 100) { edges { node { id } } } } } } } }"
    )
    body = post(client, query)
    assert_refused(body, "QUERY_TOO_COSTLY")
    assert body["errors"][0]["extensions"]["cost"]["requested"] == 1_010_100


def test_small_nested_query_runs_and_reports_its_cost(client: TestClient) -> None:
    body = post(client, NESTED, {"ids": IDS_100[:2], "c": 2, "s": 3})
    assert "errors" not in body
    assert cost_of(body) == {"requested": 2 + 2 * 2 + 2 * 2 * 3, "limit": 50_000}
    assert requests_sent(body) > 0


COSTS = {
    "default first": ("{ teachers { edges { node { id } } } }", 20),
    "single nodes count 1": (
        '{ student(id: "stu-0001") { name home { city } } teacher(id: "tch-001") { name } }',
        2,
    ),
    "nested under a node": (
        '{ student(id: "stu-0001") { classes(first: 5) { edges { node {'
        " teacher { id } students(first: 2) { edges { cursor } } } } } } }",
        1 + 5 + 5 * 2,
    ),
    "default first nested": (
        '{ class(id: "cls-001") { students { edges { node { sports { edges { cursor } } } } } } }',
        1 + 20 + 20 * 20,
    ),
    "ids count": (
        '{ students(ids: ["stu-0001", "stu-0002", "stu-0003"]) {'
        " sports(first: 2) { edges { cursor } } } }",
        3 + 3 * 2,
    ),
    "aliases each count": (
        "{ a: teachers(first: 2) { edges { cursor } } b: teachers(first: 3) { edges { cursor } } }",
        5,
    ),
    "fragment": (
        '{ student(id: "stu-0001") { ...F } }'
        " fragment F on Student { classes(first: 3) { edges { node {"
        " students(first: 4) { edges { cursor } } } } } }",
        1 + 3 + 3 * 4,
    ),
    "inline fragment": (
        '{ student(id: "stu-0001") { ... on Student { classes(first: 3) { edges { node {'
        " ... { students(first: 4) { edges { cursor } } } } } } } } }",
        1 + 3 + 3 * 4,
    ),
    "location": (
        '{ studentsByLocation(country: "Canada", first: 3) { edges { node {'
        " classes(first: 2) { edges { cursor } } } } } }",
        3 + 3 * 2,
    ),
    "scalars only": ("{ __typename }", 0),
}


@pytest.mark.parametrize(("query", "expected"), list(COSTS.values()), ids=list(COSTS))
def test_reported_cost_follows_the_github_rule(
    client: TestClient, query: str, expected: int
) -> None:
    body = post(client, query)
    assert "errors" not in body, body["errors"]
    assert cost_of(body) == {"requested": expected, "limit": 50_000}


@pytest.mark.parametrize(("first", "expected"), [(7, 7), (None, 20), (100, 100)])
def test_a_variable_first_is_honoured(client: TestClient, first: int | None, expected: int) -> None:
    body = post(client, "query($n: Int) { sports(first: $n) { edges { cursor } } }", {"n": first})
    assert "errors" not in body
    assert body["extensions"]["cost"]["requested"] == expected


def test_only_the_named_operation_is_costed(client: TestClient) -> None:
    query = """query Cheap { teachers(first: 2) { edges { cursor } } }
    query Dear($ids: [ID!]!) { students(ids: $ids) { classes(first: 100) { edges { node {
      students(first: 100) { edges { cursor } } } } } } }"""
    response = client.post(
        "/graphql",
        json={"query": query, "operationName": "Cheap", "variables": {"ids": IDS_100}},
    )
    assert response.status_code < 500
    body = response.json()
    assert "errors" not in body
    assert body["extensions"]["cost"]["requested"] == 2


def test_a_variable_default_for_first_is_honoured_by_the_cost(client_with: MakeClient) -> None:
    # Executing with `$f` left out uses its default of 100, so that is what it may cost.
    client = client_with(max_cost=30_302)
    query = NESTED.replace("$c: Int, $s: Int", "$f: Int = 100").replace("$c", "$f")
    query = query.replace("$s", "$f")
    body = post(client, query, {"ids": IDS_100[:3]})
    requested = 3 + 3 * 100 + 3 * 100 * 100
    assert cost_of(body) == {"requested": requested, "limit": 30_302}
    assert_refused(body, "QUERY_TOO_COSTLY")


def test_an_integral_float_variable_first_is_costed_as_its_value(
    client_with: MakeClient,
) -> None:
    client = client_with(max_cost=30_302)
    body = post(client, NESTED, {"ids": IDS_100[:3], "c": 100.0, "s": 100.0})
    assert body["extensions"]["cost"]["requested"] == 3 + 3 * 100 + 3 * 100 * 100
    assert_refused(body, "QUERY_TOO_COSTLY")


def test_a_single_id_variable_counts_as_one_id(client: TestClient) -> None:
    body = post(client, NESTED, {"ids": "stu-0001", "c": 2, "s": 3})
    assert "errors" not in body
    assert body["extensions"]["cost"]["requested"] == 1 + 2 + 2 * 3


def test_out_of_range_first_is_the_resolvers_to_refuse(client: TestClient) -> None:
    body = post(client, "{ sports(first: 1000000) { edges { cursor } } }")
    assert codes(body) == ["BAD_USER_INPUT"]
    assert body["errors"][0]["extensions"]["field"] == "first"
    assert body["extensions"]["cost"]["requested"] == 100  # clamped to the most it may be
    assert requests_sent(body) == 0


def test_one_document_is_priced_for_each_requests_own_variables(client: TestClient) -> None:
    # A document is compiled once; what its counts read from the variables is read anew.
    for ids, c, s in ((IDS_100[:2], 2, 3), (IDS_100[:5], None, 1), (IDS_100[:2], 2, 3)):
        body = post(client, NESTED, {"ids": ids, "c": c, "s": s})
        classes = 20 if c is None else c
        requested = len(ids) + len(ids) * classes + len(ids) * classes * s
        assert body["extensions"]["cost"]["requested"] == requested
    refused = post(client, NESTED, {"ids": IDS_100, "c": 100, "s": 100})
    assert_refused(refused, "QUERY_TOO_COSTLY")


FRAGMENTED = """query($ids: [ID!]!, $n: Int, $m: Int) {
  students(ids: $ids) { ...Classes }
  class(id: "cls-001") { students(first: 2) { edges { node { ...Classes } } } }
}
fragment Classes on Student {
  classes(first: $n) { edges { node {
    ... on Class { students(first: $m) { edges { cursor } } }
  } } }
  sports(first: 1) { edges { cursor } }
}"""


@pytest.mark.parametrize(("n", "m"), [(1, 1), (3, 2), (2, None)])
def test_a_fragment_that_reads_variables_is_priced_where_each_spread_runs(
    client: TestClient, n: int, m: int | None
) -> None:
    body = post(client, FRAGMENTED, {"ids": IDS_100[:4], "n": n, "m": m})
    assert "errors" not in body, body["errors"]
    per_student = n + n * (20 if m is None else m) + 1
    assert body["extensions"]["cost"]["requested"] == 4 + 4 * per_student + 1 + 2 + 2 * per_student


# -- custom limits ----------------------------------------------------------------------------

CUSTOM = {
    "depth": (
        {"max_depth": 3},
        "{ teachers(first: 1) { edges { node { id } } } }",
        "{ teachers(first: 1) { edges { node { classes(first: 1) { edges { cursor } } } } } }",
        "BAD_USER_INPUT",
    ),
    "aliases": (
        {"max_aliases": 2},
        aliases(2),
        aliases(3),
        "BAD_USER_INPUT",
    ),
    "tokens": (
        {"max_tokens": 20},
        "{ teachers(first: 1) { edges { cursor } } }",
        "{ teachers(first: 1) { edges { cursor node { id name } } pageInfo { hasNextPage } } }",
        "BAD_USER_INPUT",
    ),
    "cost": (
        {"max_cost": 10},
        "{ teachers(first: 10) { edges { cursor } } }",
        "{ teachers(first: 11) { edges { cursor } } }",
        "QUERY_TOO_COSTLY",
    ),
    "introspection": (
        {"introspection": False},
        "{ teachers(first: 1) { __typename edges { cursor } } }",
        INTROSPECTION,
        "BAD_USER_INPUT",
    ),
}


@pytest.mark.parametrize(
    ("overrides", "allowed", "refused", "code"), list(CUSTOM.values()), ids=list(CUSTOM)
)
def test_custom_limits_change_what_is_refused(
    client: TestClient,
    client_with: MakeClient,
    overrides: dict[str, Any],
    allowed: str,
    refused: str,
    code: str,
) -> None:
    limited = client_with(**overrides)
    body = post(limited, allowed)
    assert "errors" not in body, body
    assert_refused(post(limited, refused), code)
    # The defaults let the same document through.
    default = post(client, refused)
    assert "errors" not in default, default


def test_custom_cost_limit_is_reported(client_with: MakeClient) -> None:
    limited = client_with(max_cost=10)
    assert cost_of(post(limited, "{ sports(first: 4) { edges { cursor } } }")) == {
        "requested": 4,
        "limit": 10,
    }
    body = post(limited, "{ sports(first: 11) { edges { cursor } } }")
    assert body["errors"][0]["extensions"]["cost"] == {"requested": 11, "limit": 10}


# -- introspection and GraphiQL ------------------------------------------------------------


def test_introspection_is_on_by_default(client: TestClient) -> None:
    body = post(client, INTROSPECTION)
    assert "errors" not in body
    names = {t["name"] for t in body["data"]["__schema"]["types"]}
    assert {"Student", "Query", "Mutation"} <= names


@pytest.mark.parametrize("query", [INTROSPECTION, '{ __type(name: "Student") { name } }'])
def test_introspection_off_refuses_introspection_queries(
    client_with: MakeClient, query: str
) -> None:
    assert_refused(post(client_with(introspection=False), query), "BAD_USER_INPUT")


def test_graphiql_off_does_not_serve_the_page(client_with: MakeClient) -> None:
    response = client_with(graphiql=False).get("/graphql", headers={"Accept": "text/html"})
    assert response.status_code < 500
    assert not response.headers.get("content-type", "").startswith("text/html")
    assert "<html" not in response.text.lower()
    assert "<script" not in response.text.lower()


def test_graphiql_off_still_answers_get_queries(client_with: MakeClient) -> None:
    response = client_with(graphiql=False).get(
        "/graphql", params={"query": "{ sports(first: 1) { edges { cursor } } }"}
    )
    assert response.status_code == 200
    assert len(response.json()["data"]["sports"]["edges"]) == 1


# -- request body size ---------------------------------------------------------------------


def padded(size: int, query: str = "{ sports(first: 1) { edges { cursor } } }") -> bytes:
    """A valid JSON request of exactly `size` bytes (padded with trailing blanks)."""
    body = json.dumps({"query": query}).encode()
    assert len(body) <= size
    return body + b" " * (size - len(body))


def assert_body_refused(response: Any, limit: int) -> None:
    assert response.status_code == 413
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-request-id"]
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert str(limit) in error["message"]


JSON_HEADERS = {"content-type": "application/json"}


def test_body_at_the_limit_is_accepted(client: TestClient) -> None:
    response = client.post("/graphql", content=padded(100_000), headers=JSON_HEADERS)
    assert response.status_code == 200
    assert response.json()["data"]["sports"]["edges"]


def test_body_over_the_limit_with_content_length_is_413(client: TestClient) -> None:
    response = client.post("/graphql", content=padded(100_001), headers=JSON_HEADERS)
    assert_body_refused(response, 100_000)


def test_chunked_body_over_the_limit_is_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"query": "{ __typename }", "pad": "'
        for _ in range(11):
            yield b"x" * 10_000
        yield b'"}'

    response = client.post("/graphql", content=chunks(), headers=JSON_HEADERS)
    assert "content-length" not in response.request.headers
    assert_body_refused(response, 100_000)


def test_chunked_body_under_the_limit_is_served(client: TestClient) -> None:
    body = padded(5_000)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    response = client.post("/graphql", content=chunks(), headers=JSON_HEADERS)
    assert response.status_code == 200
    assert response.json()["data"]["sports"]["edges"]


def test_custom_body_limit(client_with: MakeClient) -> None:
    limited = client_with(max_body_bytes=300)
    ok = limited.post("/graphql", content=padded(300), headers=JSON_HEADERS)
    assert ok.status_code == 200
    assert_body_refused(
        limited.post("/graphql", content=padded(301), headers=JSON_HEADERS), limit=300
    )


def test_a_query_string_over_the_limit_is_413(client_with: MakeClient) -> None:
    """A GET carries its document and variables in the URL, which the server lets through
    up to its own (larger) bound: the same cap as a body's."""
    limited = client_with(max_body_bytes=300)
    variables = json.dumps({"pad": "x" * 300})
    query = "{ sports(first: 1) { edges { cursor } } }"
    ok = limited.get("/graphql", params={"query": query})
    assert ok.status_code == 200
    refused = limited.get("/graphql", params={"query": query, "variables": variables})
    assert_body_refused(refused, limit=300)
    assert refused.json()["errors"][0]["message"].startswith("query string over the limit")


def run_body_limit(chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[Any, Any]:
    """Drive RequestGuard(limit=100) directly with `chunks` as separate ASGI messages."""
    seen: list[bytes] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    messages = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/graphql", "headers": headers}
    asyncio.run(RequestGuard(app, limit=100)(scope, receive, send))
    return seen, sent


def test_streamed_body_over_the_limit_never_reaches_the_app() -> None:
    seen, sent = run_body_limit([b"x" * 40] * 3, [])
    assert seen == []
    assert sent[0]["status"] == 413
    error = json.loads(sent[1]["body"])["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"


def test_a_false_small_content_length_does_not_bypass_the_limit() -> None:
    seen, sent = run_body_limit([b"x" * 60, b"x" * 60], [(b"content-length", b"10")])
    assert seen == []
    assert sent[0]["status"] == 413


@pytest.mark.parametrize(
    "declared",
    [b"9" * 5000, b"1" + b"0" * 4400],
    ids=["5000 nines", "10^4400"],
)
def test_a_content_length_too_long_for_int_is_refused_as_too_big(declared: bytes) -> None:
    """Python's int() refuses more than 4,300 digits: such a length is a coded 413, as any
    length over the limit, not a 500."""
    seen, sent = run_body_limit([b"x" * 10], [(b"content-length", declared)])
    assert seen == []
    assert sent[0]["status"] == 413
    error = json.loads(sent[1]["body"])["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"


def test_a_content_length_of_leading_zeros_is_read_as_its_number() -> None:
    seen, sent = run_body_limit([b"x" * 10], [(b"content-length", b"0" * 5000 + b"10")])
    assert seen == [b"x" * 10]
    assert sent[0]["status"] == 200


def test_streamed_body_under_the_limit_reaches_the_app_whole() -> None:
    seen, sent = run_body_limit([b"a" * 30, b"b" * 30, b"c" * 40], [])
    assert seen == [b"a" * 30 + b"b" * 30 + b"c" * 40]
    assert sent[0]["status"] == 200


# -- the cost's variables: taken as given only where coercing them would change nothing ----

VARIABLE_CASES = [
    ("$ids: [ID!]!", {"ids": ["s0001", "s0002"]}, True),
    (
        "$id: ID!, $first: Int, $yes: Boolean, $name: String!",
        {"id": "a", "first": 5, "yes": False, "name": "n"},
        True,
    ),
    ("$ids: [ID!]!", {"ids": "s0001"}, False),  # one id: coerced to a list of one
    ("$ids: [ID!]!", {"ids": [1, "s0002"]}, False),  # an int id: coerced to "1"
    ("$first: Int", {"first": True}, False),  # refused by coercion
    ("$first: Int", {"first": 2**31}, False),  # out of Int's range: refused
    ("$first: Int = 3", {}, False),  # its default applies
    ("$first: Int", {"first": None}, False),
    ("$x: Float", {"x": 1}, False),  # coerced to 1.0
]


@pytest.mark.parametrize(("definitions", "variables", "unchanged"), VARIABLE_CASES)
def test_the_cost_takes_variables_as_given_only_where_coercion_changes_nothing(
    definitions: str, variables: dict[str, Any], unchanged: bool
) -> None:
    schema = build_schema()._schema
    operation = parse(f"query({definitions}) {{ __typename }}").definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    defined = operation.variable_definitions
    taken = as_given(schema, defined, variables)
    assert (taken is not None) == unchanged
    coerced = get_variable_values(schema, defined, variables)
    if taken is not None:
        assert not isinstance(coerced, list) and taken == coerced.coerced
