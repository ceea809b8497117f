"""Students: create (with email guard and home), update (rename propagates), home, delete."""

from __future__ import annotations

from graph_api.errors import AlreadyExists, Conflict
from graph_api.model import ids, items, keys
from graph_api.model.items import ENROLMENT, MEMBERSHIP, Place, Relation
from graph_api.model.keys import Kind

# The update and delete actions as tx.update, tx.delete: this module's writers have those names
from graph_api.store import transactions as tx
from graph_api.store.codec import Item
from graph_api.store.table import Table
from graph_api.store.transactions import (
    EXISTS,
    MAX_ACTIONS,
    NOT_EXISTS,
    STALE,
    Action,
    Clause,
    Stale,
    put,
    transact,
)
from graph_api.writes import counts, propagation, roster_shards
from graph_api.writes.attempts import retrying
from graph_api.writes.reads import Reads, key_of
from graph_api.writes.versions import expect_version


def _taken(email: str) -> AlreadyExists:
    return AlreadyExists(f"email {email} belongs to another student", field="email")


def _release_guard(email: str, student_id: str) -> Action:
    # Only the student's own guard; a missing one (a damaged table) is no reason to fail.
    return tx.delete(keys.email_guard(email), ("owned_by", "studentId", student_id))


async def create(table: Table, id_: str | None, name: str, email: str, home: Place | None) -> str:
    student_id = keys.check_id(id_) if id_ is not None else ids.new_id()
    node = items.student(student_id, name, email, home)
    exists = AlreadyExists(f"student {student_id} already exists", field="id")
    await transact(
        table,
        [
            put(node, NOT_EXISTS, on_fail=exists),
            put(items.email_guard(node), NOT_EXISTS, on_fail=_taken(email)),
            *counts.moved(None, node),
        ],
    )
    return student_id


async def update(
    table: Table, id_: str, name: str | None, email: str | None, expected: int | None
) -> str:
    reads = Reads(table)

    async def attempt() -> str:
        node = await reads.node(Kind.STUDENT, id_)
        expect_version(node, expected)
        # Sent fields are written and propagated even when unchanged: sending an update
        # again completes copies an interrupted one left behind.
        changes = {k: v for k, v in (("name", name), ("email", email)) if v is not None}
        head: list[Action] = []
        if email is not None and keys.normalize_email(email) != keys.normalize_email(node["email"]):
            head += [
                _release_guard(node["email"], id_),
                put(items.email_guard({**node, **changes}), NOT_EXISTS, on_fail=_taken(email)),
            ]
        await propagation.update_node(reads, Kind.STUDENT, node, changes, head)
        return id_

    return await retrying(table, attempt)


def _as_read(node: Item, *fields: str) -> list[Clause]:
    """The student as read, in what its counters (and guard) depend on: its version (every
    home change bumps it), and its `fields` (a student deleted and made again starts at
    version 1 again, maybe elsewhere); absent ones still absent."""
    clauses: list[Clause] = [EXISTS, ("eq", "version", node["version"])]
    for name in fields:
        clauses.append(("eq", name, node[name]) if name in node else ("lacks", name))
    return clauses


async def set_home(table: Table, student_id: str, home: Place | None) -> str:
    """Set or clear the home map and, with it, the student's place in the location index
    and the counts of the places it leaves and joins: the student read, then one update
    conditioned on the student as read (`_as_read`) beside the counters'."""
    keys.check_id(student_id, "studentId")
    reads = Reads(table)

    async def attempt() -> str:
        node = await reads.node(Kind.STUDENT, student_id, field="studentId")
        fence = _as_read(node, *items.LOCATION_KEYS)
        bump = {"version": 1}
        if home is None:
            remove = [items.HOME, *items.LOCATION_KEYS]
            change = tx.update(key_of(node), *fence, remove=remove, add=bump, on_fail=STALE)
            after = {k: v for k, v in node.items() if k != items.HOME}
        else:
            assign = items.home_attributes(student_id, home)
            change = tx.update(key_of(node), *fence, assign=assign, add=bump, on_fail=STALE)
            after = {**node, **assign}
        await transact(table, [change, *counts.moved(node, after)])
        return student_id

    return await retrying(table, attempt)


