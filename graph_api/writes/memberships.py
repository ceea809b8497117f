"""Enrolments and sport memberships: the student's map entry, the edge item in the class's
(or sport's) roster and both counters, in one transaction. An enrolment writes no class
item: its count is the shard of the class's roster counter that its student picks, which
also carries the class's copied fields (`roster_shards.py`)."""

from __future__ import annotations

from graph_api.errors import AlreadyExists, BadUserInput, Conflict, NotFound
from graph_api.model import items, keys
from graph_api.model.items import Relation
from graph_api.store.table import Table
from graph_api.store.transactions import (
    EXISTS,
    NOT_EXISTS,
    STALE,
    Action,
    Clause,
    Stale,
    delete,
    put,
    transact,
    update,
)
from graph_api.writes import guards, roster_shards
from graph_api.writes.attempts import retrying
from graph_api.writes.guards import Guard
from graph_api.writes.reads import Reads

_VERBS = {"enrolment": "enrolled in", "membership": "a member of"}


def _field(kind: str) -> str:
    return f"{kind.lower()}Id"


def _too_many(relation: Relation, owner_id: str) -> BadUserInput:
    return BadUserInput(
        f"{relation.owner.lower()} {owner_id} already has {relation.limit}"
        f" {relation.field}, the most one {relation.owner.lower()} can have",
        field=_field(relation.target),
    )


async def link(
    table: Table, relation: Relation, owner_id: str, target_id: str, guard: Guard | None = None
) -> str:
    """Create the relation: the owner's map entry, the edge item and both counts, in one
    transaction. Twice is ALREADY_EXISTS, counted once. `guard`: a condition on the target
    (a class), checked on it as read and in the transaction (FORBIDDEN)."""
    reads = Reads(table)
    verb = _VERBS[relation.name]
    assert relation.target_count is not None
    target_count = relation.target_count

    async def attempt() -> str:
        owner, target = await reads.both(
            (relation.owner, owner_id, _field(relation.owner)),
            (relation.target, target_id, _field(relation.target)),
        )
        if guard is not None:
            guard.check(target)
        already = AlreadyExists(
            f"{relation.owner.lower()} {owner_id} is already {verb}"
            f" {relation.target.lower()} {target_id}"
        )
        if target_id in relation.entries(owner):
            raise already
        if len(relation.entries(owner)) >= relation.limit:
            raise _too_many(relation, owner_id)
        # Guards that the fields we copy are still the nodes' fields: a rename committed
        # after our read makes this transaction fail, and we copy again.
        owner_fresh = [("eq", src, owner[src]) for src in sorted(set(relation.roster_fields()))]
        # A flag the target lacks must still be missing (a class being handed over since
        # our read gives its new entries the flag: they grant no teacher).
        target_fresh = [
            ("lacks", src) if value is None else ("eq", src, value)
            for src, value in relation.copied_from(target).items()
        ]
        if items.in_sharded_layout(relation, target):
            # The shard carries the class's copied fields: conditions on it, not the class.
            counted = roster_shards.join(relation, target, owner_id, guards.clauses(guard))
        else:
            # The layout before: the class keeps its count (until migrate moves it away).
            kept: list[Clause] = [("has", target_count)] if relation.sharded else []
            counted = update(
                keys.node(relation.target, target_id),
                EXISTS,
                *kept,
                *guards.clauses(guard),
                *target_fresh,
                add={target_count: 1},
                on_fail=STALE,
            )
        await transact(
            table,
            [
                put(relation.edge_item(owner, target), NOT_EXISTS, on_fail=already),
                counted,
                update(
                    keys.node(relation.owner, owner_id),
                    EXISTS,
                    *owner_fresh,
                    ("size_lt", relation.field, relation.limit),
                    assign={relation.path(target_id): relation.entry_of(target)},
                    add={relation.owner_count: 1},
                    on_fail=STALE,
                ),
            ],
        )
        return target_id

    return await retrying(table, attempt)


async def unlink(
    table: Table, relation: Relation, owner_id: str, target_id: str, guard: Guard | None = None
) -> str:
    """Remove the relation: entry, edge item and both counts, never below zero. Reads
    nothing first; with a `guard` on the target (a class), the target's update (a sharded
    roster: its shard's) carries it and comes first, and only a failed transaction reads the
    target, to say why (or, a class of the layout before, to move the count on its item)."""
    keys.check_id(owner_id, _field(relation.owner))
    keys.check_id(target_id, _field(relation.target))
    edge, _ = keys.edge(relation.owner, owner_id, relation.target, target_id)
    assert relation.target_count is not None
    target_count = relation.target_count
    damaged = Conflict("a count disagrees with the edges; run graph-api check")
    absent = NotFound(
        f"{relation.owner.lower()} {owner_id} is not {_VERBS[relation.name]}"
        f" {relation.target.lower()} {target_id}"
    )
    edge_action = delete(edge, EXISTS, on_fail=absent)
    target_key = keys.node(relation.target, target_id)
    owner_action = update(
        keys.node(relation.owner, owner_id),
        ("gt", relation.owner_count, 0),
        remove=[relation.path(target_id)],
        add={relation.owner_count: -1},
        on_fail=damaged,
    )
    clauses = guards.clauses(guard)

    def on_item() -> Action:  # the count on the target's item: sports, classes not migrated
        return update(
            target_key, *clauses, ("gt", target_count, 0), add={target_count: -1}, on_fail=STALE
        )

    if guard is None and not relation.sharded:
        target_action = update(
            target_key, ("gt", target_count, 0), add={target_count: -1}, on_fail=damaged
        )
        await transact(table, [edge_action, target_action, owner_action])
        return target_id

    async def attempt() -> str:
        first = roster_shards.leave(relation, target_id, owner_id, clauses)
        if not relation.sharded:
            first = on_item()
        try:
            await transact(table, [first, edge_action, owner_action])
            return target_id
        except Stale:
            pass
        # The target's condition failed, nothing was written: the guard, a count, or a
        # class whose count is still on its item.
        try:
            target = await Reads(table).node(relation.target, target_id, _field(relation.target))
        except NotFound:
            if guard is not None:
                raise
            raise absent from None
        if guard is not None:
            guard.check(target)
        if relation.sharded and not items.in_sharded_layout(relation, target):
            if not target.get(target_count):
                raise absent
            await transact(table, [on_item(), edge_action, owner_action])  # Stale: again
            return target_id
        if not relation.sharded and not target.get(target_count):
            raise absent  # nobody is in it
        raise Stale()  # it changed between the transaction and the read: try again

    return await retrying(table, attempt)
