"""`make bench`'s queries (bench/queries.py) stay valid in our schema.

The bench itself runs outside `make test` (it needs DynamoDB Local, PostgreSQL and the
peer); this catches, in milliseconds, a schema change that would break it, and checks how
the bench takes turns between the sides, reads each request's DynamoDB calls, and sends
those calls again to DynamoDB alone (its floors).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import Any

import pytest
from graphql import OperationDefinitionNode, parse, validate
from graphql.execution.values import get_variable_values
from support import HTTPServer, dynamodb_requests, execute

from bench import queries as peer_queries
from bench.calls import RequestRecorder, calls_within, pauses, shape, waves
from bench.timed_client import Replayed, Timed, alternate
from graph_api.graph.schema import build_schema
from graph_api.model import keys
from graph_api.model.keys import Kind
from graph_api.store.codec import Item, decode

TARGETS = {
    "q1_student_ids": [f"s{i:04d}" for i in range(1, 31)],
    "q2_class_id": "c020",
    "q3_teacher_id": "t003",
    "q4_sport_id": "sp06",
    "q5_state": "Ontario",
}
DATA = {
    "homes": [{"student_id": "s0001", "country": "Canada", "state": "Ontario"}],
    "students": [{"id": "s0001", "name": "Maya Chen"}],
}


def test_the_queries_validate_with_their_variables() -> None:
    schema = build_schema()._schema
    specs = peer_queries.build(DATA, TARGETS)
    assert [s.name for s in specs] == ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6"]
    assert specs[-1].variables == {"prefix": "Ma"}
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


def test_the_pauses_before_each_call_are_their_lower_quartile_over_requests_in_a_row() -> None:
    requests = [
        [("Query", 1.0, 1.2), ("BatchGetItem", 1.5, 1.9)],
        [("Query", 2.9, 3.1), ("BatchGetItem", 3.3, 3.6)],  # 1.0 after the last call, 0.2
        [("Query", 4.8, 5.0), ("BatchGetItem", 5.4, 5.6)],  # 1.2 after it, 0.4
        [("Query", 6.7, 6.9), ("BatchGetItem", 7.2, 7.5)],  # 1.1, 0.3
        [("Query", 8.5, 8.7), ("BatchGetItem", 9.6, 9.8)],  # 1.0, 0.9: a busy moment
    ]
    assert pauses(requests) == pytest.approx([1.0, 0.3])


def test_no_pauses_when_the_requests_made_other_calls_or_calls_at_once() -> None:
    one = [("Query", 1.0, 1.2), ("BatchGetItem", 1.5, 1.9)]
    assert pauses([one]) is None  # a pause before the first call needs a request before it
    assert pauses([one, [("Query", 2.0, 2.2)]]) is None
    assert pauses([one, [("BatchGetItem", 2.0, 2.2), ("Query", 2.5, 2.9)]]) is None
    together = [("Query", 1.0, 1.4), ("Query", 1.1, 1.5)]
    assert pauses([together, [("Query", 2.0, 2.4), ("Query", 2.1, 2.5)]]) is None


# -- floors: a query's DynamoDB calls sent again, with no API between ----------------------


def test_a_recorded_read_sent_again_gets_the_same_answer(
    services: Any, demo_items: list[Item]
) -> None:
    recorder = RequestRecorder(services.dynamo)
    students = [item for item in demo_items if item["type"] == "student"][:3]
    query = "query($ids: [ID!]!) { students(ids: $ids) { id name } }"
    variables = {"ids": [student["id"] for student in students]}
    with recorder.recording() as recorded:
        result = execute(services, query, variables)
    assert len(recorded) == dynamodb_requests(result) == 1
    request = recorded[0]
    assert request["headers"]["X-Amz-Target"] == "DynamoDB_20120810.BatchGetItem"
    execute(services, query, variables)
    assert len(recorded) == 1  # nothing recorded outside `recording`

    conn = http.client.HTTPConnection(request["host"], request["port"], timeout=30)
    replay = [(request["path"], request["headers"], request["body"].encode())]
    replayed = Replayed(conn, replay)
    replayed.post(timed=True)
    replayed.close()
    (items,) = json.loads(replayed.last)["Responses"].values()
    answered = {
        keys.node(Kind.STUDENT, student["id"]).pk: student["name"]
        for student in result.data["students"]
    }
    # The items as the API asked for them: the attributes its fields read, and the key.
    assert {decode(item)["PK"]: decode(item)["name"] for item in items} == answered
    assert len(replayed.intervals) == 1


def _answer(status: bytes) -> Any:
    def reply(conn: socket.socket, request: bytes) -> bool:
        body = request.partition(b"\r\n\r\n")[2]  # echoed: which request this answers
        conn.sendall(b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body))
        return True

    return reply


def test_a_replay_sends_its_requests_in_order_on_one_connection_and_times_them_together() -> None:
    server = HTTPServer(_answer(b"200 OK"))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    replay = [("/", {"X-Amz-Target": "DynamoDB_20120810.Query"}, b"first")]
    replay.append(("/", {"X-Amz-Target": "DynamoDB_20120810.BatchGetItem"}, b"second"))
    replayed = Replayed(conn, replay)
    try:
        alternate([replayed], requests=2, warmup=1, block=2)
    finally:
        replayed.close()
        server.close()
    bodies = [request.partition(b"\r\n\r\n")[2] for request in server.requests]
    assert bodies == [b"first", b"second"] * 3  # a warm-up, then two timed samples
    assert server.connections == 1
    assert len(replayed.intervals) == 2
    assert replayed.last == b"second"


def test_a_paced_replay_waits_before_each_request_and_times_the_requests_alone() -> None:
    server = HTTPServer(_answer(b"200 OK"))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    replay = [("/", {}, b"first"), ("/", {}, b"second")]
    replayed = Replayed(conn, replay, [0.05, 0.1])
    try:
        began = time.perf_counter()
        replayed.post(timed=True)
        took = time.perf_counter() - began
    finally:
        replayed.close()
        server.close()
    assert [request.partition(b"\r\n\r\n")[2] for request in server.requests] == [
        b"first",
        b"second",
    ]
    ((started, ended),) = replayed.intervals
    # A sleep lasts at least its pause: the sample spans what is left, the requests.
    assert started >= began and ended - started <= took - 0.15


def test_a_replay_answered_with_an_error_stops_the_timing() -> None:
    server = HTTPServer(_answer(b"400 Bad Request"))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    replayed = Replayed(conn, [("/", {}, b"{}")])
    try:
        with pytest.raises(SystemExit, match="HTTP 400"):
            alternate([replayed], requests=2, warmup=1, block=2)
    finally:
        replayed.close()
        server.close()
    assert replayed.intervals == []
