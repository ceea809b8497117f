"""A page's nodes read for the attributes their selection reads (`NodeBase.field_attributes`):
one BatchGetItem as before, with a ProjectionExpression, and the same answers as whole items
give."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from support import (
    Result,
    boto_client,
    create_class,
    create_sport,
    create_student,
    create_teacher,
    enroll,
    join,
)
from support import execute as run_query

from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import build_schema, schema
from graph_api.graph.types.nodes import NodeBase
from graph_api.graph.types.school_class import Class
from graph_api.graph.types.sport import Sport
from graph_api.graph.types.student import Student
from graph_api.graph.types.teacher import Teacher
from graph_api.model import keys
from graph_api.model.keys import Kind

MUNICH = {"country": "Germany", "state": "Bavaria", "city": "Munich", "street": "Leopoldstr. 1"}


@pytest.mark.parametrize("node_type", [Student, Class, Sport, Teacher])
def test_every_field_of_a_node_type_names_what_it_reads(node_type: type[NodeBase]) -> None:
    """A field left out would make a page's nodes read whole items, and one that named too
    little would send a second read for what it lacks: every field is named."""
    fields = schema._schema.type_map[node_type.__name__].fields  # type: ignore[union-attr]
    assert set(node_type.field_attributes) == set(fields)


@pytest.fixture
def school(svc: Services) -> Services:
    """A sport and a class of two students, one with a home and one without."""
    create_teacher(svc, "t1", "Hana Bauer")
    create_class(svc, "c1", "t1", "Literature")
    create_sport(svc, "sp1", "Rowing", coach="Ines")
    create_student(svc, "Dara Patel", id="s1", home=MUNICH)
    create_student(svc, "Noor Khan", id="s2")
    for student in ("s1", "s2"):
        assert not enroll(svc, student, "c1").problems
        assert not join(svc, student, "sp1").problems
    return svc


@pytest.fixture
def batch_reads(school: Services) -> Iterator[list[dict[str, Any]]]:
    """The `RequestItems` of the table of every BatchGetItem sent meanwhile."""
    sent: list[dict[str, Any]] = []
    table = school.settings.table

    def spy(params: dict[str, Any], **_: Any) -> None:
        sent.append(params["RequestItems"][table])

    events = school.dynamo
    events.register("before-parameter-build.dynamodb.BatchGetItem", spy)
    yield sent
    events.unregister("before-parameter-build.dynamodb.BatchGetItem", spy)


def projected(read: dict[str, Any]) -> set[str] | None:
    names = read.get("ExpressionAttributeNames")
    expression = read.get("ProjectionExpression")
    if expression is None:
        return None
    return {names[name.strip()] for name in expression.split(",")}


ROSTER = """query($id: ID!) { sport(id: $id) { students { edges { node {
  id name home { city } sports { edges { node { name } } } } } } } }"""


def test_a_roster_page_reads_its_members_for_what_the_selection_reads(
    school: Services, batch_reads: list[dict[str, Any]]
) -> None:
    result = run_query(school, ROSTER, {"id": "sp1"})
    assert result.problems == []
    members = {e["node"]["id"]: e["node"] for e in result.data["sport"]["students"]["edges"]}
    assert members["s1"]["home"] == {"city": "Munich"}
    assert members["s2"]["home"] is None  # absent from the item: null, not a second read
    assert [s["node"]["name"] for s in members["s2"]["sports"]["edges"]] == ["Rowing"]
    assert result.extensions["dynamodb"]["requests"] == 2  # the roster's Query, one batch
    assert [projected(read) for read in batch_reads] == [{"PK", "SK", "name", "home", "sports"}]


def test_nodes_read_by_id_are_read_for_what_the_selection_reads(
    school: Services, batch_reads: list[dict[str, Any]]
) -> None:
    query = """{ students(ids: ["s1", "s2", "nobody"]) { id name home { city } }
      teacher(id: "t1") { name } }"""
    result = run_query(school, query)
    assert result.problems == []
    s1, s2, nobody = result.data["students"]
    assert (s1["id"], s1["home"], s2["id"], s2["home"]) == ("s1", {"city": "Munich"}, "s2", None)
    assert nobody is None and result.data["teacher"] == {"name": "Hana Bauer"}
    assert result.extensions["dynamodb"]["requests"] == 1  # s2's absent home: no second read
    assert [projected(read) for read in batch_reads] == [{"PK", "SK", "name", "home"}]


def test_a_class_without_its_teachers_copy_reads_the_teacher_by_id_as_whole(
    school: Services,
) -> None:
    """A part knows an attribute its item lacks as None; a class lacking its copy of the
    teacher's name answers from the teacher's item, as when read whole."""
    node = keys.node(Kind.CLASS, "c1")
    boto_client(school.settings.endpoint_url).update_item(
        TableName=school.settings.table,
        Key={"PK": {"S": node.pk}, "SK": {"S": node.sk}},
        UpdateExpression="REMOVE teacherName",
    )
    # Asked apart: in one operation, the whole read of `class` would answer `node`'s too.
    for query in (
        '{ node(id: "Class:c1") { ... on Class { subject teacher { name } } } }',
        '{ class(id: "c1") { subject teacher { name } } }',
    ):
        result = run_query(school, query)
        assert result.problems == []
        (answer,) = result.data.values()
        assert answer == {"subject": "Literature", "teacher": {"name": "Hana Bauer"}}


def test_the_subscribers_of_one_event_share_its_reads_and_each_gets_its_fields(
    school: Services,
) -> None:
    """An event's loaders serve every subscriber's operation (`Services.event_scope`), and
    what a read asks for is worked out from one operation: an event reads whole items."""
    schema = build_schema(school.settings)
    _, _, shared = school.event_scope(("an event",))
    first = '{ student(id: "s1") { classes { edges { node { subject } } } } }'
    second = '{ student(id: "s1") { name classes { edges { node { studentCount version } } } } }'

    async def both() -> list[Any]:
        results = []
        for query in (first, second):
            context = Context.create(school, "one-event")
            context.loaders = shared
            results.append(await schema.execute(query, context_value=context))
        return results

    one, two = asyncio.run(both())
    assert one.errors is None and two.errors is None, (one.errors, two.errors)
    assert one.data == {"student": {"classes": {"edges": [{"node": {"subject": "Literature"}}]}}}
    assert two.data["student"]["name"] == "Dara Patel"
    (edge,) = two.data["student"]["classes"]["edges"]
    assert edge["node"]["studentCount"] == 2 and edge["node"]["version"] >= 1


# Every field of each node type, reached through a page: a roster (students), a student's
# map of classes and of sports. `teacher` is read through the class's copies.
STUDENT_FIELDS = """id nodeId name email version home { country state city street }
  classes { totalCount edges { node { id subject } } }
  sports { totalCount edges { node { id name } } }"""
CLASS_FIELDS = """id nodeId subject teacher { id name version } studentCount version
  students { totalCount edges { node { id name } } }"""
SPORT_FIELDS = """id nodeId name coach studentCount version
  students { totalCount edges { node { id name } } }"""
THROUGH_PAGES = f"""query {{
  sport(id: "sp1") {{ students {{ edges {{ node {{ {STUDENT_FIELDS} }} }} }} }}
  student(id: "s1") {{
    classes {{ edges {{ node {{ {CLASS_FIELDS} }} }} }}
    sports {{ edges {{ node {{ {SPORT_FIELDS} }} }} }}
  }}
  teacher(id: "t1") {{ classes {{ edges {{ node {{ {CLASS_FIELDS} }} }} }} }}
}}"""


# Nodes read by id at the root, each type by every field, and again through a page.
BY_ID = f"""query($id: ID!) {{
  students(ids: ["s1", "s2", "s9"]) {{ {STUDENT_FIELDS} }}
  student(id: "s2") {{ name }}
  teacher(id: "t1") {{ id nodeId name version classes {{ edges {{ node {{ {CLASS_FIELDS} }} }} }} }}
  nodes(ids: ["Sport:sp1", "Class:c1", "Student:s1", "Teacher:t9"]) {{
    nodeId ... on Sport {{ {SPORT_FIELDS} }} ... on Class {{ {CLASS_FIELDS} }}
  }}
  sport(id: $id) {{ students {{ edges {{ node {{ name email }} }} }} }}
}}"""


# The same members at two depths, asking for different fields (the deeper by a field's own
# load, for `email`): one set of attributes a type for the whole operation, read once.
TWICE = """query {{ sport(id: "sp1") {{ students {{ edges {{ node {{ name
  sports {{ edges {{ node {{ students {{ edges {{ node {{ {deeper} }} }} }} }} }} }}
  }} }} }} }} }}"""


def whole_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read of a node's item reads it whole, as before parts."""
    for node_type in (Student, Class, Sport, Teacher):
        monkeypatch.setattr(node_type, "field_attributes", {})


