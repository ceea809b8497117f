"""The executor's short path for plain fields (`graph/execution.py`) answers exactly as
graphql-core's own path does: the same data, the same errors at the same paths, the same
nulls where a non-null field failed.

Each document runs twice on the seeded table, through the API's schema and through a schema
of the same types and extensions on graphql-core's executor alone.
"""

from __future__ import annotations

import asyncio
import functools
import random
import types
import weakref
from typing import Any

import pytest
import strawberry
from graphql import FragmentDefinitionNode, OperationDefinitionNode, parse
from graphql.pyutils import is_awaitable as graphql_is_awaitable
from support import seed
from test_request_counts import Shapes, render, targets

from bench import queries as peer_queries
from graph_api.graph import execution, known, plans, runners
from graph_api.graph.context import Context, Services
from graph_api.graph.prepared import prepared_by
from graph_api.graph.schema import GraphSchema, build_schema
from graph_api.graph.school_class import Class
from graph_api.model import items
from graph_api.store.codec import Item


def both(services: Services, query: str, variables: dict[str, Any] | None = None) -> Any:
    """(data, errors) from the API's schema and from graphql-core's path alone."""
    fast = build_schema(services.settings)
    assert fast.execution_context_class is execution.ExecutionContext
    reference = GraphSchema(
        query=fast.query,
        mutation=fast.mutation,
        subscription=fast.subscription,
        extensions=fast.extensions,
    )

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


# -- the test for awaitables, answered by type where the type decides ------------------------


class Proxy:
    """A `__getattr__` that answers `__await__` for some instances: asked value by value."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


class Forwarding:
    """A `__getattr__` that is no plain function (a `partialmethod`): still asked value by
    value."""

    def _forward(self, name: str) -> Any:
        return getattr(self.target, name)

    __getattr__ = functools.partialmethod(_forward)

    def __init__(self, target: Any) -> None:
        self.target = target


class Box:
    pass


def test_awaitables_are_told_apart_as_graphql_core_tells_them() -> None:
    @types.coroutine
    def generator_coroutine() -> Any:
        yield

    def generator() -> Any:
        yield

    async def coroutine() -> None:
        pass

    loop = asyncio.new_event_loop()
    box, future = Box(), loop.create_future()
    # Pairs of one type: the first value seen must not decide for the second.
    pairs: list[tuple[Any, Any]] = [
        ("text", 1),
        ([], {}),
        (Leaf(x=1), Leaf(x=2)),
        (Proxy(box), Proxy(future)),
        (Forwarding(box), Forwarding(future)),
        (weakref.proxy(box), weakref.proxy(future)),  # C-level forwarding
        (Class.of("c1", {}, None), Class.of("c2", {"subject": "x"}, None)),  # type: ignore[arg-type]
        (generator(), generator_coroutine()),
        (coroutine(), loop.create_future()),
    ]
    values = [value for pair in pairs for value in pair]
    for _ in range(2):  # the second time from what the first taught it
        assert [execution.is_awaitable(v) for v in values] == [
            graphql_is_awaitable(v) for v in values
        ]
    told = [execution.is_awaitable(v) for v in values]
    assert told[6:12] == [False, True] * 3  # each forwarder as what it forwards to
    assert told[-4:] == [False, True, True, True]
    values[-2].close()
    loop.close()


@strawberry.interface
class Named:
    name: str


@strawberry.type
class Pet(Named):
    """Strawberry's own `is_type_of` (it implements an interface), which reads a cast."""


@strawberry.type
class PetQuery:
    pet: Pet | None


def test_known_objects_keep_a_class_only_when_no_instance_can_change_the_answer() -> None:
    pet_type = strawberry.Schema(query=PetQuery)._schema.type_map["Pet"]
    pets = known.KnownObjects(pet_type)  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    # A type of its own: one instance could be cast to another type, so each one is asked.
    assert pets(Pet(name="a")) and not pets.types
    assert not pets(strawberry.cast(Leaf, Pet(name="b")))
    assert not pets(Proxy(loop.create_future())) and not pets("not a pet") and not pets.types
    # Our node types are Uncast: their class decides, and a cast of one node is refused.
    node = Class.of("c1", {}, None)  # type: ignore[arg-type]
    classes = known.KnownObjects(build_schema()._schema.type_map["Class"])  # type: ignore[arg-type]
    assert classes(node) and classes.types == {Class}
    assert not classes(Leaf(x=1)) and not classes(None)
    with pytest.raises(AttributeError):
        strawberry.cast(Class, node)
    # A type without `is_type_of` (no interface) takes any object: its class decides.
    leaf_type = strawberry.Schema(query=ToyQuery)._schema.type_map["Leaf"]
    leaves = known.KnownObjects(leaf_type)  # type: ignore[arg-type]
    assert leaves(Leaf(x=1)) and leaves.types == {Leaf}
    loop.close()


# -- a resolver in two steps (graph/prepared.py) --------------------------------------------

PREPARED: list[int] = []


