"""Hostile input against the running app: every attempt gets a clear coded error (or, for a
request that is not GraphQL at all, a 4xx), never a 5xx or a traceback, and the table is
exactly as it was: the same items, and the integrity checker finds nothing wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest
from connection_pages import b64
from hostile_checks import assert_coded, assert_no_traceback, assert_unchanged
from support import Hostile, awaited, scan

from graph_api.errors import BadUserInput
from graph_api.model import validation
from graph_api.ops.check import check_table

# -- GraphQL operations ----------------------------------------------------------------------


def deep(levels: int) -> str:
    """A selection nested `levels` fields deep under `student`."""
    chain = ["classes(first: 1)", "edges", "node", "students(first: 1)", "edges", "node"]
    path = [chain[i % len(chain)] for i in range(levels - 1)]
    while path[-1] != "node":
        path.pop()
    return " { ".join(path) + " { id" + " }" * len(path)


FORGED_PAYLOAD = b64(
    json.dumps(
        {"f": "Query.teachers", "r": "x", "k": {"PK": "STUDENT#stu-0001", "SK": "STUDENT#"}}
    ).encode()
)
FORGED_CURSORS = {
    "no dot": "abc",
    "two dots": "a.b.c",
    "not base64": "!!!.???",
    "unsigned payload": f"{FORGED_PAYLOAD}.{b64(bytes(16))}",
    "payload alone": FORGED_PAYLOAD,
    "huge": "A" * 50_000 + "." + "B" * 20,
}
GOOD_INPUT = '{name: "Eve", email: "eve@example.org"}'
CREATE_STUDENT = """mutation($i: CreateStudentInput!) {
  createStudent(input: $i) { student { id } userErrors { code } } }"""
LONE = "x\ud800"


def create(**fields: Any) -> dict[str, Any]:
    return {"i": {"name": "Eve", "email": "eve@example.org", **fields}}


# (query, variables, with a token, expected code)
OPERATIONS: dict[str, tuple[str, dict[str, Any] | None, bool, str]] = {
    # documents
    "1000 aliases": (
        "{ " + " ".join(f"a{i}: __typename" for i in range(1000)) + " }",
        None,
        False,
        "BAD_USER_INPUT",
    ),
    "depth 50": (f'{{ student(id: "stu-0001") {{ {deep(50)} }} }}', None, False, "BAD_USER_INPUT"),
    "fragment cycle": (
        '{ student(id: "stu-0001") { ...A } }'
        " fragment A on Student { ...B } fragment B on Student { ...A }",
        None,
        False,
        "BAD_USER_INPUT",
    ),
    "unknown field": ('{ student(id: "stu-0001") { password } }', None, False, "BAD_USER_INPUT"),
    "unknown root field": ("{ scan { items } }", None, False, "BAD_USER_INPUT"),
    "unknown argument": (
        "{ teachers(limit: 5) { edges { cursor } } }",
        None,
        False,
        "BAD_USER_INPUT",
    ),
    "syntax error": ('{ student(id: "stu-0001" { id }', None, False, "BAD_USER_INPUT"),
    "nested too deeply to parse": (
        "{" + " a {" * 1500 + " b" + " }" * 1500 + " }",
        None,
        False,
        "BAD_USER_INPUT",
    ),
    # Over plain HTTP a subscription is refused before it is validated: it runs over a
    # websocket or SSE only (tests/events/test_subscriptions.py).
    "subscription": ("subscription { students }", None, False, "BAD_REQUEST"),
    "over 5000 tokens": ("{ " + "__typename " * 6000 + "}", None, False, "BAD_USER_INPUT"),
    "costly": (
        "query($ids: [ID!]!) { students(ids: $ids) { classes(first: 100) { edges { node {"
        " students(first: 100) { edges { cursor } } } } } } }",
        {"ids": [f"stu-{i:04d}" for i in range(1, 101)]},
        False,
        "QUERY_TOO_COSTLY",
    ),
    # variables and arguments
    "first is a string": (
        "query($first: Int) { teachers(first: $first) { edges { cursor } } }",
        {"first": "ten"},
        False,
        "BAD_USER_INPUT",
    ),
    "first is a list": (
        "query($first: Int) { teachers(first: $first) { edges { cursor } } }",
        {"first": [1]},
        False,
        "BAD_USER_INPUT",
    ),
    "ids is an object": (
        "query($ids: [ID!]!) { students(ids: $ids) { id } }",
        {"ids": {"$gt": ""}},
        False,
        "BAD_USER_INPUT",
    ),
    "undeclared variable": (
        "{ teachers(first: $n) { edges { cursor } } }",
        {"n": 1},
        False,
        "BAD_USER_INPUT",
    ),
    "first -1": ("{ teachers(first: -1) { edges { cursor } } }", None, False, "BAD_USER_INPUT"),
    "first 0": ("{ sports(first: 0) { edges { cursor } } }", None, False, "BAD_USER_INPUT"),
    "first 1000000": (
        "{ classes(first: 1000000) { edges { cursor } } }",
        None,
        False,
        "BAD_USER_INPUT",
    ),
    "first over 32 bits": (
        "{ classes(first: 99999999999) { edges { cursor } } }",
        None,
        False,
        "BAD_USER_INPUT",
    ),
    "nested first -1": (
        '{ student(id: "stu-0001") { classes(first: -1) { edges { cursor } } } }',
        None,
        False,
        "BAD_USER_INPUT",
    ),
    "101 ids": (
        "query($ids: [ID!]!) { students(ids: $ids) { id } }",
        {"ids": [f"stu-{i:04d}" for i in range(101)]},
        False,
        "BAD_USER_INPUT",
    ),
    "empty country": (
        '{ studentsByLocation(country: " ") { edges { cursor } } }',
        None,
        False,
        "BAD_USER_INPUT",
    ),
    "long city": (
        f'{{ studentsByLocation(country: "USA", city: "{"c" * 101}") {{ edges {{ cursor }} }} }}',
        None,
        False,
        "BAD_USER_INPUT",
    ),
    # ids
    **{
        f"id with {name}": (
            "query($id: ID!) { student(id: $id) { id } }",
            {"id": bad},
            False,
            "BAD_USER_INPUT",
        )
        for name, bad in {
            "#": "stu#0001",
            "/": "stu/0001",
            "unicode": "stü-0001",
            "65 chars": "a" * 65,
            "key prefix": "STUDENT#stu-0001",
            "NUL": "stu\x000001",
        }.items()
    },
    **{
        f"ids with {name}": (
            "query($ids: [ID!]!) { students(ids: $ids) { id } }",
            {"ids": ["stu-0001", bad]},
            False,
            "BAD_USER_INPUT",
        )
        for name, bad in {"#": "a#b", "/": "a/b", "unicode": "ü", "65 chars": "b" * 65}.items()
    },
    # cursors
    **{
        f"cursor {name}": (
            "query($after: String) { teachers(first: 2, after: $after) { edges { cursor } } }",
            {"after": cursor},
            False,
            "BAD_USER_INPUT",
        )
        for name, cursor in FORGED_CURSORS.items()
    },
    # writes with a valid token
    "name of 201 characters": (CREATE_STUDENT, create(name="n" * 201), True, "BAD_USER_INPUT"),
    "blank name": (CREATE_STUDENT, create(name="   "), True, "BAD_USER_INPUT"),
    "name with a control character": (
        CREATE_STUDENT,
        create(name="Eve\x00"),
        True,
        "BAD_USER_INPUT",
    ),
    "email without @": (CREATE_STUDENT, create(email="eve.example.org"), True, "BAD_USER_INPUT"),
    "email without a domain": (CREATE_STUDENT, create(email="eve@"), True, "BAD_USER_INPUT"),
    "email of 300 characters": (
        CREATE_STUDENT,
        create(email="e" * 290 + "@example.org"),
        True,
        "BAD_USER_INPUT",
    ),
    **{
        f"create with id {name}": (CREATE_STUDENT, create(id=bad), True, "BAD_USER_INPUT")
        for name, bad in {"#": "stu#9", "/": "stu/9", "unicode": "stü-9", "65": "s" * 65}.items()
    },
    "home country of 101 characters": (
        CREATE_STUDENT,
        create(home={"country": "c" * 101, "state": "s", "city": "c"}),
        True,
        "BAD_USER_INPUT",
    ),
    "unknown input field": (CREATE_STUDENT, create(admin=True), True, "BAD_USER_INPUT"),
    "input is a string": (CREATE_STUDENT, {"i": "Eve"}, True, "BAD_USER_INPUT"),
    "teacher name of 201": (
        'mutation { createTeacher(input: {name: "%s"}) { teacher { id } userErrors { code } } }'
        % ("t" * 201),
        None,
        True,
        "BAD_USER_INPUT",
    ),
    "update with a bad email": (
        'mutation { updateStudent(id: "stu-0001", input: {email: "nope"})'
        " { student { id } userErrors { code } } }",
        None,
        True,
        "BAD_USER_INPUT",
    ),
    "update a forged id": (
        'mutation { updateStudent(id: "STUDENT#stu-0001", input: {name: "x"})'
        " { userErrors { code } } }",
        None,
        True,
        "BAD_USER_INPUT",
    ),
    "delete with /": (
        'mutation { deleteStudent(id: "stu/0001") { deletedId userErrors { code } } }',
        None,
        True,
        "BAD_USER_INPUT",
    ),
    "enroll with #": (
        'mutation { enrollStudent(studentId: "stu-0001", classId: "cls#001")'
        " { userErrors { code } } }",
        None,
        True,
        "BAD_USER_INPUT",
    ),
    "set a long home": (
        'mutation { setHome(studentId: "stu-0001", home: {country: "%s", state: "s", city: "c"})'
        " { student { id } userErrors { code } } }" % ("c" * 101),
        None,
        True,
        "BAD_USER_INPUT",
    ),
    "delete a missing student": (
        'mutation { deleteStudent(id: "stu-9999") { deletedId userErrors { code } } }',
        None,
        True,
        "NOT_FOUND",
    ),
    "enroll a missing student": (
        'mutation { enrollStudent(studentId: "stu-9999", classId: "cls-001")'
        " { userErrors { code } } }",
        None,
        True,
        "NOT_FOUND",
    ),
    "unenroll from a missing class": (
        'mutation { unenrollStudent(studentId: "stu-0001", classId: "cls-999")'
        " { userErrors { code } } }",
        None,
        True,
        "NOT_FOUND",
    ),
    "class of a missing teacher": (
        'mutation { createClass(input: {subject: "x", teacherId: "tch-999"})'
        " { userErrors { code } } }",
        None,
        True,
        "NOT_FOUND",
    ),
    "1000 aliased writes": (
        "mutation { "
        + " ".join(
            f'a{i}: createTeacher(input: {{name: "T{i}"}}) {{ teacher {{ id }} }}'
            for i in range(1000)
        )
        + " }",
        None,
        True,
        "BAD_USER_INPUT",
    ),
    "31 aliased writes": (
        "mutation { "
        + " ".join(
            f'a{i}: createTeacher(input: {{name: "T{i}"}}) {{ teacher {{ id }} }}'
            for i in range(31)
        )
        + " }",
        None,
        True,
        "BAD_USER_INPUT",
    ),
    "write depth 50": (
        f"mutation {{ createStudent(input: {GOOD_INPUT}) {{ student {{ {deep(50)} }} }} }}",
        None,
        True,
        "BAD_USER_INPUT",
    ),
    "costly write": (
        f"mutation {{ createStudent(input: {GOOD_INPUT}) "
        + "{ student { classes(first: 100) { edges { node { students(first: 100) { edges {"
        " node { classes(first: 100) { edges { cursor } } } } } } } } } } }",
        None,
        True,
        "QUERY_TOO_COSTLY",
    ),
    "write with a fragment cycle": (
        f"mutation {{ createStudent(input: {GOOD_INPUT}) {{ student {{ ...A }} }} }}"
        " fragment A on Student { ...B } fragment B on Student { ...A }",
        None,
        True,
        "BAD_USER_INPUT",
    ),
    # lone surrogates: JSON's "\ud800" is a Python str that UTF-8 (and DynamoDB) cannot hold
    **{
        f"lone surrogate in {name}": (query, variables, True, "BAD_USER_INPUT")
        for name, (query, variables) in {
            "name": (CREATE_STUDENT, create(name=LONE)),
            "email": (CREATE_STUDENT, create(email=f"eve{LONE}@example.org")),
            "id": (CREATE_STUDENT, create(id=f"stu{LONE}")),
            **{
                f"home {part}": (
                    CREATE_STUDENT,
                    create(home={"country": "C", "state": "S", "city": "C", part: LONE}),
                )
                for part in ("country", "state", "city", "street")
            },
            "update email": (
                'mutation($e: String) { updateStudent(id: "stu-0001", input: {email: $e}) { id } }',
                {"e": f"eve{LONE}@example.org"},
            ),
            "setHome city": (
                'mutation($h: HomeInput) { setHome(studentId: "stu-0001", home: $h) { id } }',
                {"h": {"country": "C", "state": "S", "city": LONE}},
            ),
            "teacher name": (
                "mutation($n: String!) { createTeacher(input: {name: $n}) { id } }",
                {"n": LONE},
            ),
            "sport coach": (
                'mutation($c: String) { createSport(input: {name: "Polo", coach: $c}) { id } }',
                {"c": LONE},
            ),
            "class subject": (
                "mutation($s: String!) { createClass(input: {subject: $s, teacherId:"
                ' "tch-001"}) { id } }',
                {"s": LONE},
            ),
            "input object key": (CREATE_STUDENT, {"i": {**create()["i"], f"n{LONE}": "x"}}),
            "location filter": (
                "query($c: String!) { studentsByLocation(country: $c) { edges { cursor } } }",
                {"c": f"Canada{LONE}"},
            ),
            "node id": ("query($id: ID!) { student(id: $id) { id } }", {"id": f"stu{LONE}"}),
            "ids": (
                "query($ids: [ID!]!) { students(ids: $ids) { id } }",
                {"ids": ["stu-0001", LONE]},
            ),
            "document literal": (
                f'mutation {{ createTeacher(input: {{name: "x{LONE}"}}) {{ id }} }}',
                None,
            ),
            "document escape": (
                'mutation { createTeacher(input: {name: "x\\ud800"}) { id } }',
                None,
            ),
        }.items()
    },
    # writes without a (valid) token
    "write without a token": (CREATE_STUDENT, create(), False, "UNAUTHENTICATED"),
    "delete without a token": (
        'mutation { deleteStudent(id: "stu-0001") { deletedId } }',
        None,
        False,
        "UNAUTHENTICATED",
    ),
}


@pytest.mark.parametrize(
    ("query", "variables", "with_token", "code"), list(OPERATIONS.values()), ids=list(OPERATIONS)
)
def test_hostile_operation_gets_a_coded_error_and_changes_nothing(
    h: Hostile, query: str, variables: dict[str, Any] | None, with_token: bool, code: str
) -> None:
    # json.dumps escapes a lone surrogate as "\ud800", as a JavaScript client would send it.
    response = h.client.post(
        "/graphql",
        content=json.dumps({"query": query, "variables": variables}),
        headers={**(h.token if with_token else {}), "content-type": JSON_TYPE},
    )
    assert_coded(response, code)
    assert_unchanged(h, attempts_allowed=code == "NOT_FOUND")


@pytest.mark.parametrize(
    "authorization",
    ["Basic eve:secret", "Bearer ", "Bearer forged.token.here", "Bearer " + "A" * 8000],
)
def test_write_with_a_bad_token_is_unauthenticated(h: Hostile, authorization: str) -> None:
    response = h.client.post(
        "/graphql",
        json={"query": 'mutation { deleteTeacher(id: "tch-001") { deletedId } }'},
        headers={"Authorization": authorization},
    )
    assert_coded(response, "UNAUTHENTICATED")
    assert_unchanged(h)


# -- requests that are not GraphQL ------------------------------------------------------------

JSON_TYPE = "application/json"
NESTED_JSON = b"[" * 40_000 + b"]" * 40_000
# JSON that is not an object, not UTF-8, or nested past Python's recursion limit once made
# Strawberry's request parsing fail with 500s; GraphQLEndpoint.parse_json refuses them.

# (method, body, content type)
MALFORMED = {
    "malformed JSON": ("POST", b'{"query": "{ __typename }"', JSON_TYPE),
    "trailing garbage": ("POST", b'{"query": "{ __typename }"} x', JSON_TYPE),
    "empty body": ("POST", b"", JSON_TYPE),
    "text/plain": ("POST", b"{ __typename }", "text/plain"),
    "application/xml": ("POST", b"<query>{ __typename }</query>", "application/xml"),
    "no content type": ("POST", b'{"query": "{ __typename }"}', ""),
    "form": ("POST", b"query=%7B+__typename+%7D", "application/x-www-form-urlencoded"),
    "multipart junk": ("POST", b"--x\r\n\r\n--x--", "multipart/form-data; boundary=x"),
    "batch": ("POST", b'[{"query": "{ __typename }"}]', JSON_TYPE),
    "query not a string": ("POST", b'{"query": 5}', JSON_TYPE),
    "query a list": ("POST", b'{"query": ["{ __typename }"]}', JSON_TYPE),
    "no query": ("POST", b"{}", JSON_TYPE),
    "variables a list": ("POST", b'{"query": "{ __typename }", "variables": [1]}', JSON_TYPE),
    "variables a string": ("POST", b'{"query": "{ __typename }", "variables": "x"}', JSON_TYPE),
    "extensions a number": ("POST", b'{"query": "{ __typename }", "extensions": 5}', JSON_TYPE),
    "unknown operation name": (
        "POST",
        b'{"query": "query A { __typename }", "operationName": "B"}',
        JSON_TYPE,
    ),
    "PUT": ("PUT", b'{"query": "{ __typename }"}', JSON_TYPE),
    "DELETE": ("DELETE", b"", JSON_TYPE),
    "PATCH": ("PATCH", b'{"query": "{ __typename }"}', JSON_TYPE),
    "JSON string body": ("POST", b'"{ __typename }"', JSON_TYPE),
    "JSON number body": ("POST", b"5", JSON_TYPE),
    "JSON true body": ("POST", b"true", JSON_TYPE),
    "JSON null body": ("POST", b"null", JSON_TYPE),
    "invalid UTF-8": ("POST", b'{"query": "{ student(id: \\"\xff\xfe\\") { id } }"}', JSON_TYPE),
    "JSON nested 40000 deep": ("POST", NESTED_JSON, JSON_TYPE),
    "variables nested 40000 deep": (
        "POST",
        b'{"query": "{ __typename }", "variables": {"v": ' + NESTED_JSON + b"}}",
        JSON_TYPE,
    ),
}


@pytest.mark.parametrize(
    ("method", "body", "content_type"), list(MALFORMED.values()), ids=list(MALFORMED)
)
def test_malformed_request_is_a_4xx_without_a_traceback(
    h: Hostile, method: str, body: bytes, content_type: str
) -> None:
    headers = {**h.token, "content-type": content_type} if content_type else dict(h.token)
    response = h.client.request(method, "/graphql", content=body, headers=headers)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert_no_traceback(response)
    media_type = response.headers.get("content-type", "")
    assert media_type.startswith(
        ("application/json", "application/graphql-response+json", "text/plain")
    ), media_type
    if "json" in media_type:
        assert response.json()["errors"]
    assert_unchanged(h)


def test_get_with_deeply_nested_variables_is_a_4xx(h: Hostile) -> None:
    variables = '{"v": ' + "[" * 3000 + "]" * 3000 + "}"
    response = h.client.get("/graphql", params={"query": "{ __typename }", "variables": variables})
    assert 400 <= response.status_code < 500
    assert_no_traceback(response)
    assert_unchanged(h)


def test_mutation_over_get_is_refused(h: Hostile) -> None:
    response = h.client.get(
        "/graphql",
        params={"query": 'mutation { deleteStudent(id: "stu-0001") { deletedId } }'},
        headers=h.token,
    )
    assert 400 <= response.status_code < 500
    assert_no_traceback(response)
    assert_unchanged(h)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_1_mb_query_is_413_with_a_coded_error(h: Hostile, chunked: bool) -> None:
    query = "mutation { " + 'deleteStudent(id: "stu-0001") ' * 35_000 + "}"
    body = json.dumps({"query": query}).encode()
    assert len(body) > 1_000_000
    content: Any = iter([body[i : i + 65_536] for i in range(0, len(body), 65_536)])
    response = h.client.post(
        "/graphql",
        content=content if chunked else body,
        headers={**h.token, "content-type": JSON_TYPE},
    )
    assert response.status_code == 413
    assert_no_traceback(response)
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert_unchanged(h)


def test_the_table_is_as_seeded_and_whole_after_it_all(h: Hostile) -> None:
    assert len(h.items) > 50
    assert scan(h.services) == h.items
    assert awaited(check_table(h.services.dynamo, h.services.settings.table)) == []


@pytest.mark.parametrize(
    "check",
    [
        lambda v: validation.name(v),
        lambda v: validation.email(f"{v}@example.org"),
        lambda v: validation.place(v, "home.city"),
        lambda v: validation.place_filter(v, "city"),
    ],
    ids=["name", "email", "place", "place filter"],
)
def test_the_validation_module_refuses_a_lone_surrogate(check: Any) -> None:
    # Whatever path a string takes to a write or a key, not only variables.
    with pytest.raises(BadUserInput, match="not valid Unicode"):
        check(LONE)
