from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from connection_pages import ALL, CONNECTIONS, PAGE, Conn, expected_ids, node_ids, page_any
from support import Gql

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


# -- backward: last and before (Relay's PageInfo) -------------------------------------------


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


@pytest.mark.parametrize("name", ["teachers", "Class.students", "studentsByLocation(state)"])
def test_a_backward_page_of_a_range_is_one_reverse_query(
    gql: Gql, demo_items: list[Item], name: str
) -> None:
    conn, want = CONNECTIONS[name], expected_ids(name, demo_items)
    result = page_any(conn, gql, last=4)
    assert [e["node"]["id"] for e in conn.connection(result)["edges"]] == want[-4:]
    queries = [c for c in result.context.ledger.calls if c.operation == "Query"]
    assert len(queries) == 1  # the prefetch of class(id) is for forward first pages only
