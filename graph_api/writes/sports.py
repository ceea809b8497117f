"""Sports: create, update (a rename reaches every membership), delete when no one is in it."""

from __future__ import annotations

from typing import Any

from graph_api import ids, items, keys
from graph_api.errors import AlreadyExists, Conflict
from graph_api.keys import Kind
from graph_api.store.table import Table
from graph_api.store.transactions import delete, put, transact
from graph_api.writes import propagation
from graph_api.writes.base import NOT_EXISTS, Reads, expect_version, key_of, retrying

UNSET: Any = object()  # "leave as is", distinct from None ("clear")


async def create(table: Table, id_: str | None, name: str, coach: str | None) -> str:
    sport_id = keys.check_id(id_) if id_ is not None else ids.new_id()
    exists = AlreadyExists(f"sport {sport_id} already exists", field="id")
    await transact(table, [put(items.sport(sport_id, name, coach), NOT_EXISTS, on_fail=exists)])
    return sport_id


async def update_sport(
    table: Table, id_: str, name: str | None, coach: Any, expected: int | None
) -> str:
    reads = Reads(table)

    async def attempt() -> str:
        node = await reads.node(Kind.SPORT, id_)
        expect_version(node, expected)
        changes: dict[str, Any] = {}  # sent fields are propagated even when unchanged
        if name is not None:
            changes["name"] = name
        if coach is not UNSET:
            changes["coach"] = coach
        copies = await propagation.sport_copies(reads, node, changes)
        write = propagation.NodeWrite(
            key_of(node),
            (("eq", "version", node["version"]), *copies.fences),
            {**changes, "version": node["version"] + 1},
        )
        await propagation.write(table, write, [], copies)
        return id_

    return await retrying(table, attempt)


async def delete_sport(table: Table, id_: str) -> str:
    node = await Reads(table).node(Kind.SPORT, id_)
    busy = Conflict(
        f"sport {id_} still has {node.get('studentCount', 0)} student(s):"
        " they must leave it first (leaveSport)",
        id=id_,
    )
    if node.get("studentCount", 0):
        raise busy
    await transact(table, [delete(key_of(node), ("zero_or_missing", "studentCount"), on_fail=busy)])
    return id_