async def delete(table: Table, id_: str) -> str:
    """Remove the student, its email guard and its edge items; move the counters."""
    reads = Reads(table)
    # Classes and sports found keeping their count on their item (not migrated): their
    # counts move there. Any other's count moves in its shard, which fails for such a node
    # (it has no count there): the attempt then reads them and tries again.
    on_items: set[tuple[Kind, str]] = set()

    async def attempt() -> str:
        node = await reads.node(Kind.STUDENT, id_)
        try:
            return await _delete(node)
        except Stale:
            on_items.clear()
            for relation in (ENROLMENT, MEMBERSHIP):
                if ids := sorted(relation.entries(node)):
                    targets = await reads.nodes(relation.target, ids)
                    on_items.update(
                        (relation.target, t["id"])
                        for t in targets
                        if not items.in_sharded_layout(relation, t)
                    )
                    sharded = [t["id"] for t in targets if items.in_sharded_layout(relation, t)]
                    await _no_damaged_shard(relation, sharded)
            raise

    async def _no_damaged_shard(relation: Relation, target_ids: list[str]) -> None:
        # A shard counting no one while this student's edge is on it was damaged behind the
        # API's back: the delete cannot move it, and says so rather than retry.
        wanted = {roster_shards.shard_of(relation, t, id_): t for t in target_ids}
        found = await reads.table.get_many(wanted, consistent=True)
        for key, target_id in wanted.items():
            shard = found.get(key)
            if shard is not None and int(shard.get(items.COUNT, 0)) <= 0:
                raise Conflict(_damaged(relation, target_id), id=target_id)

    async def _delete(node: Item) -> str:
        unlinks: list[tuple[tuple[str, ...], list[Action]]] = []  # (map entry, its actions)
        for relation in (ENROLMENT, MEMBERSHIP):
            for target_id in relation.entries(node):
                edge, _ = keys.edge(Kind.STUDENT, id_, relation.target, target_id)
                count = tx.update(
                    keys.node(relation.target, target_id),
                    ("gt", "studentCount", 0),
                    add={"studentCount": -1},
                    on_fail=Conflict(_damaged(relation, target_id), id=target_id),
                )
                if relation.sharded and (relation.target, target_id) not in on_items:
                    at_least_one = ("gt", items.COUNT, 0)
                    count = roster_shards.leave(relation, target_id, id_, (at_least_one,))
                actions = [tx.delete(edge, EXISTS, on_fail=STALE), count]
                unlinks.append((relation.path(target_id), actions))

        # The node's home and its counters: a home changed since our read fails the version.
        uncount = counts.moved(node, None)

        def last(remaining: int) -> list[Action]:
            # The student as read fences out an email change (whose guard we would miss),
            # a move (whose counters we would miss), and the count a link or unlink, each
            # committed since our read.
            return [
                tx.delete(
                    key_of(node),
                    *_as_read(node, "email", *items.LOCATION_KEYS),
                    ("eq", "edgeCount", remaining),
                    on_fail=STALE,
                ),
                _release_guard(node["email"], id_),
                *uncount,
            ]

        # A student with more edges than fit one transaction sheds them in chunks first,
        # each chunk removing its entries and moving the student's count with it; the node
        # goes last.
        per_chunk = (MAX_ACTIONS - 1) // 2
        while len(unlinks) * 2 > MAX_ACTIONS - len(last(0)):
            chunk, unlinks = unlinks[:per_chunk], unlinks[per_chunk:]
            shed = tx.update(
                key_of(node),
                EXISTS,
                remove=[path for path, _ in chunk],
                add={"edgeCount": -len(chunk)},
            )
            await transact(table, [shed, *(a for _, actions in chunk for a in actions)])
        await transact(table, [*last(len(unlinks)), *(a for _, acts in unlinks for a in acts)])
        return id_

    return await retrying(table, attempt)


def _damaged(relation: Relation, target_id: str) -> str:
    """A count that cannot move below zero, named by id (messages never name keys)."""
    return f"{relation.target.lower()} {target_id} counts no students; run graph-api check"
