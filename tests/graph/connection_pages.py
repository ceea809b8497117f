"""The connections the graph tests page through, as a client pages them: each connection
field's query, where its page sits and the ids it must list (on the demo school), and one
page in either direction."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from support import Gql, Result

from graph_api.model import keys
from graph_api.store.codec import Item

# -- the connections, page by page --------------------------------------------------------


PAGE = "edges { cursor node { id } } pageInfo { hasNextPage endCursor }"


@dataclass(frozen=True)
class Conn:
    """A connection field: how to ask for one page, where it sits, what it must hold."""

    query: str
    path: tuple[str, ...]
    variables: dict[str, Any]
    expected: Callable[[list[Item]], list[str]]

    def page(self, gql: Gql, first: int | None, after: str | None = None) -> Result:
        return gql(self.query, {**self.variables, "first": first, "after": after})

    def connection(self, result: Result) -> dict[str, Any]:
        data = result.data
        for name in self.path:
            data = data[name]
        return data  # type: ignore[no-any-return]

    def walk(self, gql: Gql, first: int) -> list[dict[str, Any]]:
        """Every page, `first` a page, following endCursor to the end."""
        pages: list[dict[str, Any]] = []
        after: str | None = None
        while len(pages) < 200:
            result = self.page(gql, first, after)
            assert result.errors == []
            page = self.connection(result)
            pages.append(page)
            if not page["pageInfo"]["hasNextPage"]:
                return pages
            after = page["pageInfo"]["endCursor"]
        raise AssertionError("the connection never ended")


def _ids(type_: str, key: str = "id", **where: str) -> Callable[[list[Item]], list[str]]:
    def expected(demo_items: list[Item]) -> list[str]:
        return sorted(
            i[key]
            for i in demo_items
            if i["type"] == type_ and all(i.get(k) == v for k, v in where.items())
        )

    return expected


def _root(field: str, **args: str) -> str:
    params = "".join(f", ${name}: {type_}" for name, type_ in args.items())
    passed = "".join(f", {name}: ${name}" for name in args)
    return (
        f"query($first: Int, $after: String{params}) {{"
        f" {field}(first: $first, after: $after{passed}) {{ {PAGE} }} }}"
    )


def _nested(parent: str, field: str) -> str:
    return (
        f"query($id: ID!, $first: Int, $after: String) {{ {parent}(id: $id) {{"
        f" {field}(first: $first, after: $after) {{ {PAGE} }} }} }}"
    )


def _homes(**where: str) -> Callable[[list[Item]], list[str]]:
    """The students whose home (the student item's `home` map) matches `where`."""

    def expected(demo_items: list[Item]) -> list[str]:
        return sorted(
            i["id"]
            for i in demo_items
            if i["type"] == "student"
            and i.get("home")
            and all(i["home"].get(k) == v for k, v in where.items())
        )

    return expected


CONNECTIONS = {
    "teachers": Conn(_root("teachers"), ("teachers",), {}, _ids("teacher")),
    "classes": Conn(_root("classes"), ("classes",), {}, _ids("class")),
    "sports": Conn(_root("sports"), ("sports",), {}, _ids("sport")),
    "Class.students": Conn(
        _nested("class", "students"),
        ("class", "students"),
        {"id": "cls-001"},
        _ids("enrolment", "studentId", classId="cls-001"),
    ),
    "Sport.students": Conn(
        _nested("sport", "students"),
        ("sport", "students"),
        {"id": "spt-07"},
        _ids("membership", "studentId", sportId="spt-07"),
    ),
    "Student.classes": Conn(
        _nested("student", "classes"),
        ("student", "classes"),
        {"id": "stu-0001"},
        _ids("enrolment", "classId", studentId="stu-0001"),
    ),
    "Teacher.classes": Conn(
        _nested("teacher", "classes"),
        ("teacher", "classes"),
        {"id": "tch-001"},
        _ids("class", teacherId="tch-001"),  # a class's teacher is its `teacherId`
    ),
    "studentsByLocation": Conn(
        _root("studentsByLocation", country="String!"),
        ("studentsByLocation",),
        {"country": "Brazil"},
        _homes(country="Brazil"),
    ),
    "studentsByLocation(state)": Conn(
        _root("studentsByLocation", country="String!", state="String"),
        ("studentsByLocation",),
        {"country": "United States", "state": "New York"},
        _homes(country="United States", state="New York"),
    ),
}


ALL = sorted(CONNECTIONS)


def expected_ids(name: str, demo_items: list[Item]) -> list[str]:
    """The connection's node ids in the order the API must list them."""
    ids = CONNECTIONS[name].expected(demo_items)
    if name.startswith("studentsByLocation"):  # ordered by state, city, then student
        homes = {i["id"]: i["home"] for i in demo_items if i["type"] == "student" and i.get("home")}
        place = keys.normalize_place
        ids.sort(key=lambda s: (place(homes[s]["state"]), place(homes[s]["city"]), s))
    return ids


def node_ids(pages: list[dict[str, Any]]) -> list[str]:
    return [edge["node"]["id"] for page in pages for edge in page["edges"]]


def cursor_of(conn: Conn, gql: Gql, index: int = 0, **variables: Any) -> str:
    result = gql(conn.query, {**conn.variables, **variables, "first": index + 1, "after": None})
    return conn.connection(result)["edges"][index]["cursor"]  # type: ignore[no-any-return]


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


def b64(data: bytes) -> str:
    """Base64url without padding, as cursors write their parts."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