def answer(result: Result) -> tuple[Any, list[Any]]:
    return result.data, sorted(e.get("extensions", {}).get("code") for e in result.errors)


def keys_read(reads: list[dict[str, Any]]) -> list[str]:
    return [key["PK"]["S"] + " " + key["SK"]["S"] for read in reads for key in read["Keys"]]


@pytest.mark.parametrize(
    "query",
    [
        THROUGH_PAGES,
        ROSTER,
        TWICE.format(deeper="version"),
        TWICE.format(deeper="id email"),
        BY_ID,
    ],
)
def test_parts_answer_as_whole_items_do_and_read_no_item_twice(
    school: Services,
    batch_reads: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    query: str,
) -> None:
    """Which reads share a wave depends on when answers arrive, so the requests of such a
    query vary from run to run, with whole items too; what parts must never do is make a
    field read its item a second time for an attribute the first read left out."""
    parts = answer(run_query(school, query, {"id": "sp1"}))
    assert any(projected(read) for read in batch_reads)  # parts were read
    read = keys_read(batch_reads)
    assert len(read) == len(set(read)), read
    batch_reads.clear()
    with monkeypatch.context() as whole:
        whole_reads(whole)
        wholes = answer(run_query(school, query, {"id": "sp1"}))
    assert all(projected(read) is None for read in batch_reads)
    assert parts == wholes


