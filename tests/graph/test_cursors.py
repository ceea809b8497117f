"""Cursors are opaque and integrity-protected (graph_api/model/cursors.py): a cursor binds the
field it was issued for, the key range it walks and its place in it, under the server's
secret. One edited, forged, of another secret, or used on another field or parent is
BAD_USER_INPUT on `after` (or `before`), refused before the read it would steer, on its own
field only; and a hostile one never gets past the running app as anything else."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

import pytest
from connection_pages import CONNECTIONS, b64, cursor_of, page_any
from hostile_checks import assert_coded, assert_unchanged
from support import Gql, Hostile, Result

from graph_api.errors import BadUserInput
from graph_api.model import keys
from graph_api.model.cursors import Cursors
from graph_api.model.keys import Kind, Range

# -- the cursor itself ---------------------------------------------------------------------


RANGE = keys.roster(Kind.CLASS, "cls-1", Kind.STUDENT)
KEY = {"PK": RANGE.pk, "SK": "STUDENT#stu-1"}
FIELD = "Class.students"


def refused(cursors: Cursors, cursor: str, field: str = FIELD, rng: Range = RANGE) -> bool:
    try:
        cursors.decode(cursor, field, rng)
    except BadUserInput as error:
        assert error.extensions == {"field": "after"}
        return True
    return False


def test_cursor_round_trips_its_key() -> None:
    cursors = Cursors(b"k1")
    assert cursors.decode(cursors.encode(FIELD, RANGE, KEY), FIELD, RANGE) == KEY


def test_cursor_is_url_safe_and_opaque() -> None:
    cursor = Cursors(b"k1").encode(FIELD, RANGE, KEY)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    assert "stu-1" not in cursor


def test_cursor_of_another_secret_is_refused() -> None:
    assert refused(Cursors(b"k2"), Cursors(b"k1").encode(FIELD, RANGE, KEY))


def test_cursor_of_another_field_or_range_is_refused() -> None:
    cursors = Cursors(b"k1")
    cursor = cursors.encode(FIELD, RANGE, KEY)
    assert refused(cursors, cursor, field="Sport.students")
    assert refused(cursors, cursor, rng=keys.roster(Kind.CLASS, "cls-2", Kind.STUDENT))


def test_signed_cursor_whose_key_lies_outside_its_range_is_refused() -> None:
    cursors = Cursors(b"k1")
    elsewhere = {**KEY, "PK": "CLASS#cls-2"}
    assert refused(cursors, cursors.encode(FIELD, RANGE, elsewhere))
    wrong_prefix = {**KEY, "SK": "TEACHER#tch-1"}
    assert refused(cursors, cursors.encode(FIELD, RANGE, wrong_prefix))


def test_signed_cursor_with_a_non_string_key_value_is_refused() -> None:
    cursors = Cursors(b"k1")
    assert refused(cursors, cursors.encode(FIELD, RANGE, {**KEY, "PK": 1}))  # type: ignore[dict-item]


def test_cursor_with_any_data_character_changed_is_refused() -> None:
    cursors = Cursors(b"k1")
    cursor = cursors.encode(FIELD, RANGE, KEY)
    dot = cursor.index(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    # The last character of each base64 part may carry unused bits; every other one is data.
    for index in set(range(len(cursor))) - {dot - 1, dot, len(cursor) - 1}:
        for other in alphabet[::7]:
            if other != cursor[index]:
                assert refused(cursors, cursor[:index] + other + cursor[index + 1 :]), index


# -- through the schema: forged, edited, or used elsewhere ----------------------------------


def assert_after_refused(result: Result, reads: list[str]) -> None:
    """BAD_USER_INPUT on `after`, and no DynamoDB call beyond `reads` (the parents' loads)."""
    assert result.codes == ["BAD_USER_INPUT"], result.errors
    assert result.errors[0]["extensions"]["field"] == "after"
    assert [call.operation for call in result.context.ledger.calls] == reads
    assert result.extensions["dynamodb"]["requests"] == len(reads)


def _swap(text: str, index: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    other = alphabet[(alphabet.index(text[index]) + 17) % len(alphabet)]
    return text[:index] + other + text[index + 1 :]


def _forgeries(genuine: str, sibling: str) -> dict[str, str]:
    body, mac = genuine.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    other_body = sibling.split(".")[0]
    guessed = hmac.new(b"secret", b64(json.dumps(payload).encode()).encode(), hashlib.sha256)
    return {
        "body char changed": _swap(genuine, len(body) // 2),
        "mac char changed": genuine[: len(body) + 1] + _swap(mac, len(mac) // 2),
        "first char changed": _swap(genuine, 0),
        "random string": "c29tZSByYW5kb20gc3RyaW5n",
        "random dotted": "abc.def",
        "empty": "",
        "only a dot": ".",
        "extra part": f"{genuine}.{mac}",
        "non-ascii": "é.é",
        "payload without mac": body,
        "payload with empty mac": f"{body}.",
        "payload with zero mac": f"{body}.{b64(bytes(16))}",
        "payload with guessed mac": f"{body}.{b64(guessed.digest()[:16])}",
        "json without mac": b64(json.dumps(payload).encode()),
        "another payload with this mac": f"{other_body}.{mac}",
    }


@pytest.mark.parametrize(
    "kind",
    list(_forgeries("e30.AAAA", "e30.AAAA")),  # names only; real cursors are built in the test
)
def test_forged_cursor_on_a_root_field_is_refused_without_reads(gql: Gql, kind: str) -> None:
    conn = CONNECTIONS["teachers"]
    forged = _forgeries(cursor_of(conn, gql, 0), cursor_of(conn, gql, 1))[kind]
    result = conn.page(gql, 2, forged)
    assert result.data == {"teachers": None}  # the field, not the whole response
    assert_after_refused(result, [])


@pytest.mark.parametrize("kind", ["body char changed", "mac char changed", "random string"])
def test_forged_cursor_on_a_nested_field_is_refused_before_its_query(gql: Gql, kind: str) -> None:
    conn = CONNECTIONS["Class.students"]
    forged = _forgeries(cursor_of(conn, gql, 0), cursor_of(conn, gql, 1))[kind]
    result = conn.page(gql, 2, forged)
    assert result.data == {"class": {"students": None}}  # the class survives its field
    assert result.errors[0]["path"] == ["class", "students"]
    assert_after_refused(result, ["BatchGetItem"])


def test_class_students_cursor_of_class_a_is_refused_on_class_b(gql: Gql) -> None:
    conn = CONNECTIONS["Class.students"]
    cursor = cursor_of(conn, gql, 0, id="cls-001")
    result = gql(conn.query, {"id": "cls-002", "first": 5, "after": cursor})
    assert_after_refused(result, ["BatchGetItem"])


def test_student_classes_cursor_of_student_a_is_refused_on_student_b(gql: Gql) -> None:
    conn = CONNECTIONS["Student.classes"]
    cursor = cursor_of(conn, gql, 0, id="stu-0001")
    result = gql(conn.query, {"id": "stu-0002", "first": 5, "after": cursor})
    assert_after_refused(result, ["BatchGetItem"])


def test_sport_students_cursor_is_refused_on_class_students(gql: Gql) -> None:
    cursor = cursor_of(CONNECTIONS["Sport.students"], gql, 0)
    result = CONNECTIONS["Class.students"].page(gql, 5, cursor)
    assert_after_refused(result, ["BatchGetItem"])


@pytest.mark.parametrize(("source", "target"), [("teachers", "classes"), ("classes", "sports")])
def test_catalog_cursor_is_refused_on_another_catalog(gql: Gql, source: str, target: str) -> None:
    cursor = cursor_of(CONNECTIONS[source], gql, 0)
    result = CONNECTIONS[target].page(gql, 5, cursor)
    assert_after_refused(result, [])


def test_country_cursor_is_refused_with_a_state_argument(gql: Gql) -> None:
    country = CONNECTIONS["studentsByLocation"]
    cursor = cursor_of(country, gql, 0, country="United States")
    by_state = CONNECTIONS["studentsByLocation(state)"]
    assert_after_refused(by_state.page(gql, 5, cursor), [])
    other_country = country.page(gql, 5, cursor)  # variables say Brazil
    assert_after_refused(other_country, [])


def test_country_cursor_is_accepted_with_another_spelling_of_that_country(gql: Gql) -> None:
    conn = CONNECTIONS["studentsByLocation"]
    cursor = cursor_of(conn, gql, 0, country="Brazil")
    result = gql(conn.query, {"country": "  BRAZIL ", "first": 2, "after": cursor})
    assert result.errors == []
    assert len(conn.connection(result)["edges"]) == 2


def test_refused_cursor_never_is_an_internal_error(gql: Gql) -> None:
    conn = CONNECTIONS["studentsByLocation"]
    genuine = cursor_of(conn, gql, 0)
    codes = set()
    for forged in [*_forgeries(genuine, cursor_of(conn, gql, 1)).values(), "%%%", "..", "a.b.c"]:
        codes.update(conn.page(gql, 3, forged).codes)
    assert codes == {"BAD_USER_INPUT"}


def _same_bits_last_char(cursor: str) -> str:
    # The MAC is 16 bytes: its 22nd base64 character carries 2 bits and 4 unused ones.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return cursor[:-1] + alphabet[alphabet.index(cursor[-1]) ^ 1]


@pytest.mark.parametrize(
    "edit", [_same_bits_last_char, lambda c: c + "="], ids=["last char changed", "padding added"]
)
def test_cursor_edited_without_changing_its_bytes_is_refused(
    gql: Gql, edit: Callable[[str], str]
) -> None:
    conn = CONNECTIONS["teachers"]
    genuine = cursor_of(conn, gql, 0)
    forged = edit(genuine)
    assert forged != genuine
    assert_after_refused(conn.page(gql, 2, forged), [])


def test_a_forged_before_is_refused_on_before(gql: Gql) -> None:
    conn = CONNECTIONS["Student.classes"]
    forged = _swap(cursor_of(conn, gql, 0), 3)
    result = page_any(conn, gql, last=2, before=forged)
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["extensions"]["field"] == "before"
    assert "first page" in result.errors[0]["message"]
    assert result.data == {"student": {"classes": None}}  # the student survives


def test_a_cursor_of_another_secret_is_refused_on_its_field_only(
    services: Any, gql: Gql, endpoint: str
) -> None:
    """A cursor from before a restart with a new secret: BAD_USER_INPUT on the connection
    field, whose parent and siblings are still answered."""
    from support import execute, make_settings

    from graph_api.graph.engine.context import Services

    conn = CONNECTIONS["Class.students"]
    foreign = cursor_of(conn, gql, 0)
    other = Services.create(
        make_settings(endpoint, table=services.settings.table, cursor_secret=b"another secret")
    )
    try:
        result = execute(
            other,
            'query($after: String) { class(id: "cls-001") { subject'
            " students(first: 2, after: $after) { edges { cursor } } }"
            " sports(first: 1) { edges { node { id } } } }",
            {"after": foreign},
        )
    finally:
        other.close()
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["path"] == ["class", "students"]
    assert "Start again from the first page" in result.errors[0]["message"]
    assert result.data["class"]["subject"]
    assert result.data["class"]["students"] is None
    assert len(result.data["sports"]["edges"]) == 1


# -- against the running app ---------------------------------------------------------------


def test_a_cursor_of_another_field_or_edited_is_refused(h: Hostile) -> None:
    page = h.client.post("/graphql", json={"query": "{ teachers(first: 1) { edges { cursor } } }"})
    cursor = page.json()["data"]["teachers"]["edges"][0]["cursor"]
    assert h.sent == ["Query"]  # the spy sees what the app sends
    body, mac = cursor.split(".")
    edited = b64(base64.urlsafe_b64decode(body + "==").replace(b"tch-001", b"tch-002"))
    uses = [
        ("{ classes(first: 1, after: $c) { edges { cursor } } }", cursor),
        (
            '{ student(id: "stu-0001") { classes(first: 1, after: $c) { edges { cursor } } } }',
            cursor,
        ),
        ("{ teachers(first: 1, after: $c) { edges { cursor } } }", f"{edited}.{mac}"),
        ("{ teachers(first: 1, after: $c) { edges { cursor } } }", f"{body}=.{mac}"),
    ]
    for selection, after in uses:
        query = "query($c: String) " + selection
        response = h.client.post("/graphql", json={"query": query, "variables": {"c": after}})
        assert_coded(response, "BAD_USER_INPUT")
    assert_unchanged(h)
