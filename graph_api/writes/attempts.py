"""A write's read-then-write attempt, run again while a guard says what it read changed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from graph_api.store.retry import Failure
from graph_api.store.table import Table
from graph_api.store.transactions import Stale

T = TypeVar("T")


async def retrying(table: Table, attempt: Callable[[], Awaitable[T]]) -> T:
    """Run a read-then-write attempt until its guards hold (others wrote meanwhile): the
    one "read again" loop, on the request's retries (its count, deadline and budget are
    shared with the calls inside each attempt, so their retries do not multiply)."""
    cost = 0
    while True:
        try:
            result = await attempt()
        except Stale:
            cost = await table.retries.pause(Failure.CONTENTION, KEPT_CHANGING)
            continue
        table.retries.recovered(cost)
        return result


KEPT_CHANGING = "the graph kept changing under this write; nothing was written, try again"
