"""One plan per operation (graph/engine/plan/): made once for the values of the variables that
change it, and read by every layer of the request (the cost, the rate limit, the reads)."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
from graphql import parse, print_ast
from graphql.pyutils import Path
from support import Gql
from test_request_counts import targets

from bench import queries as bench_queries
from graph_api.graph.engine.document import KeptBy
from graph_api.graph.engine.plan import cache, operation, pricing, walk
from graph_api.graph.engine.plan.operation import plan_for
from graph_api.graph.schema import schema
from graph_api.internals.strawberry import graphql_schema
from graph_api.store.codec import Item

DOCUMENT = parse("""query($ids: [ID!]!, $n: Int, $homes: Boolean!) {
  students(ids: $ids) {
    id
    classes(first: $n) { edges { node { subject } } }
    home @include(if: $homes) { city }
  }
}""")


def test_an_operation_is_planned_once_for_the_variables_that_change_its_plan(
    gql: Gql, demo_items: list[Item]
) -> None:
    students = sorted(i["id"] for i in demo_items if i.get("type") == "student")
    text = print_ast(DOCUMENT)
    first = gql(text, {"ids": students[:2], "n": 3, "homes": True})
    assert first.errors == []
    assert first.extensions["cost"]["requested"] == 2 + 2 * 3
    # Other ids, as many: priced as the first were, and read with as many requests.
    again = gql(text, {"ids": students[2:4], "n": 3, "homes": True})
    assert again.errors == [] and again.data != first.data
    assert again.extensions["cost"] == first.extensions["cost"]
    assert again.context.ledger.requests == first.context.ledger.requests
    # ... by the same plan, looked up (secondarily: the object itself).
    assert again.context.plan is first.context.plan
    graphql = graphql_schema(schema)
    # A count, an `@include`: plans of their own.
    more = plan_for(graphql, DOCUMENT, None, {"ids": ["a", "b", "c"], "n": 3, "homes": True})
    assert more is not None and more.cost.requested == 3 + 3 * 3
    wider = plan_for(graphql, DOCUMENT, None, {"ids": ["a", "b"], "n": 5, "homes": True})
    assert wider is not None and wider.cost.requested == 2 + 2 * 5
    homeless = plan_for(graphql, DOCUMENT, None, {"ids": ["a", "b"], "n": 3, "homes": False})
    assert homeless is not None
    assert homeless.level(Path(None, "students", "Query")).names() == {"id", "classes"}
    # Bad variables: no plan (execution says why, before any read).
    assert plan_for(graphql, DOCUMENT, None, {"ids": ["a"], "n": "three", "homes": True}) is None


def test_the_plan_collects_what_the_executor_collects() -> None:
    graphql = graphql_schema(schema)
    with_homes = plan_for(graphql, DOCUMENT, None, {"ids": ["a"], "n": 3, "homes": True})
    without = plan_for(graphql, DOCUMENT, None, {"ids": ["a"], "n": 3, "homes": False})
    assert with_homes is not None and without is not None
    students = Path(None, "students", "Query")
    assert with_homes.level(students).names() == {"id", "classes", "home"}
    assert without.level(students).names() == {"id", "classes"}
    # Any item of the list: the same level.
    classes = Path(Path(students, 7, None), "classes", "Student")
    assert with_homes.level(classes).names(("edges", "node")) == {"subject"}
    # What reads of each type's items ask for: every field the operation names on it.
    tables = {"Student": {"id": (), "classes": ("classes",), "home": ("home",)}}
    assert with_homes.parts(tables) == {"Student": frozenset({"classes", "home"})}


def test_the_document_is_walked_once() -> None:
    graphql = graphql_schema(schema)
    document = parse("query($n: Int) { teachers(first: $n) { edges { cursor } } }")
    assert walk.walked(graphql, document) is walk.walked(graphql, document)


def test_parts_follow_the_tables_they_are_asked_for() -> None:
    """A plan's parts are worked out for the node tables given: other tables (whole items,
    a field that reads more) give other parts, not the first call's."""
    graphql = graphql_schema(schema)
    plan = plan_for(graphql, DOCUMENT, None, {"ids": ["a"], "n": 3, "homes": True})
    assert plan is not None
    tables = {"Student": {"id": (), "classes": ("classes",), "home": ("home",)}}
    assert plan.parts(tables) == {"Student": frozenset({"classes", "home"})}
    wider = {"Student": {"id": (), "classes": ("classes", "version"), "home": ("home",)}}
    assert plan.parts(wider) == {"Student": frozenset({"classes", "version", "home"})}
    unknown: dict[str, dict[str, tuple[str, ...]]] = {"Student": {}}
    assert plan.parts(unknown) == {"Student": None}  # whole items
    assert plan.parts(tables) == {"Student": frozenset({"classes", "home"})}


