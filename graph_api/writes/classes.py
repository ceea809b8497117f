"""Classes: create under a teacher, update (subject or teacher; copies follow), delete."""

from __future__ import annotations

from typing import Any

from graph_api.errors import AlreadyExists, BadUserInput, Conflict
from graph_api.model import ids, items, keys
from graph_api.model.items import TEACHING
from graph_api.model.keys import Kind

# The update and delete actions as tx.update, tx.delete: this module's writers have those names
from graph_api.store import transactions as tx
from graph_api.store.codec import Item
from graph_api.store.table import Table
from graph_api.store.transactions import NOT_EXISTS, STALE, Action, Stale, put, transact
from graph_api.writes import counts, guards, propagation, roster_shards
from graph_api.writes.attempts import retrying
from graph_api.writes.guards import Guard
from graph_api.writes.reads import Reads, key_of
from graph_api.writes.versions import expect_version


def _join_teacher(teacher: Item, klass: Item) -> Action:
    """The teacher's entry for the class and its count, guarded by the name the class copied
    and by the bound on a teacher's classes."""
    if len(TEACHING.entries(teacher)) >= TEACHING.limit:
        raise BadUserInput(
            f"teacher {teacher['id']} already teaches {TEACHING.limit} classes,"
            " the most one teacher can",
            field="teacherId",
        )
    return tx.update(
        key_of(teacher),
        ("eq", "name", teacher["name"]),
        ("size_lt", TEACHING.field, TEACHING.limit),
        assign={TEACHING.path(klass["id"]): TEACHING.entry_of(klass)},
        add={TEACHING.owner_count: 1},
        on_fail=STALE,
    )


def _leave_teacher(teacher_id: str, class_id: str, on_fail: Conflict | Stale) -> Action:
    return tx.update(
        keys.node(Kind.TEACHER, teacher_id),
        ("gt", TEACHING.owner_count, 0),
        remove=[TEACHING.path(class_id)],
        add={TEACHING.owner_count: -1},
        on_fail=on_fail,
    )


async def create(table: Table, id_: str | None, subject: str, teacher_id: str) -> str:
    class_id = keys.check_id(id_) if id_ is not None else ids.new_id()
    reads = Reads(table)

    async def attempt() -> str:
        teacher = await reads.node(Kind.TEACHER, teacher_id, field="teacherId")
        klass = items.school_class(class_id, subject, teacher)
        exists = AlreadyExists(f"class {class_id} already exists", field="id")
        await transact(
            table,
            [
                put(klass, NOT_EXISTS, on_fail=exists),
                _join_teacher(teacher, klass),
                *counts.moved(None, klass),
                *roster_shards.made(Kind.CLASS, klass),
            ],
        )
        return class_id

    return await retrying(table, attempt)


async def update(
    table: Table,
    id_: str,
    subject: str | None,
    teacher_id: str | None,
    expected: int | None,
    guard: Guard | None = None,
) -> str:
    """`guard`: the class must meet it as read and when the write commits (FORBIDDEN)."""
    if teacher_id is not None:
        keys.check_id(teacher_id, "teacherId")  # before any read
    reads = Reads(table)

    async def attempt() -> str:
        klass = await reads.node(Kind.CLASS, id_)
        if guard is not None:
            guard.check(klass)
        expect_version(klass, expected)
        changes: dict[str, Any] = {}  # sent fields are propagated even when unchanged
        if subject is not None:
            changes["subject"] = subject
        moving = teacher_id is not None and teacher_id != klass["teacherId"]
        head: list[Action] = []
        if teacher_id is not None:
            teacher = await reads.node(Kind.TEACHER, teacher_id, field="teacherId")
            # The name we copy must still be the teacher's when we write: the teacher's entry
            # (moving: `_join_teacher`; else the copies' first action) is guarded by it.
            changes.update(teacherId=teacher["id"], teacherName=teacher["name"])
        if moving:
            head += [
                _leave_teacher(klass["teacherId"], id_, STALE),
                _join_teacher(teacher, {**klass, **changes}),
            ]
        await propagation.update_node(
            reads, Kind.CLASS, klass, changes, head, moving=moving, guard=guards.clauses(guard)
        )
        return id_

    return await retrying(table, attempt)


async def delete(table: Table, id_: str) -> str:
    reads = Reads(table)

    async def attempt() -> str:
        klass = await reads.node(Kind.CLASS, id_)
        per_shard = await roster_shards.counts(reads, Kind.CLASS, klass)
        enrolled = klass.get("studentCount", 0) + sum(per_shard or ())
        busy = Conflict(
            f"class {id_} still has {enrolled} student(s): unenroll them first (unenrollStudent)",
            id=id_,
        )
        if enrolled:
            raise busy
        # Its roster counter's shards go with it, each still counting what we read (a link
        # since then moved one: read again); a class of the layout before may have stamped
        # shards without counts, which go too.
        shards = roster_shards.shards(Kind.CLASS, id_)
        if per_shard is None:
            gone = [tx.delete(key) for key in shards]
        else:
            gone = [
                tx.delete(key, roster_shards.fence(n), on_fail=STALE)
                for key, n in zip(shards, per_shard, strict=True)
            ]
        teacher_id = klass["teacherId"]
        damaged = Conflict(f"teacher {teacher_id} counts no classes; run graph-api check")
        await transact(
            table,
            [
                # The version fences out a move to another teacher committed since our read,
                # the teacher a class deleted and made again (at version 1) with another;
                # an enrolment since then fails the count, and the next read says CONFLICT.
                tx.delete(
                    key_of(klass),
                    ("eq", "version", klass["version"]),
                    ("eq", "teacherId", teacher_id),
                    ("zero_or_missing", "studentCount"),
                    on_fail=STALE,
                ),
                _leave_teacher(teacher_id, id_, damaged),
                *counts.moved(klass, None),
                *gone,
            ],
        )
        return id_

    return await retrying(table, attempt)
