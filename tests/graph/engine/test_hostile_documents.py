"""Hostile documents: worst cases for the limits, generated. Each is refused with a coded error
or answered, and measuring it visits each selection of the document at most once (counted,
not timed), however its fragments spread each other. The server answers `/healthz`
meanwhile: validation that may take long (graphql-core's own rules) runs off the event loop.

Runs a real uvicorn server in a thread on a free loopback port, over the seeded read table.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn
from graphql import DocumentNode, FieldNode, FragmentSpreadNode, InlineFragmentNode, parse
from graphql.language import Lexer, Source, TokenKind
from support import make_settings

from graph_api.graph.engine import limits
from graph_api.graph.engine.context import Services
from graph_api.graph.engine.plan import pricing, walk
from graph_api.graph.engine.plan.operation import plan_for
from graph_api.graph.schema import schema
from graph_api.http.app import create_app
from tools.processes import free_port

# A client that waits this long has found a server that does not answer; no test expects
# to come near it.
PATIENCE = 120.0
ANSWERED = "answered"


def fan_out(levels: int, leaf: str, on: str = "Query", root: str = "{ ...F0 }") -> str:
    """`...F0`, where each F_i spreads F_{i+1} twice: 2^levels copies of `leaf`."""
    chain = " ".join(f"fragment F{i} on {on} {{ ...F{i + 1} ...F{i + 1} }}" for i in range(levels))
    return f"query {root} {chain} fragment F{levels} on {on} {{ {leaf} }}"


def nested_under_lists(levels: int) -> str:
    """Fragments that fan out twice a level, each level two connections of 100 deeper."""
    chain = " ".join(
        f"fragment S{i} on Student {{ classes(first: 100) {{ edges {{ node {{ ...C{i} }} }} }} }}"
        f" fragment C{i} on Class {{ students(first: 100) {{ edges {{ node {{"
        f" ...S{i + 1} ...S{i + 1} }} }} }} }}"
        for i in range(levels)
    )
    return (
        f'{{ student(id: "stu-0001") {{ ...S0 }} }} {chain} fragment S{levels} on Student {{ id }}'
    )


def many_small(count: int, body: Callable[[int], str]) -> str:
    spreads = " ".join(f"...F{i}" for i in range(count))
    fragments = " ".join(f"fragment F{i} on Query {{ {body(i)} }}" for i in range(count))
    return f"{{ {spreads} }} {fragments}"


def tokens(query: str) -> int:
    lexer, count = Lexer(Source(query)), 0
    while lexer.advance().kind != TokenKind.EOF:
        count += 1
    return count


def selections_in(document: DocumentNode) -> int:
    """Every field, spread and inline fragment written in the document."""
    count = 0
    pending = [d.selection_set for d in document.definitions if hasattr(d, "selection_set")]
    while pending:
        selection_set = pending.pop()
        for selection in selection_set.selections if selection_set else ():
            count += 1
            if isinstance(selection, FieldNode | InlineFragmentNode) and selection.selection_set:
                pending.append(selection.selection_set)
            assert isinstance(selection, FieldNode | InlineFragmentNode | FragmentSpreadNode)
    return count


TEACHERS = "teachers(first: 1) { edges { cursor } }"
# name: (document, the outcome: ANSWERED or the error code; a set when either may be right)
HOSTILE: dict[str, tuple[str, str | frozenset[str]]] = {
    # 2^40 __typename: merged by execution into one field, costs nothing: answered.
    "fan-out 40 levels": (fan_out(40, "__typename"), ANSWERED),
    "fan-out 40 levels to an alias": (fan_out(40, "a: __typename"), "BAD_USER_INPUT"),
    "fan-out 40 levels to a connection": (fan_out(40, TEACHERS), "QUERY_TOO_COSTLY"),
    "fan-out 40 levels under a list": (
        fan_out(
            40,
            "classes(first: 100) { edges { cursor } }",
            on="Teacher",
            root="{ teachers(first: 100) { edges { node { ...F0 } } } }",
        ),
        "QUERY_TOO_COSTLY",
    ),
    "fan-out 8 levels under a list, within the depth": (
        fan_out(
            8,
            "students(first: 100) { edges { cursor } }",
            on="Class",
            root='{ student(id: "stu-0001") { classes(first: 100) { edges { node { ...F0 } } } } }',
        ),
        "QUERY_TOO_COSTLY",
    ),
    "nested fragments under lists, 40 levels": (nested_under_lists(40), "BAD_USER_INPUT"),
    "nested fragments under lists, 1 level": (nested_under_lists(1), ANSWERED),  # cost 10,101
    # The longest chain under the token limit: no walk may recurse once per fragment.
    "fan-out 495 levels": (fan_out(495, "__typename"), frozenset({ANSWERED, "BAD_USER_INPUT"})),
    "540 small fragments": (
        many_small(540, lambda i: "__typename"),
        frozenset({ANSWERED, "BAD_USER_INPUT"}),
    ),
    "250 small aliased fragments": (
        many_small(250, lambda i: f'a{i}: teacher(id: "tch-001") {{ id }}'),
        "BAD_USER_INPUT",
    ),
    # Priced 240 times (24,000), merged by execution into one request.
    "240 small fragments of a connection": (
        many_small(240, lambda i: "teachers(first: 100) { edges { cursor } }"),
        ANSWERED,
    ),
    "550 identical fields": (
        "{ " + " ".join('student(id: "stu-0001") { id }' for _ in range(550)) + " }",
        frozenset({ANSWERED, "BAD_USER_INPUT"}),
    ),
}


def priced_at(
    schema: Any, document: DocumentNode, name: str | None, variables: dict[str, Any]
) -> pricing.Cost:
    """The cost the operation's plan holds."""
    plan = plan_for(schema, document, name, variables)
    assert plan is not None
    return plan.cost


