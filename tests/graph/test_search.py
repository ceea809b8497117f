"""Search by name: `studentsByName`, `teachersByName`, `classesBySubject`.

Each page is one Query of one GSI2 partition (`begins_with` on the folded name, no filter),
exact (`first` items whenever that many exist), in either order and either direction, and
stays exact across renames and deletes made between pages. The expected pages are computed
here from what the test wrote, with a fold of its own (case, accents and blanks away).
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from support import assert_clean, calls, drop_index, dynamodb_requests, execute, ok, seed

from graph_api.graph.engine.context import Services
from graph_api.model import items, keys
from graph_api.model.items import TEACHING

# Words whose accents, case and blanks vary: "Ána  María", "ANA", "Straße" (= "strasse").
WORDS = [
    "Ana", "Ána", "ANA", "Anabel", "André", "andre", "Bea", "Béatrice", "Zoë", "Zoe",
    "O'Neil", "Straße", "Strasse", "Łukasz", "Mar", "María", "Mario", "Marie-Claire",
]  # fmt: skip


def fold(text: str) -> str:
    """What the search ignores: accents, case, and how many blanks separate the words."""
    bare = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    folded = unicodedata.normalize("NFKD", bare.casefold())
    return " ".join("".join(c for c in folded if not unicodedata.combining(c)).split())


def fold_prefix(prefix: str) -> str:
    """A prefix folded: leading blanks away, a trailing blank kept (it ends a word)."""
    return fold(prefix) + (" " if prefix[-1:].isspace() else "")


@dataclass(frozen=True)
class Search:
    field: str  # the root field
    kind: str  # the node's GraphQL type, for its mutations
    attribute: str  # what it is found by: name, subject


STUDENTS = Search("studentsByName", "Student", "name")
TEACHERS = Search("teachersByName", "Teacher", "name")
CLASSES = Search("classesBySubject", "Class", "subject")


def page_query(search: Search) -> str:
    return f"""query($p: String!, $first: Int, $after: String, $last: Int, $before: String,
      $o: NameOrder) {{
      {search.field}(prefix: $p, first: $first, after: $after, last: $last, before: $before,
        orderBy: $o) {{
        edges {{ node {{ id {search.attribute} }} }}
        pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }} }} }}"""


class School:
    """The test's table: what it wrote, by search, id -> name (a class: subject)."""

    def __init__(self, svc: Services, rng: random.Random) -> None:
        self.svc, self.rng = svc, rng
        self.names: dict[Search, dict[str, str]] = {STUDENTS: {}, TEACHERS: {}, CLASSES: {}}
        self.serial = self.writes = 0
        teachers = [items.teacher(f"t{i}", self.name()) for i in range(24)]
        students = [items.student(f"s{i}", self.name(), f"s{i}@ex.org") for i in range(30)]
        # Classes belong to the first four teachers; the others may be deleted.
        classes = [items.school_class(f"c{i}", self.name(), teachers[i % 4]) for i in range(24)]
        taught = [(TEACHING, teachers[i % 4], c) for i, c in enumerate(classes)]
        seed(svc, [*teachers, *students, *classes], taught)
        for search, made in ((TEACHERS, teachers), (STUDENTS, students), (CLASSES, classes)):
            self.names[search] = {i["id"]: i[search.attribute] for i in made}

    def name(self) -> str:
        words = [self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 2))]
        return self.rng.choice([" ", "  "]).join(words)

    def prefix(self, search: Search) -> str:
        """Mostly the start of a name that is there, recased; sometimes a blank after it."""
        if self.rng.random() < 0.1:
            return self.rng.choice(["q", "Zz", "ANAX"])  # nothing
        name = self.rng.choice(list(self.names[search].values()))
        start = name[: self.rng.randint(1, len(name))].lstrip() or name
        start = self.rng.choice([str.lower, str.upper, str.title, str])(start)
        return start + (" " if self.rng.random() < 0.15 else "")

    def expected(self, search: Search, prefix: str) -> list[tuple[str, str, str]]:
        """(folded name, id, name) of every match, in ascending order."""
        want = fold_prefix(prefix)
        found = [(fold(n), i, n) for i, n in self.names[search].items()]
        return sorted(f for f in found if f[0].startswith(want))

    def change(self, search: Search) -> None:
        """A random write to one of `search`'s nodes: rename, delete, or a new one."""
        names, rng = self.names[search], self.rng
        self.writes += 1
        choice = rng.random()
        if choice < 0.5 and names:
            id_ = rng.choice(sorted(names))
            names[id_] = new = self.name()
            mutation = f"update{search.kind}"
            ok(
                self.svc,
                f"mutation($id: ID!, $v: String!) {{ {mutation}(id: $id, input: "
                f"{{ {search.attribute}: $v }}) {{ userErrors {{ code }} }} }}",
                {"id": id_, "v": new},
            )
        elif choice < 0.8 and (deletable := self.deletable(search)):
            id_ = rng.choice(deletable)
            del names[id_]
            ok(
                self.svc,
                f"mutation($id: ID!) {{ delete{search.kind}(id: $id)"
                " { userErrors { code } } }",
                {"id": id_},
            )
        else:
            self.serial += 1
            id_ = f"n{self.serial}"
            names[id_] = new = self.name()
            fields = {
                STUDENTS: f'name: $v, email: "{id_}@ex.org"',
                TEACHERS: "name: $v",
                CLASSES: 'subject: $v, teacherId: "t0"',
            }[search]
            ok(
                self.svc,
                f"mutation($v: String!) {{ create{search.kind}(input: {{ id: "
                f'"{id_}", {fields} }}) {{ userErrors {{ code }} }} }}',
                {"v": new},
            )

    def deletable(self, search: Search) -> list[str]:
        ids = sorted(self.names[search])
        if search is TEACHERS:  # a teacher of a class cannot go
            return [i for i in ids if i not in ("t0", "t1", "t2", "t3")]
        return ids


