"""To-dos: the durable note that a node's copies are still to be written.

A followed write (`propagation.write`) puts its node's to-do (`keys.todo`) in the transaction
that claims the copies, and the transaction that releases the claim deletes it: a node holds
a claim only while its to-do exists. A write interrupted once its node is saved (DynamoDB
throttled the chunks, the process stopped) leaves both, and `finisher.py` completes the
copies from what the node holds then, as sending the write again would.
"""

from __future__ import annotations

import contextlib
import time

from graph_api.model import items, keys
from graph_api.model.items import CLAIM, HANDING_OVER
from graph_api.model.keys import Kind
from graph_api.store.codec import Item
from graph_api.store.table import Table
from graph_api.store.transactions import STALE, Action, Stale, check, delete, put, transact


def put_todo(kind: Kind, id_: str, token: str) -> Action:
    """The node's to-do for the claim `token`, stamped now (the finisher's grace runs from it)."""
    return put(items.todo(kind, id_, token, int(time.time())))


def done(kind: Kind, id_: str) -> Action:
    """Deletes the node's to-do: only ever in a transaction that releases the node's claim,
    or that checks the node holds none."""
    return delete(keys.todo(kind, id_))


async def drop_if_idle(table: Table, kind: Kind, id_: str, token: str) -> None:
    """Delete the to-do of the claim `token` if the node holds no claim any more (a write
    that fit one transaction took it over and wrote every copy): unless a write claimed the
    node again meanwhile, which wrote the to-do again with its own token."""
    idle = check(keys.node(kind, id_), ("lacks", CLAIM), ("lacks", HANDING_OVER), on_fail=STALE)
    ours = delete(keys.todo(kind, id_), ("eq", "token", token), on_fail=STALE)
    with contextlib.suppress(Stale):
        await transact(table, [idle, ours])


async def pending(table: Table) -> list[Item]:
    """Every to-do, by one Query a partition (strongly consistent), oldest first."""
    found: list[Item] = []
    for rng in keys.todo_partitions():
        found += await table.query_all(rng, consistent=True)
    return sorted(found, key=lambda todo: (todo.get("at", 0), todo["SK"]))
