"""The finisher: completes the copies that writes left to their to-dos (`todos.py`).

A to-do older than the grace (the request deadline and a margin: by then the write that
wrote it has stopped, one way or the other) is finished from what its node holds now
(`propagation.finish`): the claim taken over, every copy written, the to-do deleted with the
claim's release. A to-do whose node holds no claim (another write finished its copies) or
is gone is deleted. Every `serve` process runs it (`running`), and `graph-api finish` runs
it once; many at once only take the claim from one another, and the copies end the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from graph_api.errors import Unavailable
from graph_api.model import keys
from graph_api.model.items import CLAIM, HANDING_OVER
from graph_api.model.keys import Kind
from graph_api.settings import Settings
from graph_api.store.client import Dynamo
from graph_api.store.codec import Item
from graph_api.store.table import Table
from graph_api.writes import propagation, todos

log = logging.getLogger(__name__)

EVERY = 30.0  # seconds between two looks at the to-dos
MOST = 300.0  # the longest wait between looks, while DynamoDB keeps failing
MARGIN = 5.0  # seconds past a request's deadline before its to-do is anyone's
PASS_SECONDS = 600.0  # the deadline of one pass over the to-dos (`pass_table`)


def grace(settings: Settings) -> float:
    """How old a to-do must be to be finished: its write is past its deadline by then."""
    return settings.deadline_seconds + MARGIN


@dataclass
class Finished:
    finished: int = 0  # to-dos whose copies were written
    dropped: int = 0  # to-dos with nothing left to do (copies done, node gone)
    left: int = 0  # to-dos too young, or taken over by another write


async def finish_all(table: Table, older_than: float) -> Finished:
    """Finish every to-do written more than `older_than` seconds ago. UNAVAILABLE when
    DynamoDB fails: what is done stays done, and the rest is left for the next run."""
    outcome = Finished()
    now = time.time()
    for todo in await todos.pending(table):
        if now - float(todo.get("at", 0)) < older_than:
            outcome.left += 1
            continue
        result = await finish_one(table, todo)
        if result is None:
            outcome.dropped += 1
        elif result:
            outcome.finished += 1
        else:
            outcome.left += 1
    return outcome


async def finish_one(table: Table, todo: Item) -> bool | None:
    """Finish one to-do: True when its copies were written, None when nothing was left to
    do, False when another write holds them now."""
    kind, id_ = Kind(todo["kind"]), todo["id"]
    node = await table.get(keys.node(kind, id_), consistent=True)
    if node is not None and (CLAIM in node or HANDING_OVER in node):
        return await propagation.finish(table, kind, id_, node.get(CLAIM))
    await todos.drop_if_idle(table, kind, id_, todo["token"])
    return None


def pass_table(settings: Settings, dynamo: Dynamo) -> Table:
    """The table one pass over the to-dos writes through: with a deadline of PASS_SECONDS,
    not a request's, since a large node's copies take longer than a request may, and a pass
    cut short starts that node over on the next one."""
    return Table(dynamo, settings.table, deadline=time.monotonic() + PASS_SECONDS)


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[None]:
    """The finisher in the background while the app serves, on a DynamoDB client of its own
    (it never takes a connection a request waits for)."""
    dynamo = Dynamo(settings)
    task = asyncio.create_task(_loop(settings, dynamo), name="finisher")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await dynamo.aclose()


async def _loop(settings: Settings, dynamo: Dynamo) -> None:
    wait = EVERY
    while True:
        await asyncio.sleep(wait)
        try:
            outcome = await finish_all(pass_table(settings, dynamo), grace(settings))
        except Unavailable as error:
            wait = min(wait * 2, MOST)  # DynamoDB is failing: look again later
            log.warning("finisher: %s; next look in %.0f s", error.message, wait)
            continue
        except Exception:  # a bug must not end the loop for good: log it, look again later
            log.exception("finisher failed")
            wait = min(wait * 2, MOST)
            continue
        wait = EVERY
        if outcome.finished or outcome.dropped:
            log.info(
                "finisher: %d write(s) finished, %d to-do(s) dropped",
                outcome.finished,
                outcome.dropped,
            )