@pytest.fixture
def queries(svc: Services) -> Iterator[list[dict[str, Any]]]:
    """The parameters of every Query the test's requests send."""
    sent: list[dict[str, Any]] = []

    def spy(params: dict[str, Any], **_: Any) -> None:
        sent.append(params)

    svc.dynamo.register("before-parameter-build.dynamodb.Query", spy)
    yield sent
    svc.dynamo.unregister("before-parameter-build.dynamodb.Query", spy)


def read_page(
    svc: Services, search: Search, variables: dict[str, Any], sent: list[dict[str, Any]]
) -> dict[str, Any]:
    """One page, which must cost one Query of GSI2, one partition, no filter."""
    sent.clear()
    result = execute(svc, page_query(search), variables)
    assert result.errors == [], result.errors
    assert calls(result) == ["Query"] and dynamodb_requests(result) == 1
    (params,) = sent
    assert params["IndexName"] == "GSI2" and "FilterExpression" not in params
    assert "begins_with(GSI2SK, :prefix)" in params["KeyConditionExpression"]
    return result.data[search.field]  # type: ignore[no-any-return]


Key = tuple[str, str]  # (folded name, id): a position in the list


def walk(
    school: School,
    search: Search,
    prefix: str,
    descending: bool,
    forward: bool,
    size: int,
    sent: list[dict[str, Any]],
) -> int:
    """Page through one search to its end, writing between pages; every page must be the
    one the current names give after (or before) the last position read. Returns pages."""
    order = {"field": "NAME", "direction": "DESC" if descending else "ASC"}
    cursor: str | None = None
    position: Key | None = None
    for pages in range(1, 60):
        matches = [(f, i, n) for f, i, n in school.expected(search, prefix)]
        listed = matches[::-1] if descending else matches

        def beyond(m: tuple[str, str, str], pos: Key | None = position) -> bool:
            if pos is None:
                return True
            key = (m[0], m[1])
            # Past the position in the direction read: later in the list forward, earlier
            # backward (the list descends when `descending`).
            return key > pos if forward != descending else key < pos

        rest = [m for m in listed if beyond(m)]
        want = rest[:size] if forward else rest[-size:]
        variables: dict[str, Any] = {"p": prefix, "o": order}
        variables.update(
            {"first": size, "after": cursor} if forward else {"last": size, "before": cursor}
        )
        page = read_page(school.svc, search, variables, sent)
        got = [(e["node"]["id"], e["node"][search.attribute]) for e in page["edges"]]
        assert got == [(i, n) for _, i, n in want], (prefix, order, forward, pages)
        more = len(rest) > size
        info = page["pageInfo"]
        assert (info["hasNextPage"], info["hasPreviousPage"]) == (
            (more, False) if forward else (False, more)
        )
        if not more:
            return pages
        edge = want[-1] if forward else want[0]
        position = (edge[0], edge[1])
        cursor = info["endCursor"] if forward else info["startCursor"]
        if school.rng.random() < 0.6:
            school.change(search)
    raise AssertionError("the search never ended")