def _scaled(info: strawberry.Info, factor: int) -> Any:
    PREPARED.append(factor)
    if factor < 0:
        raise ValueError("a negative factor")
    return lambda item: item.n * factor


@strawberry.type
class Numbered:
    n: int

    @strawberry.field
    @prepared_by(_scaled)
    def scaled(self, info: strawberry.Info, factor: int) -> int:
        return _scaled(info, factor)(self)  # type: ignore[no-any-return]


@strawberry.type
class NumberedQuery:
    @strawberry.field
    def items(self) -> list[Numbered | None]:
        return [Numbered(n=n) for n in range(5)]


def test_a_prepared_resolver_is_prepared_once_a_field_and_answers_as_graphql_core() -> None:
    query = """{
      items { a: scaled(factor: 2) b: scaled(factor: 3) }
      late: items { c: scaled(factor: -1) }
    }"""
    answers, prepared = [], []
    for context in (None, execution.ExecutionContext):
        PREPARED.clear()
        schema = strawberry.Schema(query=NumberedQuery, execution_context_class=context)
        result = schema.execute_sync(query)
        answers.append((result.data, sorted((e.message, tuple(e.path)) for e in result.errors)))
        prepared.append(sorted(PREPARED))
    assert answers[0] == answers[1]
    data, errors = answers[1]
    assert data["items"] == [{"a": 2 * n, "b": 3 * n} for n in range(5)]
    assert data["late"] == [None] * 5  # each item's error at its own path
    assert errors == [("a negative factor", ("late", n, "c")) for n in range(5)]
    assert prepared[0] == [-1] * 5 + [2] * 5 + [3] * 5  # graphql-core: each call prepares
    # Ours: once a field; the refused one once, then by the resolver at each item.
    assert prepared[1] == [-1] * 6 + [2, 3]


# -- an item's asynchronous error, in a list completed in place ------------------------------


@strawberry.type
class LateItem:
    n: int

    @strawberry.field
    async def v(self) -> int:  # non-null: its error nulls the item, which nulls the list
        if self.n == 1:
            raise ValueError("bad item")
        return self.n


@strawberry.type
class Parent:
    other: str
    items: list[LateItem] | None  # a plain attribute: completed by the short path


@strawberry.type
class ItemsQuery:
    @strawberry.field
    def parent(self) -> Parent | None:
        return Parent(other="o", items=[LateItem(n=0), LateItem(n=1)])


def test_an_items_late_error_nulls_its_list_not_the_parent() -> None:
    answers = []
    for context in (None, execution.ExecutionContext):
        schema = strawberry.Schema(query=ItemsQuery, execution_context_class=context)
        result = asyncio.run(schema.execute("{ parent { other items { v } } }"))
        answers.append((result.data, [(e.message, e.path) for e in result.errors or []]))
    assert answers[0] == answers[1]
    assert answers[1] == (
        {"parent": {"other": "o", "items": None}},
        [("bad item", ["parent", "items", 1, "v"])],
    )


def test_a_shape_switched_by_variables_answers_alike_each_time(
    services: Services, demo_items: list[Item]
) -> None:
    """One document whose @include and @skip depend on its variables: each request's
    selection sets differ, and each gets the function written for its own shape."""
    student = targets(demo_items)["students"][0]
    query = """query($id: ID!, $more: Boolean!) {
      student(id: $id) {
        class: name def: id @include(if: $more) __typename
        classes @skip(if: $more) { edges { node { subject } } }
        sports @include(if: $more) { edges { node { name } } }
      }
    }"""
    for more in (True, False, True):
        fast, reference = both(services, query, {"id": student, "more": more})
        assert fast == reference
        answer = fast[0]["student"]
        assert ("def" in answer, "sports" in answer, "classes" in answer) == (more, more, not more)
        assert answer["class"] and answer["__typename"] == "Student"


def test_a_shape_is_written_once_and_the_written_ones_are_bounded(
    services: Services, demo_items: list[Item], monkeypatch: pytest.MonkeyPatch
) -> None:
    five = targets(demo_items)
    query, variables = peer_queries.Q1, {"ids": five["students"]}
    first = both(services, query, variables)
    written = dict(runners._factories)
    assert both(services, query, variables) == first
    assert runners._factories == written  # the second request wrote nothing new

    monkeypatch.setattr(runners, "MAX_FACTORIES", 3)
    for n in range(1, 8):  # seven shapes: aliases a0 .. a(n-1)
        aliases = " ".join(f"a{i}: name" for i in range(n))
        query = f"query($id: ID!) {{ student(id: $id) {{ {aliases} }} }}"
        fast, reference = both(services, query, {"id": five["students"][0]})
        assert fast == reference and len(fast[0]["student"]) == n
        assert len(runners._factories) <= 3


