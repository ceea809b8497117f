"""One plan per operation (graph/plan/): made once for the values of the variables that
change it, and read by every layer of the request (the cost, the rate limit, the reads)."""

from __future__ import annotations

from graphql import parse
from graphql.pyutils import Path

from graph_api.graph.plan import walk
from graph_api.graph.plan.operation import plan_for
from graph_api.graph.schema import schema
from graph_api.internals import graphql_schema

DOCUMENT = parse("""query($ids: [ID!]!, $n: Int, $homes: Boolean!) {
  students(ids: $ids) {
    id
    classes(first: $n) { edges { node { subject } } }
    home @include(if: $homes) { city }
  }
}""")


def test_an_operation_is_planned_once_for_the_variables_that_change_its_plan() -> None:
    graphql = graphql_schema(schema)
    first = plan_for(graphql, DOCUMENT, None, {"ids": ["a", "b"], "n": 3, "homes": True})
    assert first is not None
    assert first.cost.requested == 2 + 2 * 3
    # Other ids, as many: the same plan, priced as it was.
    again = plan_for(graphql, DOCUMENT, None, {"ids": ["c", "d"], "n": 3, "homes": True})
    assert again is first
    # A count, an `@include`: plans of their own.
    more = plan_for(graphql, DOCUMENT, None, {"ids": ["a", "b", "c"], "n": 3, "homes": True})
    assert more is not first and more is not None and more.cost.requested == 3 + 3 * 3
    wider = plan_for(graphql, DOCUMENT, None, {"ids": ["a", "b"], "n": 5, "homes": True})
    assert wider is not None and wider.cost.requested == 2 + 2 * 5
    homeless = plan_for(graphql, DOCUMENT, None, {"ids": ["a", "b"], "n": 3, "homes": False})
    assert homeless is not None and homeless is not first
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
