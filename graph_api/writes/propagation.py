"""Renames reach every denormalized copy (see the copy table in schema/table.md).

A node's write is planned as `head` (the node itself, with its guards) plus `Copies`:
`nodes`, copies on other nodes that must change with it (a class's `teacherName`), and
`edges`, copies on edge items. Everything goes in one transaction when it fits. When it does
not, the head and the node copies go first (so every later enrolment copies the new
values: enrolments condition on the class's copied fields), then the edge copies follow in
idempotent chunks; a retry (or `updateX` again) resumes them.

Every plan carries fences: conditions that the edge counts we saw are still the counts, so
an edge written between our read of the edges and our write makes us read again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graph_api import keys
from graph_api.items import ENROLMENT, MEMBERSHIP, TEACHING
from graph_api.keys import Kind
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


@dataclass
class Copies:
    nodes: list[Action] = field(default_factory=list)
    edges: list[Action] = field(default_factory=list)
    fences: list[Clause] = field(default_factory=list)


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
        edges=_set_all(edges + homes, assign),
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
    return Copies(edges=actions, fences=[("eq", "studentCount", len(enrolments))])


async def sport_copies(reads: Reads, sport: Item, changes: Mapping[str, Any]) -> Copies:
    assign = _changed(MEMBERSHIP.target_copies, changes)
    if not assign:
        return Copies()
    members = await reads.inverse(Kind.SPORT, sport["id"], Kind.STUDENT)
    if len(members) != sport["studentCount"]:
        raise Stale()
    return Copies(edges=_set_all(members, assign), fences=[("eq", "studentCount", len(members))])


async def teacher_copies(reads: Reads, teacher: Item, changes: Mapping[str, Any]) -> Copies:
    if "name" not in changes:
        return Copies()
    owned = await reads.partition(Kind.TEACHER, teacher["id"])
    class_ids = [i["classId"] for i in owned if i["type"] == TEACHING.name]
    copies = Copies(fences=[("eq", TEACHING.owner_count, len(class_ids))])
    for klass in await reads.nodes(Kind.CLASS, class_ids):
        inner = await class_copies(reads, klass, {"teacherName": changes["name"]})
        copies.nodes.append(
            update(
                key_of(klass),
                EXISTS,
                *inner.fences,
                assign={"teacherName": changes["name"]},
                on_fail=STALE,
            )
        )
        copies.edges += inner.edges
    return copies


async def write(table: Table, head: Sequence[Action], copies: Copies) -> None:
    """Apply a node write and its copies: atomically when they fit one transaction."""
    first = [*head, *copies.nodes]
    room = MAX_ACTIONS - len(first)
    if room < 0:
        raise ValueError(f"{len(first)} node writes do not fit one transaction")
    token = new_token()
    await transact(table, first + copies.edges[:room], token)
    if len(copies.edges) > room:
        await transact_each(table, copies.edges[room:], token)