@pytest.mark.parametrize("search", [STUDENTS, TEACHERS, CLASSES], ids=lambda s: s.field)
def test_every_page_is_exact_across_writes(
    svc: Services, queries: list[dict[str, Any]], search: Search
) -> None:
    rng = random.Random(f"search-{search.field}")
    school = School(svc, rng)
    pages = 0
    for _ in range(12):
        prefix = school.prefix(search)
        size = rng.randint(1, 3)
        for descending in (False, True):
            for forward in (True, False):
                pages += walk(school, search, prefix, descending, forward, size, queries)
    assert pages > 60 and school.writes > 10  # the walks paged, and wrote between pages
    assert_clean(svc)


def test_case_accents_and_blanks_are_ignored_and_order_is_by_name(svc: Services) -> None:
    names = ["Josefa", "José María", "Jose  Luis", "JOSÉ", "Ana"]
    seed(svc, [items.student(f"s{i}", n, f"s{i}@ex.org") for i, n in enumerate(names)], [])

    def found(prefix: str, direction: str = "ASC") -> list[str]:
        data = ok(
            svc,
            """query($p: String!, $d: OrderDirection!) {
              studentsByName(prefix: $p, orderBy: { field: NAME, direction: $d }) {
                edges { node { name } } } }""",
            {"p": prefix, "d": direction},
        )
        return [e["node"]["name"] for e in data["studentsByName"]["edges"]]

    assert found("jos") == ["JOSÉ", "Jose  Luis", "José María", "Josefa"]
    assert found("JOS", "DESC") == ["Josefa", "José María", "Jose  Luis", "JOSÉ"]
    assert found("  josé ") == ["Jose  Luis", "José María"]  # a trailing blank ends the word
    assert found("jose m") == ["José María"]
    assert found("x") == []


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        ("", "letter or digit"),
        ("   ", "letter or digit"),
        ("%", "letter or digit"),
        ("#", "letter or digit"),
        ("'", "letter or digit"),
        ("\u0301", "letter or digit"),  # a combining accent alone folds away
        ("\x00a", "control characters"),
        ("a" * 201, "at most 200"),
    ],
)
def test_a_prefix_needs_a_letter_and_a_bound(
    gql: Callable[..., Any], prefix: str, why: str
) -> None:
    result = gql(
        "query($p: String!) { teachersByName(prefix: $p) { edges { cursor } } }", {"p": prefix}
    )
    assert result.data == {"teachersByName": None}
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["extensions"]["field"] == "prefix"
    assert why in result.errors[0]["message"]
    assert dynamodb_requests(result) == 0


def test_a_letter_or_digit_among_punctuation_is_a_search(svc: Services) -> None:
    """Names and subjects that hold punctuation or start with a digit are found by what a
    user types: `o'` finds "O'Brien", `3` finds "3D Art", and a tab is a blank."""
    teacher = items.teacher("t1", "O'Brien Lee")
    art = items.school_class("c1", "3D Art", teacher)
    seed(svc, [teacher, art], [(TEACHING, teacher, art)])
    query = """query($t: String!, $c: String!) {
      teachersByName(prefix: $t) { edges { node { id } } }
      classesBySubject(prefix: $c) { edges { node { id } } } }"""
    for by_name, by_subject in [("o'", "3"), ("O'B", "3d"), ("o'brien\tl", "3D\nART")]:
        found = ok(svc, query, {"t": by_name, "c": by_subject})
        assert found == {
            "teachersByName": {"edges": [{"node": {"id": "t1"}}]},
            "classesBySubject": {"edges": [{"node": {"id": "c1"}}]},
        }, (by_name, by_subject)


