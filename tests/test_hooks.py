"""`graph.hooks.HookRunner` runs a request's extension hooks as Strawberry's own runner does.

An extension with a hook of each kind Strawberry accepts (a generator, an async generator, a
plain function, a coroutine function) records what it sees; the same requests go through
`GraphSchema` (our runner) and a plain `strawberry.Schema`, and the records must match:
which hooks ran, in which order, on which request's instance, and what an error raised
inside a stage did to the hooks around it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import strawberry
from strawberry.extensions import SchemaExtension

from graph_api.graph import hooks
from graph_api.graph.schema import GraphSchema


@strawberry.type
class Query:
    @strawberry.field
    def hello(self) -> str:
        return "world"


class Recorder(SchemaExtension):
    """Each request's instance numbers itself and records every stage it sees."""

    log: list[str]
    made = 0

    def __init__(self) -> None:
        Recorder.made += 1
        self.number = Recorder.made

    def _say(self, what: str) -> None:
        Recorder.log.append(f"{self.number}:{what}")

    def on_operation(self) -> Iterator[None]:  # a generator
        self._say("operation")
        try:
            yield
        except Exception as error:
            self._say(f"operation saw {error}")
            raise
        self._say("operation done")

    async def on_parse(self) -> AsyncIterator[None]:  # an async generator
        self._say("parse")
        yield
        self._say("parse done")

    def on_validate(self) -> None:  # a plain function: runs on entering the stage
        self._say("validate")

    async def on_execute(self) -> None:  # a coroutine function
        await asyncio.sleep(0)
        self._say("execute")
        if self.execution_context.operation_name == "Failing":
            raise RuntimeError("refused")


def _run_twice(schema: strawberry.Schema) -> list[str]:
    Recorder.log, Recorder.made = [], 0

    async def requests() -> list[Any]:
        return [
            await schema.execute("query Fine { hello }", operation_name="Fine"),
            await schema.execute("query Failing { hello }", operation_name="Failing"),
        ]

    fine, failing = asyncio.run(requests())
    assert fine.data == {"hello": "world"}
    assert failing.errors  # GraphSchema masks it (INTERNAL_SERVER_ERROR); both refuse it
    return Recorder.log


def test_hooks_run_as_strawberrys_runner_runs_them() -> None:
    theirs = _run_twice(strawberry.Schema(query=Query, extensions=[Recorder]))
    ours = _run_twice(GraphSchema(query=Query, extensions=[Recorder]))
    assert ours == theirs
    # What both say: each request's own instance, every stage, the error seen by the
    # operation's generator around it.
    assert ours[:6] == [
        "1:operation",
        "1:parse",
        "1:parse done",
        "1:validate",
        "1:execute",
        "1:operation done",
    ]
    assert "2:operation saw refused" in ours


def test_a_class_hook_is_found_once() -> None:
    first = hooks.found(Recorder, "on_operation")
    assert first is hooks.found(Recorder, "on_operation")
    assert hooks.found(Recorder, "on_stream_result") is None  # left to SchemaExtension


def test_a_hook_that_is_not_callable_is_refused_as_strawberry_refuses_it() -> None:
    class Broken(SchemaExtension):
        on_execute = 3  # type: ignore[assignment]

    with pytest.raises(ValueError, match="must be callable"):
        hooks.found(Broken, "on_execute")
