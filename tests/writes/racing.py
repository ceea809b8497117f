"""Writes at once and interleavings forced step by step, and the counts they move."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest
from support import USER_ERRORS, Result, T, class_count, execute_async, get_item

from graph_api.model import keys

if TYPE_CHECKING:
    from graph_api.graph.engine.context import Services


def held_count(services: Services, counter: keys.Key) -> int | None:
    """What a counter holds, read strongly: the sum of its shards and of its single item of
    the layout before shards; None when none of them exists."""
    found = [get_item(services, *key) for key in [counter, *keys.counter_shards(counter)]]
    held = [int(item["count"]) for item in found if item is not None]
    return sum(held) if held else None


def sport_count(services: Services, sport_id: str) -> int:
    return class_count(services, sport_id, keys.Kind.SPORT)


def execute_concurrently(
    services: Services,
    operations: Sequence[tuple[str, dict[str, Any] | None]],
    *,
    in_flight: int = 16,
) -> list[Result]:
    """Run the (query, variables) operations at once on one event loop, at most `in_flight`
    at a time (so that none waits past its request deadline); results in the same order."""

    async def run_all() -> list[Result]:
        slots = asyncio.Semaphore(in_flight)

        async def one(query: str, variables: dict[str, Any] | None) -> Result:
            async with slots:
                return await execute_async(services, query, variables)

        return list(await asyncio.gather(*(one(q, v) for q, v in operations)))

    return asyncio.run(run_all())


def all_ok(results: Sequence[Result]) -> None:
    """No errors and no user errors in any of `results`."""
    problems = [e for r in results for e in r.problems]
    assert problems == [], problems[:3]


CREATE_STUDENT_MIN = f"""mutation($i: CreateStudentInput!) {{
  createStudent(input: $i) {{ student {{ id }} {USER_ERRORS} }} }}"""


CHANGE_SUBJECT = f"""mutation {{ updateClass(id: "c1", input: {{subject: "Physics"}}) {{
  class {{ subject }} {USER_ERRORS} }} }}"""


# -- interleavings forced step by step ------------------------------------------------------
#
# A writer reads, then writes one transaction. `interleave` runs another mutation to
# completion between the two steps, by wrapping the module's `transact` so that the first
# transaction of the mutation under test waits for the intruding mutation first.

Transact = Callable[..., Awaitable[None]]


def before_next_transaction(
    monkeypatch: pytest.MonkeyPatch, module: Any, intrude: Callable[[], Awaitable[T]]
) -> list[T]:
    """Before `module`'s next transaction, await `intrude()` (once); returns what it gave."""
    original: Transact = module.transact
    intruders: list[T] = []
    started: list[bool] = []  # set first: the intruder's own transactions pass straight on

    async def transact_after_intruder(*args: Any, **kwargs: Any) -> None:
        if not started:
            started.append(True)
            intruders.append(await intrude())
        await original(*args, **kwargs)

    monkeypatch.setattr(module, "transact", transact_after_intruder)
    return intruders


def interleave(
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    services: Services,
    query: str,
    variables: dict[str, Any] | None = None,
) -> list[Result]:
    """Before `module`'s next transaction, run `query` (once); returns its results."""
    return before_next_transaction(
        monkeypatch, module, lambda: execute_async(services, query, variables)
    )