def planned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The types whose selection sets `ExecutionContext` plans from here on, in order."""
    seen: list[str] = []
    plan_of = execution.ExecutionContext._plan_of

    def recording(self: Any, parent_type: Any, grouped_field_set: Any) -> Any:
        seen.append(parent_type.name)
        return plan_of(self, parent_type, grouped_field_set)

    monkeypatch.setattr(execution.ExecutionContext, "_plan_of", recording)
    return seen


def test_an_operations_plan_is_kept_and_each_request_answers_for_its_own_variables(
    services: Services, demo_items: list[Item], monkeypatch: pytest.MonkeyPatch
) -> None:
    five = targets(demo_items)
    seen = planned(monkeypatch)
    query = """query($ids: [ID!]!, $n: Int, $class: ID!) {
      students(ids: $ids) { id name classes(first: $n) { edges { node { subject } } } }
      class(id: $class) { subject students(first: $n) { edges { node { name } } } }
    }"""
    answers = []
    for ids, n in ((five["students"][:3], 1), (five["students"][5:7], 3), (["stu-nobody"], 2)):
        fast, reference = both(services, query, {"ids": ids, "n": n, "class": five["class"]})
        assert fast == reference
        answers.append(fast[0])
        first_request = len(answers) == 1
        assert bool(seen) == first_request, seen  # planned on the first request alone
        seen.clear()
    assert [len(a["students"]) for a in answers] == [3, 2, 1]
    assert [len(a["class"]["students"]["edges"]) for a in answers] == [1, 3, 2]
    edges = [s["classes"]["edges"] for s in answers[1]["students"]]
    assert all(len(e) == 3 for e in edges)  # the kept plan asked for this request's `first`
    assert answers[2]["students"] == [None]


def test_errors_under_a_kept_plan_are_at_each_requests_own_paths(
    services: Services, demo_items: list[Item], monkeypatch: pytest.MonkeyPatch
) -> None:
    five = targets(demo_items)
    seen = planned(monkeypatch)
    query = """query($ids: [ID!]!, $n: Int) {
      students(ids: $ids) { id classes(first: $n) { edges { node { subject } } } }
    }"""
    for ids, n, failing in (
        (five["students"][:2], -1, [0, 1]),
        (five["students"][:3], 2, []),
        (["stu-nobody", five["students"][0]], 0, [1]),
    ):
        fast, reference = both(services, query, {"ids": ids, "n": n})
        assert fast == reference
        assert [e["path"] for e in fast[1]] == [["students", i, "classes"] for i in failing]
    assert seen.count("Query") == 1


def test_operations_whose_collection_may_differ_are_planned_every_time() -> None:
    def alike(document: str) -> bool:
        parsed = parse(document)
        operation = next(d for d in parsed.definitions if isinstance(d, OperationDefinitionNode))
        fragments = {
            d.name.value: d for d in parsed.definitions if isinstance(d, FragmentDefinitionNode)
        }
        return plans.collected_alike(operation, fragments)

    assert alike("query($id: ID!) { student(id: $id) { name ...F } } fragment F on Student { id }")
    assert alike("query Q @custom { student(id: 1) { name } }")  # on the operation: no effect
    assert not alike("query($x: Boolean!) { student(id: 1) { name @include(if: $x) } }")
    assert not alike("{ student(id: 1) { ... @skip(if: true) { name } } }")
    assert not alike("{ student(id: 1) { ...F @include(if: false) } } fragment F on Student { id }")
    assert not alike(
        "{ student(id: 1) { ...F } } fragment F on Student { classes { edges {"
        " node { subject @skip(if: true) } } } }"
    )
    assert not alike("{ student(id: 1) { ...F } } fragment F on Student @dir { id }")
    assert not alike("{ student(id: 1) { ... @defer { name } } }")


def test_kept_plans_are_bounded(
    services: Services, demo_items: list[Item], monkeypatch: pytest.MonkeyPatch
) -> None:
    student = targets(demo_items)["students"][0]
    monkeypatch.setattr(plans._roots, "limit", 2)
    monkeypatch.setattr(plans._alike, "limit", 2)
    for n in range(1, 6):
        aliases = " ".join(f"b{i}: name" for i in range(n))
        query = f"query($id: ID!) {{ student(id: $id) {{ {aliases} }} }}"
        fast, reference = both(services, query, {"id": student})
        assert fast == reference and len(fast[0]["student"]) == n
        assert len(plans._roots) <= 2 and len(plans._alike) <= 2


def test_work_tracked_after_its_execution_is_gone_still_settles() -> None:
    """`info.async_helpers.track` holds its execution context weakly: called once the
    context is freed, it settles the awaitables itself (their errors observed, none left
    never awaited), as the context would have."""
    settled: list[str] = []

    class Gone:
        pass

    context = Gone()
    track = execution._Track(weakref.ref(context))  # type: ignore[arg-type]
    del context

    async def work(name: str, fail: bool) -> None:
        await asyncio.sleep(0)
        settled.append(name)
        if fail:
            raise ValueError(name)

    async def run() -> None:
        track([work("a", False), 1, work("b", True)])
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(run())
    assert sorted(settled) == ["a", "b"]
    assert not execution._settling  # nothing kept once settled