def test_a_cursor_belongs_to_its_prefix(gql: Callable[..., Any]) -> None:
    query = """query($p: String!, $a: String) {
      studentsByName(prefix: $p, first: 1, after: $a) { pageInfo { endCursor } } }"""
    first = gql(query, {"p": "a"}).data["studentsByName"]["pageInfo"]["endCursor"]
    assert first is not None  # the demo school has students whose name starts with A
    again = gql(query, {"p": "b", "a": first})
    assert again.codes == ["BAD_USER_INPUT"] and dynamodb_requests(again) == 0


@pytest.mark.parametrize(
    ("field", "arguments", "order", "queries"),
    [
        ("teachers", "", "ID", 1),
        ("classes", "", "ID", 1),
        ("sports", "", "ID", 1),
        # A country's page reads its location shards (merged), a state's one shard.
        ("studentsByLocation", 'country: "Canada", ', "PLACE", keys.LOCATION_SHARDS),
        ("studentsByLocation", 'country: "United States", state: "New York", ', "PLACE", 1),
    ],
)
def test_lists_a_key_orders_page_either_way(
    gql: Callable[..., Any], field: str, arguments: str, order: str, queries: int
) -> None:
    """Where a key holds the order (a catalog's ids, the location key), `orderBy` reads the
    same range from its other end: the same Queries a page, descending the reverse of
    ascending, forward and backward alike."""
    query = f"""query($first: Int, $after: String, $last: Int, $before: String,
      $d: OrderDirection!) {{
      {field}({arguments}first: $first, after: $after, last: $last, before: $before,
        orderBy: {{ field: {order}, direction: $d }}) {{
        edges {{ node {{ id }} }}
        pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }} }} }}"""

    def pages(direction: str, forward: bool) -> list[str]:
        ids: list[str] = []
        cursor = None
        while True:
            window = {"first": 2, "after": cursor} if forward else {"last": 2, "before": cursor}
            result = gql(query, {"d": direction, **window})
            assert result.errors == [] and calls(result) == ["Query"] * queries
            page = result.data[field]
            got = [e["node"]["id"] for e in page["edges"]]
            ids = ids + got if forward else got + ids
            info = page["pageInfo"]
            if not (info["hasNextPage"] if forward else info["hasPreviousPage"]):
                return ids
            cursor = info["endCursor"] if forward else info["startCursor"]

    ascending = pages("ASC", True)
    assert len(ascending) > 2  # more than a page
    assert pages("DESC", True) == ascending[::-1]
    assert pages("DESC", False) == ascending[::-1]
    assert pages("ASC", False) == ascending


def test_a_name_that_folds_long_is_kept_and_found_by_its_start(svc: Services) -> None:
    """ "ﷺ" decomposes to 18 characters: 200 of them fold past the sort key's 1,024 bytes.
    The key keeps the start, which finds the student; a prefix past it is refused."""
    name = "\ufdfa" * 200
    ok(
        svc,
        """mutation($n: String!) { createStudent(input: { id: "long", name: $n,
          email: "long@ex.org" }) { userErrors { code } } }""",
        {"n": name},
    )
    query = "query($p: String!) { studentsByName(prefix: $p) { edges { node { id } } } }"
    found = ok(svc, query, {"p": "\ufdfa" * 5})
    assert found["studentsByName"]["edges"] == [{"node": {"id": "long"}}]
    refused = execute(svc, query, {"p": name})
    assert refused.codes == ["BAD_USER_INPUT"] and dynamodb_requests(refused) == 0
    assert_clean(svc)


def test_a_table_without_the_search_index_says_to_migrate(svc: Services) -> None:
    """A table made before GSI2 (migrate not run): each search answers UNAVAILABLE at its
    field, naming the fix, after one request (the same one would fail again); the rest of
    the operation answers."""
    teacher = items.teacher("t1", "Ana Lee")
    seed(svc, [teacher], [])
    drop_index(svc.dynamo, svc.settings.table, "GSI2")
    result = execute(
        svc,
        """{ teachersByName(prefix: "an") { edges { node { id } } }
             teacher(id: "t1") { name } }""",
    )
    assert result.data == {"teachersByName": None, "teacher": {"name": "Ana Lee"}}
    (error,) = result.errors
    assert error["path"] == ["teachersByName"]
    assert error["extensions"]["code"] == "UNAVAILABLE"
    assert "no index GSI2" in error["message"] and "graph-api migrate" in error["message"]
    assert sorted(calls(result)) == ["BatchGetItem", "Query"]
