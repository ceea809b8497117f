"""The executor's short paths (`graph/engine/execution.py`) answer exactly as graphql-core's and
Strawberry's own path does: the same data, the same errors at the same paths, the same nulls
where a non-null field failed.

Each document runs twice on the seeded table, through the API's schema and through a schema
of the same types and extensions on the library's executor alone.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator
from typing import Any

import pytest
import strawberry
from reference_executor import ours_and_reference
from support import seed
from test_request_counts import Shapes, render, targets

from bench import queries as peer_queries
from graph_api.graph.engine import execution
from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import GraphSchema
from graph_api.model import items
from graph_api.store.codec import Item


def both(services: Services, query: str, variables: dict[str, Any] | None = None) -> Any:
    """(data, errors) from the API's schema and from graphql-core's path alone."""
    fast, reference = ours_and_reference(services)

    async def run(schema: GraphSchema) -> tuple[Any, list[dict[str, Any]]]:
        context = Context.create(services, "same-request-id")
        result = await schema.execute(query, variable_values=variables, context_value=context)
        return result.data, [error.formatted for error in result.errors or []]

    async def run_both() -> tuple[Any, Any]:
        return await run(fast), await run(reference)

    return asyncio.run(run_both())


def test_the_five_bench_queries_answer_alike(services: Services, demo_items: list[Item]) -> None:
    five = targets(demo_items)
    documents = [
        (peer_queries.Q1, {"ids": five["students"]}),
        (peer_queries.Q2, {"id": five["class"]}),
        (peer_queries.Q3, {"id": five["teacher"]}),
        (peer_queries.Q4, {"id": five["sport"]}),
        (peer_queries.Q5, {"country": five["country"], "state": five["state"]}),
    ]
    for query, variables in documents:
        fast, reference = both(services, query, variables)
        assert fast == reference
        assert fast[1] == [] and fast[0]  # a real answer, not two equal failures


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_random_shapes_answer_alike(services: Services, demo_items: list[Item], seed: int) -> None:
    shapes = Shapes(random.Random(seed), demo_items)
    for _ in range(4):
        query, variables = render(shapes.query())
        fast, reference = both(services, query, variables)
        assert fast == reference, query


def test_fragments_aliases_and_interfaces_answer_alike(
    services: Services, demo_items: list[Item]
) -> None:
    five = targets(demo_items)
    student = five["students"][0]
    query = """
        fragment Named on Student { name n2: name }
        query($id: ID!, $node: ID!) {
          student(id: $id) {
            __typename nodeId ...Named
            home { city country }
            classes {
              edges { cursor node { id ... on Class { subject } } }
              pageInfo { hasNextPage }
            }
          }
          node(id: $node) { __typename nodeId ... on Student { id name version } }
        }
    """
    fast, reference = both(services, query, {"id": student, "node": f"Student:{student}"})
    assert fast == reference
    assert fast[0]["student"]["n2"] == fast[0]["student"]["name"]


def test_missing_nodes_and_refused_arguments_fail_alike(
    services: Services, demo_items: list[Item]
) -> None:
    """Null list items, and a resolver's error in every item of a list of plain objects:
    each item's field null, one error at each item's path."""
    five = targets(demo_items)
    query = """
        query($ids: [ID!]!, $class: ID!) {
          students(ids: $ids) { id name classes(first: -1) { edges { node { subject } } } }
          class(id: $class) {
            students(first: 3) {
              edges { node { name sports(last: 0) { edges { node { name } } } } }
            }
          }
          missing: student(id: "stu-nobody") { name }
        }
    """
    variables = {
        "ids": [five["students"][0], "stu-nobody", five["students"][1]],
        "class": five["class"],
    }
    fast, reference = both(services, query, variables)
    assert fast == reference
    data, errors = fast
    assert data["students"][1] is None and data["missing"] is None
    assert data["students"][0]["classes"] is None
    paths = [error["path"] for error in errors]
    assert ["students", 0, "classes"] in paths and ["students", 2, "classes"] in paths
    assert len(paths) == 2 + 3  # two students' classes, three roster students' sports
    assert {error["extensions"]["code"] for error in errors} == {"BAD_USER_INPUT"}


@pytest.mark.usefixtures("broken_get_many")
def test_a_failing_read_under_plain_fields_fails_alike(
    services: Services, demo_items: list[Item]
) -> None:
    """Roster students whose selection needs their items: the load fails, masked, and the
    error and its nulls reach the client as graphql-core would put them."""
    five = targets(demo_items)
    query = """
        query($class: ID!) {
          class(id: $class) {
            subject
            teacher { name version }
            students(first: 3) { edges { node { id name version home { city } } } }
          }
        }
    """
    fast, reference = both(services, query, {"class": five["class"]})
    assert fast == reference
    data, errors = fast
    assert errors and all(e["extensions"]["code"] == "INTERNAL_SERVER_ERROR" for e in errors)
    assert "secret detail" not in str(errors)
    assert ["class", "teacher", "version"] in [error["path"] for error in errors]
    # `version: Int!` and `teacher: Teacher!` failed: null up to the nullable `class`.
    assert data == {"class": None}


def test_a_corrupt_attribute_fails_alike(svc: Services) -> None:
    """A value its scalar cannot represent (a version that is not a number) fails in the
    short path as in graphql-core's: an error at the field, null up to a nullable parent."""
    good = items.student("stu-good", "Good", "good@example.com")
    corrupt = items.student("stu-corrupt", "Corrupt", "corrupt@example.com")
    corrupt["version"] = "seven"
    seed(svc, [good, corrupt], [])
    query = '{ students(ids: ["stu-good", "stu-corrupt"]) { id name version } }'
    fast, reference = both(svc, query)
    assert fast == reference
    data, errors = fast
    assert data["students"] == [{"id": "stu-good", "name": "Good", "version": 1}, None]
    assert [error["path"] for error in errors] == [["students", 1, "version"]]