PAGE = parse(
    "query($n: Int, $after: String) { teachers(first: $n, after: $after) { edges {"
    " node { classes { edges { node { students(first: $n, after: $after) {"
    " edges { cursor } } } } } } } } }"
)


def test_a_plan_keeps_no_callers_cursor() -> None:
    """Two callers that differ only in `after` share a plan, and it holds neither's cursor
    (only that one was given: a roster's page after a cursor cannot ride with its node)."""
    graphql = graphql_schema(schema)
    mine, theirs = "Y3Vyc29yOm1pbmU=" * 100, "Y3Vyc29yOnRoZWlycw==" * 100
    one = plan_for(graphql, PAGE, None, {"n": 3, "after": mine})
    other = plan_for(graphql, PAGE, None, {"n": 3, "after": theirs})
    assert one is not None and other is not None
    assert other is one
    assert mine not in repr(one.variables) and theirs not in repr(one.variables)
    assert one.variables["after"] is not None  # given: the plan knows that much
    none = plan_for(graphql, PAGE, None, {"n": 3, "after": None})
    assert none is not None and none is not one


def test_a_document_cycling_its_variables_does_not_evict_other_documents_plans(
    gql: Gql, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sends one document with 300 values of `first` replaces that document's
    own plans only: another document's plan is still there, and answers as it did."""
    planned: list[str] = []
    price = pricing.price

    def spy(operation: walk.Operation, values: Any) -> int:
        planned.append(operation.node.name.value if operation.node.name else "")
        return price(operation, values)

    monkeypatch.setattr(pricing, "price", spy)
    other = "query OtherDocument { sports(first: 2) { edges { node { name } } } }"
    before = gql(other)
    assert before.errors == [] and planned == ["OtherDocument"]
    cycling = "query Cycling($n: Int) { teachers(first: $n) { edges { cursor } } }"
    for n in range(300):
        gql(cycling, {"n": n})
    assert set(planned) == {"OtherDocument", "Cycling"}
    planned.clear()
    after = gql(other)
    assert planned == []  # not planned again
    assert after.errors == [] and after.data == before.data
    assert after.extensions["cost"] == before.extensions["cost"]


def test_the_plan_cache_bounds_each_documents_plans_and_the_memory_of_all() -> None:
    graphql = graphql_schema(schema)
    plans = cache.Plans(limit=60_000, documents=100, variants=3)
    documents = [
        parse(f"query D{i}($n: Int) {{ teachers(first: $n) {{ edges {{ cursor }} }} }}")
        for i in range(40)
    ]
    for document in documents:
        for n in range(1, 6):
            plan = plan_for(graphql, document, None, {"n": n})
            assert plan is not None
            plans.put(graphql, document, n, plan)
            assert plans.bytes <= plans.limit
    assert plans.get(graphql, documents[-1], 5) is not None  # the last used are kept
    assert plans.get(graphql, documents[-1], 2) is None  # past its 3 variants
    assert plans.get(graphql, documents[0], 5) is None  # the least recently used went
    held = sum(plans.get(graphql, d, n) is not None for d in documents for n in range(1, 6))
    assert 3 <= held == len(plans) < 3 * len(documents)
    # A plan that grows (its memos, as its requests run) is charged for it at the next
    # look-up.
    roomy = cache.Plans()
    plan = plan_for(graphql, documents[0], None, {"n": 1})
    assert plan is not None
    roomy.put(graphql, documents[0], 1, plan)
    charged = roomy.bytes
    teachers = Path(None, "teachers", "Query")
    plan.level(Path(Path(teachers, "edges", "TeacherConnection"), 0, None)).names()
    assert roomy.bytes == charged
    assert roomy.get(graphql, documents[0], 1) is plan
    assert roomy.bytes > charged


NODE = parse("""query($id: ID!, $roster: Boolean!) { node(id: $id) { id
  ... on Class { subject students(first: 2) @include(if: $roster) { edges { cursor } } }
  ... on Sport { name ... on Node { nodeId } }
  ... on Student { email }
} }""")


def test_an_interface_level_collects_as_graphql_core_does_for_each_possible_type() -> None:
    """At `node(id:)` the plan's fields are, for each object type the node may be, what
    graphql-core's executor collects for it (`@include` read from the variables)."""
    graphql = graphql_schema(schema)
    plan = plan_for(graphql, NODE, None, {"id": "Class:c", "roster": True})
    node = Path(None, "node", "Query")
    assert plan is not None
    assert plan.level(node).names() == {"id", "subject", "students", "name", "nodeId", "email"}
    students = Path(node, "students", "Class")
    assert plan.level(students).names() == {"edges"}
    assert plan.level(node).first_page_size() == 2
    without = plan_for(graphql, NODE, None, {"id": "Class:c", "roster": False})
    assert without is not None
    assert "students" not in without.level(node).names()
    assert without.level(node).first_page_size() is None


def test_what_is_kept_by_document_drops_the_least_recently_used_not_everything() -> None:
    """The walks' cache (`KeptBy`): full, it drops the document used least recently; a
    document in use keeps its walk, however many others come and go."""
    kept: KeptBy[str] = KeptBy(limit=3)
    hot, *others = [parse(f"{{ a{i}: __typename }}") for i in range(10)]
    kept.put((hot,), "hot")
    for i, other in enumerate(others):
        kept.put((other,), f"other {i}")
        assert kept.get((hot,)) == "hot"
        assert len(kept) <= 3
    assert kept.get((others[-1],)) == "other 8"
    assert kept.get((others[0],)) is None


@pytest.fixture(scope="module")
def five(demo_items: list[Item]) -> dict[str, Any]:
    return targets(demo_items)


@pytest.mark.parametrize("name", ["Q1", "Q2", "Q3", "Q4", "Q5"])
def test_a_plan_is_charged_at_least_the_memory_its_requests_leave(
    gql: Gql, five: dict[str, Any], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The cache's bound counts real memory: what a bench query's plan is charged
    (`OperationPlan.footprint`, measured again once its first request filled its memos) is
    no less than what that request leaves allocated by graph_api and graphql-core, once
    the document's other caches (parser, validation, walk) are warm."""
    query, variables = {
        "Q1": (bench_queries.Q1, {"ids": five["students"]}),
        "Q2": (bench_queries.Q2, {"id": five["class"]}),
        "Q3": (bench_queries.Q3, {"id": five["teacher"]}),
        "Q4": (bench_queries.Q4, {"id": five["sport"]}),
        "Q5": (bench_queries.Q5, {"country": five["country"], "state": five["state"]}),
    }[name]
    assert gql(query, variables).errors == []
    plans = cache.Plans()
    monkeypatch.setattr(operation, "_plans", plans)  # a cold plan, the rest warm
    # Where a plan's parts are made: the plan package, the executor's steps, graphql-core's
    # field collection, named tuples' __new__. (Not all of graph_api: a request also fills
    # caches of its own, a caller's bucket, a cursor's, which a suite run may leave cold.)
    made_in = (
        "*/graph_api/graph/engine/plan/*",
        "*/graph_api/graph/engine/execution.py",
        "*/graphql/*",
    )
    ours = [tracemalloc.Filter(True, pattern) for pattern in made_in]
    ours.append(tracemalloc.Filter(True, "<string>"))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(ours)
        assert gql(query, variables).errors == []
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(ours)
    finally:
        tracemalloc.stop()
    left = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    graphql = graphql_schema(schema)
    plans.get(graphql, parse("{ __typename }"), None)  # a look-up charges what grew
    assert len(plans) == 1
    assert plans.bytes >= left > 0
