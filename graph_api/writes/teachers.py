"""Teachers: create, rename (reaching every class and enrolment that copies the name), delete."""

from __future__ import annotations

from graph_api.errors import AlreadyExists
from graph_api.model import ids, items, keys
from graph_api.model.keys import Kind
from graph_api.store.table import Table
from graph_api.store.transactions import NOT_EXISTS, put, transact
from graph_api.writes import counts, propagation
from graph_api.writes.attempts import retrying
from graph_api.writes.deletion import delete_if_unlinked
from graph_api.writes.reads import Reads
from graph_api.writes.versions import expect_version


async def create(table: Table, id_: str | None, name: str) -> str:
    teacher_id = keys.check_id(id_) if id_ is not None else ids.new_id()
    exists = AlreadyExists(f"teacher {teacher_id} already exists", field="id")
    node = items.teacher(teacher_id, name)
    await transact(table, [put(node, NOT_EXISTS, on_fail=exists), *counts.moved(None, node)])
    return teacher_id


async def update(table: Table, id_: str, name: str | None, expected: int | None) -> str:
    reads = Reads(table)

    async def attempt() -> str:
        node = await reads.node(Kind.TEACHER, id_)
        expect_version(node, expected)
        changes = {"name": name} if name is not None else {}  # sent: propagated (resumes)
        await propagation.update_node(reads, Kind.TEACHER, node, changes)
        return id_

    return await retrying(table, attempt)


async def delete(table: Table, id_: str) -> str:
    busy = (
        f"teacher {id_} still teaches {{count}} class(es):"
        " delete them or give them another teacher first"
    )
    return await delete_if_unlinked(table, Kind.TEACHER, id_, "classCount", busy)
