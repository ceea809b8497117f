"""Students: create (with email guard and home), update (rename propagates), home, delete."""

from __future__ import annotations

from dataclasses import dataclass

from graph_api import ids, items, keys
from graph_api.errors import AlreadyExists, Conflict
from graph_api.items import ENROLMENT, MEMBERSHIP
from graph_api.keys import Kind
from graph_api.store.table import Table
from graph_api.store.transactions import MAX_ACTIONS, STALE, Action, delete, put, transact, update
from graph_api.writes import propagation
from graph_api.writes.base import NOT_EXISTS, Reads, expect_version, key_of, retrying


@dataclass(frozen=True)
class Place:
    country: str
    state: str
    city: str
    street: str | None = None


def _taken(email: str) -> AlreadyExists:
    return AlreadyExists(f"email {email} belongs to another student", field="email")


def _release_guard(email: str, student_id: str) -> Action:
    # Only the student's own guard; a missing one (a damaged table) is no reason to fail.
    return delete(keys.email_guard(email), ("owned_by", "studentId", student_id))


async def create(table: Table, id_: str | None, name: str, email: str, home: Place | None) -> str:
    student_id = keys.check_id(id_) if id_ is not None else ids.new_id()
    node = items.student(student_id, name, email)
    actions = [
        put(
            node,
            NOT_EXISTS,
            on_fail=AlreadyExists(f"student {student_id} already exists", field="id"),
        ),
        put(items.email_guard(node), NOT_EXISTS, on_fail=_taken(email)),
    ]
    if home is not None:
        actions.append(put(items.home(node, home.country, home.state, home.city, home.street)))
    await transact(table, actions)
    return student_id


async def update_student(
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


async def set_home(table: Table, student_id: str, home: Place | None) -> str:
    reads = Reads(table)

    async def attempt() -> str:
        node = await reads.node(Kind.STUDENT, student_id, field="studentId")
        version = node["version"]
        bump = update(
            key_of(node), ("eq", "version", version), assign={"version": version + 1}, on_fail=STALE
        )
        if home is None:
            change = delete(keys.home(student_id))
        else:
            change = put(items.home(node, home.country, home.state, home.city, home.street))
        await transact(table, [bump, change])
        return student_id

    return await retrying(table, attempt)


async def delete_student(table: Table, id_: str) -> str:
    """Remove the student, its home, its email guard and its edges; move the counters."""
    reads = Reads(table)

    async def attempt() -> str:
        node = await reads.node(Kind.STUDENT, id_)
        owned = await reads.partition(Kind.STUDENT, id_)
        edges = [i for i in owned if i["type"] in (ENROLMENT.name, MEMBERSHIP.name)]
        unlinks: list[Action] = []
        for edge in edges:
            kind = Kind.CLASS if edge["type"] == ENROLMENT.name else Kind.SPORT
            target_id = edge.get("classId") or edge["sportId"]
            # Messages name ids, never keys.
            damaged = f"{kind.lower()} {target_id} counts no students; run graph-api check"
            unlinks += [
                delete(key_of(edge), ("exists",), on_fail=STALE),
                update(
                    keys.node(kind, target_id),
                    ("gt", "studentCount", 0),
                    add={"studentCount": -1},
                    on_fail=Conflict(damaged, id=target_id),
                ),
            ]
        last = [
            # The version fences out an email change (whose guard we would miss) and the
            # count an enrolment, each committed since our read.
            delete(
                key_of(node),
                ("eq", "version", node["version"]),
                ("eq", "edgeCount", len(edges)),
                on_fail=STALE,
            ),
            delete(keys.home(id_)),
            _release_guard(node["email"], id_),
        ]
        # A student with more edges than fit one transaction sheds them in chunks first,
        # each chunk moving the student's own count with it; the node goes last.
        room = MAX_ACTIONS - 1
        while len(unlinks) > MAX_ACTIONS - len(last):
            chunk, unlinks = unlinks[: room - room % 2], unlinks[room - room % 2 :]
            shed = update(key_of(node), ("exists",), add={"edgeCount": -(len(chunk) // 2)})
            await transact(table, [shed, *chunk])
            last[0] = delete(
                key_of(node),
                ("eq", "version", node["version"]),
                ("eq", "edgeCount", len(unlinks) // 2),
                on_fail=STALE,
            )
        await transact(table, [*last, *unlinks])
        return id_

    return await retrying(table, attempt)