def test_one_field_under_aliases_with_its_own_arguments_answers_alike(
    services: Services, demo_items: list[Item]
) -> None:
    """A plan's step coerces its arguments once a request: two aliases of one field with
    different arguments, repeated over a list, each keep their own, and a variable's."""
    five = targets(demo_items)
    query = """
        query($ids: [ID!]!, $n: Int, $bad: Int) {
          students(ids: $ids) {
            one: classes(first: 1) { edges { node { subject } } pageInfo { hasNextPage } }
            two: classes(first: $n) { edges { cursor node { id } } }
            wrong: sports(first: $bad) { edges { node { name } } }
            sports { edges { node { name } } }
          }
        }
    """
    variables = {"ids": five["students"][:5], "n": 2, "bad": 0}
    fast, reference = both(services, query, variables)
    assert fast == reference
    data, errors = fast
    assert [len(s["one"]["edges"]) for s in data["students"]] == [1] * 5
    assert {len(s["two"]["edges"]) for s in data["students"]} == {2}
    assert all(s["wrong"] is None for s in data["students"])
    assert [e["path"] for e in errors] == [["students", i, "wrong"] for i in range(5)]


def test_a_document_asked_again_with_other_variables_answers_alike(
    services: Services, demo_items: list[Item]
) -> None:
    """A document's plans serve request after request: each request's variables (the
    arguments a step coerces, the nodes asked for) are its own."""
    five = targets(demo_items)
    query = """
        query($ids: [ID!]!, $n: Int, $class: ID!) {
          students(ids: $ids) { id classes(first: $n) { edges { node { subject } } } }
          class(id: $class) { subject students(first: $n) { edges { node { name } } } }
        }
    """
    asked = [
        {"ids": five["students"][:2], "n": 1, "class": five["class"]},
        {"ids": five["students"][3:6], "n": 3, "class": five["class"]},
        {"ids": five["students"][:1], "n": 0, "class": "cls-nobody"},
        {"ids": five["students"][:2], "n": None, "class": five["class"]},
    ]
    answers = [both(services, query, variables) for variables in asked]
    for fast, reference in answers:
        assert fast == reference
    counts = [[len(s["classes"]["edges"]) for s in fast[0]["students"]] for fast, _ in answers[:2]]
    assert counts == [[1, 1], [3, 3, 3]]
    assert answers[2][0][0]["students"] == [{"id": five["students"][0], "classes": None}]
    assert len(answers[3][0][0]["class"]["students"]["edges"]) == 20  # the default page


