"""A teacher's classes with their rosters: one Query a class's partition (graph/engine/prefetch.py),
all sent together and answered together, so that the level below reads as one wave.

What a client notices: the answers and the requests, also when a class's item is missing (its
roster then costs a Query of its own, as it would without the prefetch) and when a class's
Query fails (that class's fields fail where they are, coded and masked).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from support import (
    ENROLL_MIN,
    awaited,
    create_class,
    create_student,
    create_teacher,
    ok,
    run,
    run_on,
)

from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import GraphSchema, build_schema
from graph_api.model import keys
from graph_api.model.keys import Kind, Range
from graph_api.store import codec
from graph_api.store.table import Table

ROSTERS = """query($id: ID!) { teacher(id: $id) { classes { edges { node {
  id %s students(first: 10) { edges { node { name } } } } } } } }"""


@pytest.fixture
def school(empty_services: Services) -> Services:
    """Teacher t1 teaches c1 (Ada, Bo) and c2 (Cy)."""
    services = empty_services
    create_teacher(services, "t1")
    for class_id in ("c1", "c2"):
        create_class(services, class_id, "t1")
    for name, class_id in (("Ada", "c1"), ("Bo", "c1"), ("Cy", "c2")):
        student = create_student(services, name)
        ok(services, ENROLL_MIN, {"s": student["id"], "c": class_id})
    return services


def rosters(data: dict[str, Any]) -> dict[str, list[str]]:
    edges = data["teacher"]["classes"]["edges"]
    return {
        e["node"]["id"]: sorted(s["node"]["name"] for s in e["node"]["students"]["edges"])
        for e in edges
    }


def operations(result: Any) -> Counter[str]:
    return Counter(c.operation for c in result.context.ledger.calls)


def test_each_class_and_its_roster_is_one_query(school: Services) -> None:
    result = run(school, ROSTERS % "studentCount", {"id": "t1"})
    assert result.errors == []
    assert rosters(result.data) == {"c1": ["Ada", "Bo"], "c2": ["Cy"]}
    counts = [e["node"]["studentCount"] for e in result.data["teacher"]["classes"]["edges"]]
    assert counts == [2, 1]
    assert operations(result) == {"BatchGetItem": 1, "Query": 2}


def test_the_students_of_all_classes_are_read_in_one_batch(school: Services) -> None:
    """The classes' Queries answer as one wave: the students' items that their rosters need
    (a home is not on the roster's edge) leave in one BatchGetItem, not one a class."""
    homes = "students(first: 10) { edges { node { name home { city } } } }"
    query = ROSTERS.replace("students(first: 10) { edges { node { name } } }", homes) % ""
    result = run(school, query, {"id": "t1"})
    assert result.errors == []
    assert rosters(result.data) == {"c1": ["Ada", "Bo"], "c2": ["Cy"]}
    # The teacher; each partition; the three students' items together.
    assert operations(result) == {"BatchGetItem": 2, "Query": 2}


def test_a_class_whose_item_is_missing_reads_its_roster_on_its_own(school: Services) -> None:
    node = keys.node(Kind.CLASS, "c2")
    awaited(
        school.dynamo.call(
            "DeleteItem",
            {"TableName": school.settings.table, "Key": codec.encode(dict(node.as_item()))},
            None,
            missing_table=False,
        )
    )
    result = run(school, ROSTERS % "", {"id": "t1"})
    assert result.errors == []
    assert rosters(result.data) == {"c1": ["Ada", "Bo"], "c2": ["Cy"]}
    # The teacher; each partition; c2's roster again, since its partition held no class.
    assert operations(result) == {"BatchGetItem": 1, "Query": 3}
    counted = run(school, ROSTERS % "studentCount", {"id": "t1"})
    assert [(e["path"], e["extensions"]["code"]) for e in counted.errors] == [
        (["teacher", "classes", "edges", 1, "node", "studentCount"], "NOT_FOUND")
    ]


def test_a_failed_query_of_one_class_fails_that_class_only(
    school: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    query_at_least = Table.query_at_least
    broken = keys.partition(Kind.CLASS, "c2")

    async def failing(self: Table, rng: Range, *args: Any, **kwargs: Any) -> Any:
        if rng.pk == broken:
            raise RuntimeError("secret detail")
        return await query_at_least(self, rng, *args, **kwargs)

    monkeypatch.setattr(Table, "query_at_least", failing)
    result = run(school, ROSTERS % "studentCount", {"id": "t1"})
    assert "secret detail" not in str(result.errors)
    # c2's fields fail where c2 is; being non-null, they null the list up to `classes`.
    c2 = ["teacher", "classes", "edges", 1, "node"]
    assert sorted((e["path"], e["extensions"]["code"]) for e in result.errors) == [
        ([*c2, "studentCount"], "INTERNAL_SERVER_ERROR"),
        ([*c2, "students"], "INTERNAL_SERVER_ERROR"),
    ]
    assert result.data == {"teacher": {"classes": None}}
    # Without studentCount, c2's item is waited for by no field: its roster fails alone.
    alone = run(school, ROSTERS % "", {"id": "t1"})
    assert [(e["path"], e["extensions"]["code"]) for e in alone.errors] == [
        ([*c2, "students"], "INTERNAL_SERVER_ERROR")
    ]


def test_a_roster_that_include_leaves_out_rides_with_no_query(school: Services) -> None:
    """The plan collects fields as the executor does, `@include` and `@skip` read from the
    variables: a roster left out sends no Query of its class's partition (before the plan,
    each class's Query left all the same, its answer unread)."""
    query = ROSTERS.replace("students(first: 10)", "students(first: 10) @include(if: $rosters)")
    query = query.replace("query($id: ID!)", "query($id: ID!, $rosters: Boolean!)") % ""
    queries: list[dict[str, Any]] = []  # at the wire: a Query nobody awaits is sent too

    def spy(params: dict[str, Any], **_: Any) -> None:
        queries.append(params)

    school.dynamo.register("before-parameter-build.dynamodb.Query", spy)
    try:
        without = run(school, query, {"id": "t1", "rosters": False})
        assert without.errors == []
        assert [e["node"] for e in without.data["teacher"]["classes"]["edges"]] == [
            {"id": "c1"},
            {"id": "c2"},
        ]
        assert operations(without) == {"BatchGetItem": 1}  # the teacher's item alone
        assert queries == []
        # The same document with the roster: each class's partition, one Query each.
        with_rosters = run(school, query, {"id": "t1", "rosters": True})
        assert with_rosters.errors == []
        assert rosters(with_rosters.data) == {"c1": ["Ada", "Bo"], "c2": ["Cy"]}
        assert operations(with_rosters) == {"BatchGetItem": 1, "Query": 2}
        assert len(queries) == 2
    finally:
        school.dynamo.unregister("before-parameter-build.dynamodb.Query", spy)


def test_a_schema_without_the_cost_limit_fails_its_reads_as_a_server_error(
    school: Services, caplog: pytest.LogCaptureFixture
) -> None:
    """The cost limit makes every operation's plan; a schema run without it has none, and a
    resolver that needs one fails clearly (one path: no second way of making plans)."""
    served = build_schema(school.settings)
    bare = GraphSchema(query=served.query, execution_context_class=served.execution_context_class)
    bare.settings = school.settings

    async def main() -> Any:
        context = Context.create(school, "no-plan")
        return await bare.execute(ROSTERS % "", variable_values={"id": "t1"}, context_value=context)

    result = run_on(school, main())
    assert result.data == {"teacher": None}
    assert [e.formatted["extensions"]["code"] for e in result.errors] == ["INTERNAL_SERVER_ERROR"]
    assert "no operation plan" in caplog.text