def test_keys_left_unprocessed_are_asked_for_again_with_the_same_projection(
    school: Services, batch_reads: list[dict[str, Any]]
) -> None:
    """DynamoDB's UnprocessedKeys repeat the projection; moto's do not, and whole items
    would then stand in for parts: the retry is written from the first request instead."""
    table = school.settings.table
    held: list[Any] = []

    def hold_back_one(parsed: dict[str, Any], **_: Any) -> None:
        if held:
            return
        got = parsed["Responses"][table]
        held.append(got.pop())
        parsed["UnprocessedKeys"] = {table: {"Keys": [{k: held[0][k] for k in ("PK", "SK")}]}}

    events = school.dynamo
    events.register("after-call.dynamodb.BatchGetItem", hold_back_one)
    try:
        result = run_query(school, ROSTER, {"id": "sp1"})
    finally:
        events.unregister("after-call.dynamodb.BatchGetItem", hold_back_one)
    assert result.problems == []
    homes = {e["node"]["id"]: e["node"]["home"] for e in result.data["sport"]["students"]["edges"]}
    assert homes == {"s1": {"city": "Munich"}, "s2": None}
    assert len(batch_reads) == 2
    assert (
        projected(batch_reads[1])
        == projected(batch_reads[0])
        == {"PK", "SK", "name", "home", "sports"}
    )
    assert batch_reads[1]["Keys"] == [{k: held[0][k] for k in ("PK", "SK")}]