@pytest.mark.parametrize("shown", [True, False])
def test_skip_and_include_by_variables_answer_alike(
    services: Services, demo_items: list[Item], shown: bool
) -> None:
    """A plan is worked out from graphql-core's grouped field sets, which `@skip` and
    `@include` shape by the request's variables: the same document, both ways."""
    five = targets(demo_items)
    query = """
        query($ids: [ID!]!, $shown: Boolean!) {
          students(ids: $ids) {
            id
            name @include(if: $shown)
            home @skip(if: $shown) { city }
            classes {
              edges { node { subject @skip(if: $shown) teacher @include(if: $shown) { name } } }
            }
          }
        }
    """
    fast, reference = both(services, query, {"ids": five["students"][:3], "shown": shown})
    assert fast == reference
    first = fast[0]["students"][0]
    assert ("name" in first) is shown and ("home" in first) is not shown


@pytest.mark.parametrize("coerce", list(execution.UNCHANGED))
def test_a_plan_takes_as_given_only_what_the_scalar_returns_unchanged(coerce: Any) -> None:
    """A plain leaf of a built-in scalar whose value is of the types `UNCHANGED` names is
    not coerced: graphql-core's coercion returns such a value as it is."""
    samples: dict[type, list[Any]] = {str: ["", "stu-0001", "Zoë 🎓", "1.5"], bool: [True, False]}
    for kind in execution.UNCHANGED[coerce]:
        for value in samples[kind]:
            assert coerce(value) is value


# -- what our types do not do today, kept graphql-core's way for when they do ---------------


@strawberry.type
class Leaf:
    x: int


@strawberry.type
class Picky:
    """An `is_type_of` of its own that reads the info: the short path must not call it."""

    x: int

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, Picky) and info.field_name is not None


@strawberry.type
class Holder:
    name: str
    child: Leaf
    kids: list[Leaf]
    picky: list[Picky | None]


@strawberry.type
class ToyQuery:
    @strawberry.field
    def holder(self) -> Holder | None:
        holder = Holder(name="n", child=Leaf(x=1), kids=[], picky=[Picky(x=1), Picky(x=2)])
        # Values that are exceptions: graphql-core raises them where they are read.
        holder.name = ValueError("bad name")  # type: ignore[assignment]
        holder.child = ValueError("bad child")  # type: ignore[assignment]
        holder.kids = [Leaf(x=3), ValueError("bad kid")]  # type: ignore[list-item]
        return holder

    @strawberry.field
    def picky(self) -> Holder:
        return Holder(name="n", child=Leaf(x=1), kids=[], picky=[Picky(x=1), Picky(x=2)])

    @strawberry.field
    def maybe(self, v: strawberry.Maybe[str | None] = None) -> str:
        return repr(v)  # Strawberry hands a Maybe over wrapped: Some('hi')


def test_values_and_types_our_schema_lacks_still_answer_as_graphql_core() -> None:
    query = """{
      a: holder { name } b: holder { child { x } } c: holder { kids { x } }
      picky { picky { x } }
      maybe(v: "hi")
    }"""
    answers = []
    for context in (None, execution.ExecutionContext):
        schema = strawberry.Schema(query=ToyQuery, execution_context_class=context)
        result = schema.execute_sync(query)
        answers.append((result.data, [(e.message, e.path) for e in result.errors or []]))
    assert answers[0] == answers[1]
    data, errors = answers[1]
    assert data == {
        "a": None,
        "b": None,
        "c": None,
        "picky": {"picky": [{"x": 1}, {"x": 2}]},
        "maybe": "Some('hi')",
    }
    assert [path for _, path in errors] == [["a", "name"], ["b", "child"], ["c", "kids", 1]]