def test_the_hostile_documents_are_within_the_token_limit() -> None:
    for name, (query, _) in HOSTILE.items():
        assert tokens(query) <= 5000, name


@pytest.mark.parametrize("query", [q for q, _ in HOSTILE.values()], ids=list(HOSTILE))
def test_limits_visit_each_selection_at_most_once(query: str) -> None:
    document = parse(query)
    written = selections_in(document)
    shape = limits.measure(document, schema._schema)
    assert shape.visited <= written
    priced = priced_at(schema._schema, document, None, {})
    assert priced.visited <= written


def test_fan_out_is_measured_as_its_expansion() -> None:
    # The figures are those of the document spread in, computed without spreading it.
    document = parse(
        fan_out(40, 'a: teacher(id: "tch-001") { classes(first: 3) { edges { cursor } } }')
    )
    shape = limits.measure(document, schema._schema)
    assert shape.aliases == 2**40
    assert shape.depths == {"": 3}
    assert priced_at(schema._schema, document, None, {}).requested == 2**40 * (1 + 3)
    deeper = parse(fan_out(60, TEACHERS))
    assert priced_at(schema._schema, deeper, None, {}).requested == pricing.MAX_REPORTED


def test_fan_out_to_a_variable_count_is_priced_for_each_value() -> None:
    # A count read from the variables under 2^40 spreads: priced again for each request's
    # value, each fragment's cost worked out once.
    document = parse(
        fan_out(40, "teachers(first: $n) { edges { cursor } }", root="($n: Int) { ...F0 }")
    )
    for n in (1, 3, 2):
        priced = priced_at(schema._schema, document, None, {"n": n})
        assert priced.requested == 2**40 * n


def test_a_chain_of_fragments_adds_up_its_depth() -> None:
    chain = " ".join(
        f"fragment A{i} on Student {{ classes(first: 1) {{ edges {{ node {{ students(first: 1)"
        f" {{ edges {{ node {{ ...A{i + 1} }} }} }} }} }} }} }}"
        for i in range(3)
    )
    document = parse(f'{{ student(id: "s") {{ ...A0 }} }} {chain} fragment A3 on Student {{ id }}')
    assert limits.measure(document, schema._schema).depths == {"": 1 + 3 * 6}


# -- over HTTP, on a real server ---------------------------------------------------------


