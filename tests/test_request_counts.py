"""What a query costs in DynamoDB requests: one per distinct partition and one BatchGetItem per
100 distinct node keys, level by level, however often a key repeats; Queries of a level overlap."""

from __future__ import annotations

import dataclasses
from math import ceil
from typing import Any

import pytest
from conftest import execute

from graph_api.graph.context import Services
from graph_api.store.codec import Item
from graph_api.store.ledger import Call

NESTED = """
query($ids: [ID!]!) {
  students(ids: $ids) {
    id name
    classes(first: 100) { edges { node { id subject studentCount teacher { name } } } }
    sports(first: 100) { edges { node { id name } } }
  }
}
"""


def student_ids(items: list[Item], count: int) -> list[str]:
    return sorted(i["id"] for i in items if i["type"] == "student")[:count]


def expected_requests(items: list[Item], ids: list[str]) -> int:
    students = set(ids)
    classes = {
        i["classId"] for i in items if i["type"] == "enrolment" and i["studentId"] in students
    }
    level1 = ceil(len(students) / 100)  # BatchGetItem of the students
    level2 = len(students)  # one Query per student partition serves classes and sports
    level3 = ceil(len(classes) / 100)  # BatchGetItem of the classes, for studentCount
    # teacher { name } and sport { name } are served by the edges' copies: no request.
    return level1 + level2 + level3


def max_overlap(calls: list[Call]) -> int:
    events = sorted([(c.started, 1) for c in calls] + [(c.ended, -1) for c in calls])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def test_nested_query_costs_one_request_per_partition_and_batch(
    gql: Any, demo_items: list[Item]
) -> None:
    ids = student_ids(demo_items, 50)
    result = gql(NESTED, {"ids": ids})
    assert result.errors == []
    assert len(result.data["students"]) == 50
    assert result.extensions["dynamodb"]["requests"] == expected_requests(demo_items, ids)
    operations = [c.operation for c in result.context.ledger.calls]
    assert operations.count("Query") == 50
    assert operations.count("BatchGetItem") == 2


def test_repeating_ids_does_not_raise_the_count(gql: Any, demo_items: list[Item]) -> None:
    ids = student_ids(demo_items, 20)
    once = gql(NESTED, {"ids": ids})
    thrice = gql(NESTED, {"ids": ids * 3})
    assert len(thrice.data["students"]) == 60
    assert thrice.data["students"][:20] == once.data["students"]
    assert thrice.extensions["dynamodb"]["requests"] == once.extensions["dynamodb"]["requests"]
    assert once.extensions["dynamodb"]["requests"] == expected_requests(demo_items, ids)


def test_queries_of_one_level_overlap_in_time(gql: Any, demo_items: list[Item]) -> None:
    result = gql(NESTED, {"ids": student_ids(demo_items, 30)})
    queries = [c for c in result.context.ledger.calls if c.operation == "Query"]
    assert len(queries) == 30
    assert max_overlap(queries) >= 2


def test_a_partition_is_queried_once_however_many_fields_read_it(
    gql: Any, demo_items: list[Item]
) -> None:
    student = student_ids(demo_items, 1)[0]
    result = gql(
        """query($id: ID!) {
          a: student(id: $id) { classes { edges { node { id } } } sports { edges { node { id } } } }
          b: student(id: $id) { classes(first: 1) { edges { node { id } } } }
        }""",
        {"id": student},
    )
    assert result.errors == []
    queries = [c for c in result.context.ledger.calls if c.operation == "Query"]
    assert len(queries) == 1


def test_teacher_partitions_reached_twice_are_read_once(gql: Any, demo_items: list[Item]) -> None:
    teachers = [i for i in demo_items if i["type"] == "teacher"]
    result = gql(
        """{ teachers(first: 100) { edges { node {
              classes { edges { node { teacher { classes { edges { node { id } } } } } } }
        } } } }"""
    )
    assert result.errors == []
    queries = [c for c in result.context.ledger.calls if c.operation == "Query"]
    # One catalog page, then one Query per teacher partition: the inner `classes` reuse them.
    assert len(queries) == 1 + len(teachers)


def test_cost_is_reported_with_consumed_capacity(gql: Any) -> None:
    result = gql('{ student(id: "stu-0001") { name } }')
    assert result.extensions["dynamodb"]["requests"] == 1
    assert result.extensions["dynamodb"]["consumedCapacity"] > 0


@pytest.fixture
def naive_services(services: Services) -> Services:
    return dataclasses.replace(
        services, settings=dataclasses.replace(services.settings, naive=True)
    )


def test_naive_mode_pays_per_parent(naive_services: Services, demo_items: list[Item]) -> None:
    ids = student_ids(demo_items, 10)
    batched = execute(naive_services, NESTED, {"ids": ids})
    enrolments = [i for i in demo_items if i["type"] == "enrolment" and i["studentId"] in ids]
    operations = [c.operation for c in batched.context.ledger.calls]
    # One GetItem per student and per class edge, one Query per student per field.
    assert operations.count("GetItem") == len(ids) + len(enrolments)
    assert operations.count("Query") == 2 * len(ids)
    assert batched.extensions["dynamodb"]["requests"] > expected_requests(demo_items, ids)
