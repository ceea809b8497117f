from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from support import (
    ALL,
    CONNECTIONS,
    PAGE,
    Conn,
    Gql,
    Result,
    cursor_of,
    expected_ids,
    node_ids,
)

from graph_api.store.codec import Item

# -- first -----------------------------------------------------------------------------


@pytest.mark.parametrize("first", [0, -1, 101, 1000000])
@pytest.mark.parametrize(
    "name", ["teachers", "Class.students", "Student.classes", "studentsByLocation"]
)
def test_first_outside_1_to_100_is_bad_user_input(gql: Gql, name: str, first: int) -> None:
    result = CONNECTIONS[name].page(gql, first)
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["extensions"]["field"] == "first"
    assert not any(call.operation == "Query" for call in result.context.ledger.calls)


@pytest.mark.parametrize("first", [1, 100])
def test_first_at_the_bounds_is_accepted(gql: Gql, demo_items: list[Item], first: int) -> None:
    conn = CONNECTIONS["Class.students"]
    result = conn.page(gql, first)
    assert result.errors == []
    total = len(expected_ids("Class.students", demo_items))
    assert len(conn.connection(result)["edges"]) == min(first, total)


def test_null_first_means_the_default_of_20(gql: Gql, demo_items: list[Item]) -> None:
    conn = CONNECTIONS["Class.students"]
    assert len(expected_ids("Class.students", demo_items)) > 20
    page = conn.connection(conn.page(gql, None))
    assert len(page["edges"]) == 20
    assert page["pageInfo"]["hasNextPage"] is True
    omitted = gql('{ class(id: "cls-001") { students { edges { cursor } } } }')
    assert len(omitted.data["class"]["students"]["edges"]) == 20


# -- hasNextPage and endCursor ------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_first_equal_to_the_total_gives_one_page_without_next(
    gql: Gql, demo_items: list[Item], name: str
) -> None:
    conn, want = CONNECTIONS[name], expected_ids(name, demo_items)
    assert 1 < len(want) <= 100
    page = conn.connection(conn.page(gql, len(want)))
    assert [e["node"]["id"] for e in page["edges"]] == want
    assert page["pageInfo"]["hasNextPage"] is False
    short = conn.connection(conn.page(gql, len(want) - 1))
    assert short["pageInfo"]["hasNextPage"] is True
    rest = conn.connection(conn.page(gql, len(want), short["pageInfo"]["endCursor"]))
    assert [e["node"]["id"] for e in rest["edges"]] == want[-1:]
    assert rest["pageInfo"]["hasNextPage"] is False