@dataclass
class Server:
    url: str
    visited: list[tuple[str, int, int]]  # (walk, selections visited, selections written)


def http(url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=PATIENCE) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


@pytest.fixture(scope="module")
def server(endpoint: str, services: Services) -> Iterator[Server]:
    """uvicorn in a thread, over the seeded read table (which `services` creates); every
    limit walk it runs records what it visited."""
    visited: list[tuple[str, int, int]] = []
    walked = walk.walked

    def recording_walk(schema: Any, document: DocumentNode) -> walk.Walked:
        # The document's one walk: the limits, the cost and the plan all read it.
        found = walked(schema, document)
        visited.append(("walk", found.visited, selections_in(document)))
        return found

    mp = pytest.MonkeyPatch()
    mp.setattr(walk, "walked", recording_walk)
    # Bounded work is what `visited` records; the deadline is only generous, for a busy machine.
    own = Services.create(make_settings(endpoint, table="test-read", deadline_seconds=60.0))
    port = free_port()
    # log_config and log_level None: uvicorn leaves the process's logging alone (other
    # tests check how its loggers are set up).
    config = uvicorn.Config(
        create_app(own),
        host="127.0.0.1",
        port=port,
        lifespan="off",
        log_config=None,
        log_level=None,
    )
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, name="hostile-uvicorn", daemon=True)
    thread.start()
    try:
        while not runner.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn stopped before it served")
            threading.Event().wait(0.05)
        yield Server(f"http://127.0.0.1:{port}", visited)
    finally:
        runner.should_exit = True
        thread.join(PATIENCE)
        own.close()
        mp.undo()


def assert_outcome(status: int, body: Any, expected: str | frozenset[str]) -> str:
    assert status < 500, body
    errors = body.get("errors") or []
    outcome = errors[0]["extensions"]["code"] if errors else ANSWERED
    assert all("code" in e.get("extensions", {}) for e in errors), body
    allowed = expected if isinstance(expected, frozenset) else {expected}
    assert outcome in allowed, body
    if outcome == ANSWERED:
        # Answered in bounded work: what execution merged is small.
        assert len(json.dumps(body["data"])) < 100_000
    else:
        assert body.get("data") is None, body
        assert body.get("extensions", {}).get("dynamodb", {}).get("requests", 0) == 0
    return outcome


@pytest.mark.parametrize(("query", "expected"), list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_document_is_refused_or_answered_in_bounded_work(
    server: Server, query: str, expected: str | frozenset[str]
) -> None:
    server.visited.clear()
    status, body = http(f"{server.url}/graphql", {"query": query})
    assert_outcome(status, body, expected)
    assert server.visited, "no limit measured the document"
    for name, visited, written in server.visited:
        assert visited <= written, name


def test_healthz_answers_while_hostile_documents_are_validated(server: Server) -> None:
    with ThreadPoolExecutor(max_workers=len(HOSTILE)) as pool:
        sent = {
            name: pool.submit(http, f"{server.url}/graphql", {"query": query})
            for name, (query, _) in HOSTILE.items()
        }
        health = [http(f"{server.url}/healthz") for _ in range(5)]
        for name, future in sent.items():
            status, body = future.result()
            assert_outcome(status, body, HOSTILE[name][1])
    assert health == [(200, {"status": "ok"})] * 5


def test_validation_runs_off_the_event_loop(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A validation that has not finished (held here) does not stop the server answering."""
    entered, release = threading.Event(), threading.Event()
    validate = limits.validate_document

    def held(*args: Any) -> Any:
        entered.set()
        release.wait(PATIENCE)
        return validate(*args)

    monkeypatch.setattr(limits, "validate_document", held)
    with ThreadPoolExecutor(max_workers=1) as pool:
        query = '{ teacher(id: "tch-001") { name } held: __typename }'
        pending = pool.submit(http, f"{server.url}/graphql", {"query": query})
        try:
            assert entered.wait(PATIENCE), "validation never started"
            assert http(f"{server.url}/healthz") == (200, {"status": "ok"})
            assert not pending.done()
        finally:
            release.set()
        status, body = pending.result()
    assert status == 200
    assert body["data"]["held"] == "Query"
