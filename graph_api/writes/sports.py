"""Sports: create, update (a rename reaches every membership), delete when no one is in it."""

from __future__ import annotations

from typing import Any

from graph_api.errors import AlreadyExists
from graph_api.model import ids, items, keys
from graph_api.model.keys import Kind
from graph_api.store.table import Table
from graph_api.store.transactions import NOT_EXISTS, put, transact
from graph_api.writes import counts, propagation, roster_shards
from graph_api.writes.attempts import retrying
from graph_api.writes.deletion import delete_if_unlinked
from graph_api.writes.reads import Reads
from graph_api.writes.versions import expect_version

UNSET: Any = object()  # "leave as is", distinct from None ("clear")


async def create(table: Table, id_: str | None, name: str, coach: str | None) -> str:
    sport_id = keys.check_id(id_) if id_ is not None else ids.new_id()
    exists = AlreadyExists(f"sport {sport_id} already exists", field="id")
    node = items.sport(sport_id, name, coach)
    made = roster_shards.made(Kind.SPORT, node)
    await transact(table, [put(node, NOT_EXISTS, on_fail=exists), *counts.moved(None, node), *made])
    return sport_id


async def update(table: Table, id_: str, name: str | None, coach: Any, expected: int | None) -> str:
    reads = Reads(table)

    async def attempt() -> str:
        node = await reads.node(Kind.SPORT, id_)
        expect_version(node, expected)
        changes: dict[str, Any] = {}  # sent fields are propagated even when unchanged
        if name is not None:
            changes["name"] = name
        if coach is not UNSET:
            changes["coach"] = coach
        await propagation.update_node(reads, Kind.SPORT, node, changes)
        return id_

    return await retrying(table, attempt)


async def delete(table: Table, id_: str) -> str:
    busy = f"sport {id_} still has {{count}} student(s): they must leave it first (leaveSport)"
    return await delete_if_unlinked(table, Kind.SPORT, id_, "studentCount", busy)
