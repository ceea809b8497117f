"""Enrolments and sport memberships: an edge, its copies and both counters, in one transaction."""

from __future__ import annotations

from graph_api import keys
from graph_api.errors import AlreadyExists, Conflict, NotFound
from graph_api.items import EdgeType
from graph_api.store.table import Table
from graph_api.store.transactions import STALE, delete, put, transact, update
from graph_api.writes.base import NOT_EXISTS, Reads, retrying

_VERBS = {"enrolment": "enrolled in", "membership": "a member of"}


def _field(kind: str) -> str:
    return f"{kind.lower()}Id"


async def link(table: Table, edge_type: EdgeType, owner_id: str, target_id: str) -> str:
    """Create the edge; both counts move with it. Twice is ALREADY_EXISTS, counted once."""
    reads = Reads(table)
    verb = _VERBS[edge_type.name]

    async def attempt() -> str:
        owner, target = await reads.both(
            (edge_type.owner, owner_id, _field(edge_type.owner)),
            (edge_type.target, target_id, _field(edge_type.target)),
        )
        # Guards that the fields we copy are still the nodes' fields: a rename committed
        # after our read makes this transaction fail, and we copy again.
        owner_fresh = [
            ("eq", src, owner[src]) for src in sorted(set(edge_type.owner_copies.values()))
        ]
        target_fresh = [
            ("eq", src, target[src]) for src in sorted(set(edge_type.target_copies.values()))
        ]
        assert edge_type.target_count is not None
        await transact(
            table,
            [
                put(
                    edge_type.item(owner, target),
                    NOT_EXISTS,
                    on_fail=AlreadyExists(
                        f"{edge_type.owner.lower()} {owner_id} is already {verb}"
                        f" {edge_type.target.lower()} {target_id}"
                    ),
                ),
                update(
                    keys.node(edge_type.target, target_id),
                    ("exists",),
                    *target_fresh,
                    add={edge_type.target_count: 1},
                    on_fail=STALE,
                ),
                update(
                    keys.node(edge_type.owner, owner_id),
                    ("exists",),
                    *owner_fresh,
                    add={edge_type.owner_count: 1},
                    on_fail=STALE,
                ),
            ],
        )
        return target_id

    return await retrying(table, attempt)


async def unlink(table: Table, edge_type: EdgeType, owner_id: str, target_id: str) -> str:
    """Remove the edge; both counts move with it, never below zero."""
    keys.check_id(owner_id, _field(edge_type.owner))
    keys.check_id(target_id, _field(edge_type.target))
    edge, _ = keys.edge(edge_type.owner, owner_id, edge_type.target, target_id)
    assert edge_type.target_count is not None
    damaged = Conflict("a count disagrees with the edges; run graph-api check")
    await transact(
        table,
        [
            delete(
                edge,
                ("exists",),
                on_fail=NotFound(
                    f"{edge_type.owner.lower()} {owner_id} is not {_VERBS[edge_type.name]}"
                    f" {edge_type.target.lower()} {target_id}"
                ),
            ),
            update(
                keys.node(edge_type.target, target_id),
                ("gt", edge_type.target_count, 0),
                add={edge_type.target_count: -1},
                on_fail=damaged,
            ),
            update(
                keys.node(edge_type.owner, owner_id),
                ("gt", edge_type.owner_count, 0),
                add={edge_type.owner_count: -1},
                on_fail=damaged,
            ),
        ],
    )
    return target_id
