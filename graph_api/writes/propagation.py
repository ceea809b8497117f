"""Renames reach every denormalized copy (see the copy table in schema/table.md).

A node's write is a `NodeWrite` (the node's own update, with its guards), a few more head
actions, and `Copies`: units of copy updates, each unit in order (a class's own
`teacherName` before the enrolments that copy it from the class). Everything goes in one
transaction when it fits. When it does not:

- the head commits first, claiming the node's copies with a token (`propagation`);
- the copies follow in chunks, each guarded by "the token is still ours": a later write of
  the node takes the claim over, and the older chunks stop instead of overwriting newer
  copies;
- the claim is released at the end. A write that fails half-way is resumed by sending it
  again: fields that are sent are propagated even when the node already has their value.

Every plan carries fences: conditions that the edge counts we saw are still the counts, so
an edge written between our read of the edges and our write makes us read again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graph_api import keys
from graph_api.errors import Conflict
from graph_api.items import ENROLMENT, MEMBERSHIP, TEACHING
from graph_api.keys import Key, Kind
from graph_api.store.codec import Item
from graph_api.store.table import Table
from graph_api.store.transactions import (
    MAX_ACTIONS,
    STALE,
    Action,
    Clause,
    Stale,
    new_token,
    transact,
    transact_each,
    update,
)
from graph_api.writes.base import EXISTS, Reads, key_of

CLAIM = "propagation"  # the token of the write whose copies are still being applied


@dataclass
class Copies:
    units: list[list[Action]] = field(default_factory=list)
    fences: list[Clause] = field(default_factory=list)

    def actions(self) -> list[Action]:
        return [action for unit in self.units for action in unit]


@dataclass(frozen=True)
class NodeWrite:
    """The update of the node whose fields are copied: guarded by what we read."""

    key: Key
    clauses: tuple[Clause, ...]
    assign: Mapping[str, Any]

    @classmethod
    def versioned(cls, node: Item, changes: Mapping[str, Any], copies: Copies) -> NodeWrite:
        """`changes` and a version bump, if the node is still the version we read and its
        edges still number what the copies were planned from."""
        return cls(
            key_of(node),
            (("eq", "version", node["version"]), *copies.fences),
            {**changes, "version": node["version"] + 1},
        )

    def action(self, claim: str | None) -> Action:
        if claim is None:  # applied whole: no claim, and any older one is void
            return update(
                self.key, *self.clauses, assign=self.assign, remove=[CLAIM], on_fail=STALE
            )
        return update(self.key, *self.clauses, assign={**self.assign, CLAIM: claim}, on_fail=STALE)


def _changed(copies: Mapping[str, str], changes: Mapping[str, Any]) -> dict[str, Any]:
    """Edge attribute -> new value, for the copied node attributes that change."""
    return {attr: changes[src] for attr, src in copies.items() if src in changes}


def _set_all(items: Sequence[Item], assign: Mapping[str, Any]) -> list[Action]:
    # Conditioned on `exists`: a copy must never resurrect an edge deleted meanwhile.
    return [update(key_of(item), EXISTS, assign=assign) for item in items]


async def student_copies(reads: Reads, student: Item, changes: Mapping[str, Any]) -> Copies:
    assign = _changed(ENROLMENT.owner_copies, changes)  # memberships and homes copy the same
    if not assign:
        return Copies()
    owned = await reads.partition(Kind.STUDENT, student["id"])
    edges = [i for i in owned if i["type"] in (ENROLMENT.name, MEMBERSHIP.name)]
    homes = [i for i in owned if i["type"] == "home"]
    return Copies(
        units=[_set_all(edges + homes, assign)],
        fences=[("eq", ENROLMENT.owner_count, len(edges))],
    )


async def class_copies(
    reads: Reads, klass: Item, changes: Mapping[str, Any], *, teaching: bool = True
) -> Copies:
    """Copies of a class's fields; `teaching=False` when the caller replaces that edge."""
    assign = _changed(ENROLMENT.target_copies, changes)
    if not assign:
        return Copies()
    enrolments = await reads.inverse(Kind.CLASS, klass["id"], Kind.STUDENT)
    if len(enrolments) != klass["studentCount"]:
        raise Stale()  # GSI1 has not caught up with the count yet: read again shortly
    actions = _set_all(enrolments, assign)
    if teaching:
        edge, _ = keys.edge(Kind.TEACHER, klass["teacherId"], Kind.CLASS, klass["id"])
        actions.append(update(edge, EXISTS, assign=_changed(TEACHING.target_copies, changes)))
    return Copies(units=[actions], fences=[("eq", "studentCount", len(enrolments))])


async def sport_copies(reads: Reads, sport: Item, changes: Mapping[str, Any]) -> Copies:
    assign = _changed(MEMBERSHIP.target_copies, changes)
    if not assign:
        return Copies()
    members = await reads.inverse(Kind.SPORT, sport["id"], Kind.STUDENT)
    if len(members) != sport["studentCount"]:
        raise Stale()
    return Copies(units=[_set_all(members, assign)], fences=[("eq", "studentCount", len(members))])


async def teacher_copies(reads: Reads, teacher: Item, changes: Mapping[str, Any]) -> Copies:
    if "name" not in changes:
        return Copies()
    owned = await reads.partition(Kind.TEACHER, teacher["id"])
    class_ids = [i["classId"] for i in owned if i["type"] == TEACHING.name]
    copies = Copies(fences=[("eq", TEACHING.owner_count, len(class_ids))])
    for klass in await reads.nodes(Kind.CLASS, class_ids):
        inner = await class_copies(reads, klass, {"teacherName": changes["name"]})
        # The class first: enrolments from then on copy the new name from it.
        own = update(
            key_of(klass),
            EXISTS,
            *inner.fences,
            assign={"teacherName": changes["name"]},
            on_fail=STALE,
        )
        copies.units.append([own, *inner.actions()])
    return copies


async def write(table: Table, node: NodeWrite, head: Sequence[Action], copies: Copies) -> None:
    """Apply a node write and its copies: atomically when they fit one transaction."""
    rest = copies.actions()
    if 1 + len(head) + len(rest) <= MAX_ACTIONS:
        await transact(table, [node.action(claim=None), *head, *rest])
        return
    token = new_token()
    first = [node.action(claim=token), *head]
    room = MAX_ACTIONS - len(first)
    await transact(table, first + rest[:room], token)
    if await transact_each(table, node.key, (CLAIM, token), rest[room:], token):
        # Done and still ours: release the claim (a newer write may have taken it since).
        release = update(node.key, ("eq", CLAIM, token), remove=[CLAIM])
        with contextlib.suppress(Conflict):
            await transact(table, [release])
