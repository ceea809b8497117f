"""`make bench`'s five queries (tools/peer_queries.py) stay valid in our schema.

The bench itself runs outside `make test` (it needs DynamoDB Local, PostgreSQL and the
peer); this catches, in milliseconds, a schema change that would break it, and checks how
the bench takes turns between the sides and reads each request's DynamoDB calls.
"""

from __future__ import annotations

import pytest
from graphql import OperationDefinitionNode, parse, validate
from graphql.execution.values import get_variable_values

from graph_api.graph.schema import build_schema
from tools import peer_queries
from tools.peer_bench import calls_within, shape, waves
from tools.timed_client import Timed, alternate

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


class _Server:
    """A fake `httpbench.GraphQLClient`: writes down who was asked, in order."""

    def __init__(self, name: str, log: list[str], status: int = 200) -> None:
        self.name, self.log, self.port, self.status = name, log, 0, status

    def post_raw(self, body: bytes) -> tuple[int, bytes]:
        self.log.append(self.name)
        return self.status, b'{"data": {}, "extensions": {"dynamodb": {"requests": 1}}}'


def test_the_sides_take_turns_in_blocks_after_an_untimed_warm_up() -> None:
    log: list[str] = []
    ours, theirs = Timed(_Server("us", log), b"{}"), Timed(_Server("peer", log), b"{}")
    alternate([ours, theirs], requests=5, warmup=2, block=2)
    warm, timed = log[:4], log[4:]
    assert warm == ["us", "peer", "us", "peer"]
    # Whoever went second in one block goes first in the next: neither always follows.
    assert timed == ["us", "us", "peer", "peer", "peer", "peer", "us", "us", "us", "peer"]
    assert len(ours.intervals) == len(theirs.intervals) == 5  # only timed requests count
    assert ours.dynamodb == [{"requests": 1}] * 5
    assert all(started <= ended for started, ended in ours.intervals)


def test_an_error_answer_stops_the_timing_even_in_the_warm_up() -> None:
    log: list[str] = []
    failing = Timed(_Server("us", log, status=500), b"{}")
    with pytest.raises(SystemExit, match="HTTP 500"):
        alternate([failing], requests=5, warmup=2, block=2)
    assert log == ["us"]


def test_a_request_gets_the_calls_made_within_its_interval() -> None:
    calls = [
        ("Query", 2.1, 2.4),
        ("BatchGetItem", 1.1, 1.3),  # the clock's order need not be the calls' order
        ("Query", 0.5, 1.05),  # began before the first request: a warm-up's, or a reader's
        ("Query", 1.4, 1.8),
        ("Query", 2.9, 3.2),  # outlived the second request
    ]
    first, second = calls_within(calls, [(1.0, 2.0), (2.0, 3.0)])
    assert [c[1] for c in first] == [1.1, 1.4]
    assert [c[1] for c in second] == [2.1]