@strawberry.type
class AsyncHolder:
    @strawberry.field
    async def required(self, x: int) -> Leaf:
        return Leaf(x=x) if x else None  # type: ignore[return-value]  # null: an error


@strawberry.type
class AsyncQuery:
    """Async resolvers whose values the short path completes once awaited, and a list
    argument each call gets a copy of."""

    @strawberry.field
    async def leaf(self, x: int) -> Leaf | None:
        if x < 0:
            raise ValueError("negative")
        return Leaf(x=x) if x else None

    @strawberry.field
    async def holder(self) -> AsyncHolder | None:
        return AsyncHolder()

    @strawberry.field
    async def leaves(self, xs: list[int]) -> list[Leaf | None] | None:
        return [Leaf(x=x) if x else None for x in xs]

    @strawberry.field
    async def strict(self, xs: list[int]) -> list[Leaf] | None:
        return [Leaf(x=x) if x else None for x in xs]  # type: ignore[misc]  # a null: an error

    @strawberry.field
    async def wrong(self) -> Leaf | None:
        return "not a leaf"  # type: ignore[return-value]

    @strawberry.field
    def popped(self, xs: list[int]) -> int:
        return xs.pop()  # changes its list: the next call must still get the whole one


ASYNC_DOCUMENT = """query($xs: [Int!]!) {
  a: leaf(x: 1) { x } b: leaf(x: 0) { x } c: leaf(x: -1) { x }
  d: holder { required(x: 0) { x } } d2: holder { required(x: 2) { x } }
  e: leaves(xs: $xs) { x } f: strict(xs: $xs) { x } g: strict(xs: [1, 2]) { x }
  h: wrong { x }
  i: popped(xs: $xs) j: popped(xs: $xs) k: popped(xs: [7, 8]) l: popped(xs: [7, 8])
}"""


def test_async_resolvers_and_list_arguments_answer_as_graphql_core() -> None:
    answers = []
    for context in (None, execution.ExecutionContext):
        schema = strawberry.Schema(query=AsyncQuery, execution_context_class=context)
        result = asyncio.run(schema.execute(ASYNC_DOCUMENT, variable_values={"xs": [1, 0, 3]}))
        answers.append((result.data, sorted((e.message, tuple(e.path)) for e in result.errors)))
    assert answers[0] == answers[1]
    data, errors = answers[1]
    assert data == {
        "a": {"x": 1},
        "b": None,
        "c": None,
        "d": None,
        "d2": {"required": {"x": 2}},
        "e": [{"x": 1}, None, {"x": 3}],
        "f": None,
        "g": [{"x": 1}, {"x": 2}],
        "h": None,
        "i": 3,
        "j": 3,
        "k": 8,
        "l": 8,
    }
    assert {path for _, path in errors} == {("c",), ("d", "required"), ("f", 1), ("h", "x")}


@strawberry.type
class Tick:
    n: int

    @strawberry.field
    async def doubled(self, by: int = 2) -> int:
        return self.n * by


@strawberry.type
class TickSubscription:
    @strawberry.subscription
    async def ticks(self, upto: int) -> AsyncGenerator[Tick, None]:
        for n in range(1, upto + 1):
            yield Tick(n=n)


def test_subscription_events_resolve_as_graphql_core() -> None:
    """A subscription field's resolver makes the stream; each event resolves to the event
    itself (never a second call of it), and the event's own async resolvers run as
    Strawberry's wrapper runs them."""

    async def events(context: type[execution.ExecutionContext] | None) -> list[Any]:
        schema = strawberry.Schema(
            query=ToyQuery, subscription=TickSubscription, execution_context_class=context
        )
        stream = await schema.subscribe("subscription { ticks(upto: 3) { n doubled(by: 3) } }")
        return [(result.data, result.errors) async for result in stream]  # type: ignore[union-attr]

    library, ours = asyncio.run(events(None)), asyncio.run(events(execution.ExecutionContext))
    assert ours == library
    assert [data for data, _ in ours] == [{"ticks": {"n": n, "doubled": 3 * n}} for n in (1, 2, 3)]
