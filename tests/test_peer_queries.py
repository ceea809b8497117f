"""`make bench`'s five queries (tools/peer_queries.py) stay valid in our schema.

The bench itself runs outside `make test` (it needs DynamoDB Local, PostgreSQL and the
peer); this catches, in milliseconds, a schema change that would break it.
"""

from __future__ import annotations

from graphql import OperationDefinitionNode, parse, validate
from graphql.execution.values import get_variable_values

from graph_api.graph.schema import build_schema
from tools import peer_queries
from tools.peer_bench import shape, waves

TARGETS = {
    "q1_student_ids": [f"s{i:04d}" for i in range(1, 31)],
    "q2_class_id": "c020",
    "q3_teacher_id": "t003",
    "q4_sport_id": "sp06",
    "q5_state": "Ontario",
}
DATA = {"homes": [{"student_id": "s0001", "country": "Canada", "state": "Ontario"}]}


def test_the_five_queries_validate_with_their_variables() -> None:
    schema = build_schema()._schema
    specs = peer_queries.build(DATA, TARGETS)
    assert [s.name for s in specs] == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    for spec in specs:
        document = parse(spec.query)
        assert validate(schema, document) == [], spec.name
        (operation,) = document.definitions
        assert isinstance(operation, OperationDefinitionNode)
        coerced = get_variable_values(schema, operation.variable_definitions, spec.variables)
        assert not isinstance(coerced, list), (spec.name, coerced)  # a list of errors


def test_overlapping_calls_are_one_wave() -> None:
    calls = [("BatchGetItem", 0.0, 0.010), ("Query", 0.011, 0.030), ("Query", 0.012, 0.020)]
    count, wall_ms, serial_ms = waves(calls)
    assert count == 2
    assert round(wall_ms, 6) == 29.0  # 10 ms, then 19 ms with one or two calls in flight
    assert round(serial_ms, 6) == 37.0
    assert shape(calls) == "1 BatchGetItem \u2192 2 Query"