@pytest.mark.parametrize("name", ALL)
def test_pages_chain_without_gaps_duplicates_or_empty_pages(
    gql: Gql, demo_items: list[Item], name: str
) -> None:
    conn, want = CONNECTIONS[name], expected_ids(name, demo_items)
    for first in sorted({1, 3, len(want)}):
        pages = conn.walk(gql, first)
        assert node_ids(pages) == want
        assert len(pages) == -(-len(want) // first)
        for page in pages:
            assert page["edges"], "a page of a non-empty connection is empty"
            assert len(page["edges"]) <= first
            assert page["pageInfo"]["endCursor"] == page["edges"][-1]["cursor"]


@pytest.mark.parametrize("name", ["sports", "Class.students", "Student.classes"])
def test_after_the_last_cursor_is_an_empty_page_with_null_end_cursor(
    gql: Gql, demo_items: list[Item], name: str
) -> None:
    conn, want = CONNECTIONS[name], expected_ids(name, demo_items)
    last = conn.connection(conn.page(gql, len(want)))["pageInfo"]["endCursor"]
    result = conn.page(gql, 5, last)
    assert result.errors == []
    assert conn.connection(result) == {
        "edges": [],
        "pageInfo": {"hasNextPage": False, "endCursor": None},
    }


def test_empty_connection_has_null_end_cursor(gql: Gql, demo_items: list[Item]) -> None:
    sporty = {i["studentId"] for i in demo_items if i["type"] == "membership"}
    idle = sorted(i["id"] for i in demo_items if i["type"] == "student" and i["id"] not in sporty)
    assert idle
    result = gql(
        f"query($id: ID!) {{ student(id: $id) {{ sports(first: 5) {{ {PAGE} }} }} }}",
        {"id": idle[0]},
    )
    assert result.errors == []
    assert result.data["student"]["sports"] == {
        "edges": [],
        "pageInfo": {"hasNextPage": False, "endCursor": None},
    }


def test_cursors_of_one_page_resume_after_their_own_edge(gql: Gql, demo_items: list[Item]) -> None:
    conn, want = CONNECTIONS["Class.students"], expected_ids("Class.students", demo_items)
    edges = conn.connection(conn.page(gql, 10))["edges"]
    for index in (0, 4, 9):
        resumed = conn.connection(conn.page(gql, 3, edges[index]["cursor"]))
        assert [e["node"]["id"] for e in resumed["edges"]] == want[index + 1 : index + 4]


# -- tampering ----------------------------------------------------------------------------


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


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _forgeries(genuine: str, sibling: str) -> dict[str, str]:
    body, mac = genuine.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    other_body = sibling.split(".")[0]
    guessed = hmac.new(b"secret", _b64(json.dumps(payload).encode()).encode(), hashlib.sha256)
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
        "payload with zero mac": f"{body}.{_b64(bytes(16))}",
        "payload with guessed mac": f"{body}.{_b64(guessed.digest()[:16])}",
        "json without mac": _b64(json.dumps(payload).encode()),
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


# -- backward: last and before (Relay's PageInfo) -------------------------------------------

FULL_PAGE = (
    "edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor }"
)


def page_any(
    conn: Conn,
    gql: Gql,
    *,
    first: int | None = None,
    after: str | None = None,
    last: int | None = None,
    before: str | None = None,
) -> Result:
    """One page in either direction, with the whole PageInfo."""
    query = (
        conn.query.replace("$after: String", "$after: String, $last: Int, $before: String")
        .replace("after: $after", "after: $after, last: $last, before: $before")
        .replace(PAGE, FULL_PAGE)
    )
    variables = {"first": first, "after": after, "last": last, "before": before}
    return gql(query, {**conn.variables, **variables})


def walk_backward(conn: Conn, gql: Gql, last: int) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    before: str | None = None
    while len(pages) < 200:
        result = page_any(conn, gql, last=last, before=before)
        assert result.errors == []
        page = conn.connection(result)
        pages.append(page)
        info = page["pageInfo"]
        assert info["hasNextPage"] is False  # paging backward: the other flag is false
        if not info["hasPreviousPage"]:
            return pages[::-1]
        before = info["startCursor"]
    raise AssertionError("the connection never ended")


@pytest.mark.parametrize("name", ALL)
def test_pages_backward_and_forward_agree_over_random_page_sizes(
    gql: Gql, demo_items: list[Item], name: str
) -> None:
    """Property: whatever the page sizes, walking backward with `last` gives the list
    forward walking gives, no page is empty, and every forward page read again backward
    (`last: its size, before: the next page's startCursor`) is the same page."""
    conn, want = CONNECTIONS[name], expected_ids(name, demo_items)
    rng = random.Random(f"{name}-14")  # fixed per connection: a failure reproduces
    for size in [1, len(want), *rng.sample(range(2, len(want) + 2), 3)]:
        backward = walk_backward(conn, gql, size)
        assert node_ids(backward) == want, size
        assert len(backward) == -(-len(want) // size)
        for page in backward:
            assert page["edges"], "a page of a non-empty connection is empty"
            assert page["pageInfo"]["startCursor"] == page["edges"][0]["cursor"]
            assert page["pageInfo"]["endCursor"] == page["edges"][-1]["cursor"]
        forward = conn.walk(gql, size)
        for earlier, later in itertools.pairwise(forward):
            before = later["edges"][0]["cursor"]
            again = conn.connection(page_any(conn, gql, last=len(earlier["edges"]), before=before))
            assert again["edges"] == earlier["edges"]
            assert again["pageInfo"]["hasPreviousPage"] is (earlier is not forward[0])


@pytest.mark.parametrize("name", ["Class.students", "Student.classes", "sports"])
def test_before_the_end_cursor_of_a_page_reads_that_page_backward(
    gql: Gql, demo_items: list[Item], name: str
) -> None:
    conn, want = CONNECTIONS[name], expected_ids(name, demo_items)
    forward = conn.connection(page_any(conn, gql, first=3))
    assert forward["pageInfo"]["hasPreviousPage"] is False  # forward: false, as documented
    end = forward["pageInfo"]["endCursor"]
    back = conn.connection(page_any(conn, gql, last=5, before=end))
    assert [e["node"]["id"] for e in back["edges"]] == want[:2]
    assert back["pageInfo"] == {
        "hasNextPage": False,
        "hasPreviousPage": False,
        "startCursor": back["edges"][0]["cursor"],
        "endCursor": back["edges"][-1]["cursor"],
    }
    # Before the first edge: an empty page that claims nothing before it.
    empty = conn.connection(page_any(conn, gql, last=5, before=back["pageInfo"]["startCursor"]))
    assert empty["edges"] == []
    assert empty["pageInfo"] == {
        "hasNextPage": False,
        "hasPreviousPage": False,
        "startCursor": None,
        "endCursor": None,
    }


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"first": 2, "last": 2}, "last"),
        ({"after": "x", "before": "y"}, "before"),
        ({"first": 2, "before": "y"}, "first"),
        ({"last": 2, "after": "x"}, "after"),
        ({"last": 0}, "last"),
        ({"last": 101}, "last"),
    ],
)
@pytest.mark.parametrize("name", ["teachers", "Class.students", "Student.classes"])
def test_mixed_directions_and_bad_last_are_bad_user_input_before_any_query(
    gql: Gql, name: str, arguments: dict[str, Any], field: str
) -> None:
    result = page_any(CONNECTIONS[name], gql, **arguments)
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["extensions"]["field"] == field
    assert not any(call.operation == "Query" for call in result.context.ledger.calls)


@pytest.mark.parametrize("name", ["teachers", "Class.students", "studentsByLocation"])
def test_a_backward_page_of_a_range_is_one_reverse_query(
    gql: Gql, demo_items: list[Item], name: str
) -> None:
    conn, want = CONNECTIONS[name], expected_ids(name, demo_items)
    result = page_any(conn, gql, last=4)
    assert [e["node"]["id"] for e in conn.connection(result)["edges"]] == want[-4:]
    queries = [c for c in result.context.ledger.calls if c.operation == "Query"]
    assert len(queries) == 1  # the prefetch of class(id) is for forward first pages only


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

    from graph_api.graph.context import Services

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
