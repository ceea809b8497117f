"""A class's roster count in shards: enrolments write no class item, every count
still equals a full read, a rename that meets an enrolment still reaches its copy, and
`graph-api migrate` moves a table's class counts into shards while old code writes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from racing import all_ok, execute_concurrently
from support import (
    ENROLL_MIN,
    assert_clean,
    awaited,
    class_students,
    create_class,
    create_sport,
    create_student,
    create_teacher,
    get_item,
    ok,
    run,
    scan,
    single_user_error,
    unenroll,
)

from graph_api.errors import Forbidden
from graph_api.graph.engine.context import Services
from graph_api.model import items, keys
from graph_api.model.keys import Kind
from graph_api.ops import migrate
from graph_api.ops.check import check_table
from graph_api.store import transactions as tx
from graph_api.store.table import Table
from graph_api.writes import classes, memberships, roster_shards, sports, teachers
from graph_api.writes.guards import Guard

COUNTS = 'query { class(id: "c1") { studentCount students { totalCount } } }'


def write(svc: Services, writer: Any) -> Any:
    """Run a writer (`writes/*.py`) on a table handle of its own, as a request would."""

    async def run_it() -> Any:
        return await writer(Table(svc.dynamo, svc.settings.table, deadline=time.monotonic() + 60))

    return asyncio.run(run_it())


def enrolments(svc: Services, students: int, class_id: str = "c1") -> list[Any]:
    for n in range(students):
        create_student(svc, id=f"s{n:02d}", name=f"S{n}")
    return [(ENROLL_MIN, {"s": f"s{n:02d}", "c": class_id}) for n in range(students)]


def assert_counted(svc: Services, students: int) -> None:
    """studentCount and totalCount are a full read of the roster, and check is clean."""
    counts = ok(svc, COUNTS)["class"]
    assert counts["studentCount"] == counts["students"]["totalCount"]
    assert counts["studentCount"] == len(class_students(svc, "c1")) == students
    assert_clean(svc)


@pytest.fixture
def touched(monkeypatch: pytest.MonkeyPatch) -> list[set[tuple[str, str]]]:
    """The items each transaction sent touches, in order."""
    sent: list[set[tuple[str, str]]] = []
    original = tx._apply

    async def recorded(table: Any, actions: Any, token: str) -> None:
        sent.append({tx._item_of(table.name, a)[1:] for a in actions})
        await original(table, actions, token)

    monkeypatch.setattr(tx, "_apply", recorded)
    return sent


def test_enrolments_and_unenrolments_write_no_class_item_and_count_exactly(
    svc: Services, touched: list[set[tuple[str, str]]]
) -> None:
    """24 enrolments into one class at once, then 8 unenrolments: no transaction touches the
    class item (before: every one added to its studentCount), they spread over its shards,
    and the counts equal a full read."""
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    operations = enrolments(svc, 24)
    touched.clear()
    all_ok(execute_concurrently(svc, operations))
    for n in range(8):
        assert unenroll(svc, f"s{n:02d}", "c1").problems == []
    class_key = tuple(keys.node(Kind.CLASS, "c1"))
    assert len(touched) == 24 + 8 and not [t for t in touched if class_key in t]
    klass = get_item(svc, *class_key)
    assert klass is not None and "studentCount" not in klass and klass["version"] == 1
    shards = [get_item(svc, *key) for key in roster_shards.shards(Kind.CLASS, "c1")]
    moves = [int(s.get(items.MOVES, 0)) for s in shards if s is not None]
    assert len(moves) == keys.ROSTER_SHARDS and sum(moves) == 24 + 8
    assert max(moves) < sum(moves) // 2, moves  # spread over the shards
    assert_counted(svc, 16)


def test_a_rename_committed_between_an_enrolments_read_and_write_reaches_its_copy(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enrolment read the old subject; the rename commits before its transaction: the
    shard (which the rename stamped) refuses the enrolment, which reads again and copies the
    new subject. And a teacher's rename in the same place: the new name."""
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1", subject="Old")
    create_student(svc, id="s00", name="S0")
    create_student(svc, id="s01", name="S1")
    original = memberships.transact
    renames = [
        lambda table: classes.update(table, "c1", "New", None, None),
        lambda table: teachers.update(table, "t1", "Renamed", None),
    ]

    async def rename_first(table: Any, actions: Any, token: str | None = None) -> None:
        if renames:
            await renames.pop(0)(table)
        await original(table, actions, token)

    monkeypatch.setattr(memberships, "transact", rename_first)
    for student in ("s00", "s01"):
        all_ok(execute_concurrently(svc, [(ENROLL_MIN, {"s": student, "c": "c1"})]))
    entries = [get_item(svc, *keys.node(Kind.STUDENT, s)) for s in ("s00", "s01")]
    copied = [e["classes"]["c1"] for e in entries if e is not None]
    assert [(c["subject"], c["teacherName"]) for c in copied] == [("New", "Renamed")] * 2
    assert_counted(svc, 2)


def test_an_enrolment_racing_the_class_s_delete_either_lands_or_finds_no_class(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class is deleted between the enrolment's read and its transaction: its shards went
    with it, so the enrolment reads again and says NOT_FOUND; no edge is left behind."""
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_student(svc, id="s00", name="S0")
    original = memberships.transact
    deleted: list[bool] = []

    async def delete_first(table: Any, actions: Any, token: str | None = None) -> None:
        if not deleted:
            deleted.append(True)
            await classes.delete(table, "c1")
        await original(table, actions, token)

    monkeypatch.setattr(memberships, "transact", delete_first)
    result = execute_concurrently(svc, [(ENROLL_MIN, {"s": "s00", "c": "c1"})])[0]
    assert single_user_error(result, "NOT_FOUND")["field"] == "classId"
    assert [i for i in scan(svc) if keys.roster_counted(keys.Key(i["PK"], i["SK"]))] == []
    assert_clean(svc)


def test_a_class_with_students_is_not_deleted_and_an_empty_one_takes_its_shards(
    svc: Services,
) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    all_ok(execute_concurrently(svc, enrolments(svc, 3)))
    delete = 'mutation { deleteClass(id: "c1") { userErrors { code message } } }'
    refused = single_user_error(run(svc, delete), "CONFLICT")
    assert "still has 3 student(s)" in refused["message"]
    for n in range(3):
        assert unenroll(svc, f"s{n:02d}", "c1").problems == []
    assert ok(svc, delete)["deleteClass"]["userErrors"] == []
    assert [i for i in scan(svc) if keys.roster_counted(keys.Key(i["PK"], i["SK"]))] == []
    assert_clean(svc)


def _to_layout_before(svc: Services, class_id: str) -> None:
    """The class as the code before roster shards left it: its count on its item, no shards."""
    shards = roster_shards.shards(Kind.CLASS, class_id)
    count = sum(int((get_item(svc, *k) or {}).get(items.COUNT, 0)) for k in shards)
    actions = [tx.delete(key) for key in shards]
    node = keys.node(Kind.CLASS, class_id)
    actions.append(tx.update(node, assign={"studentCount": count}))
    awaited(migrate.transact(svc.dynamo, svc.settings.table, actions))


def _old_code_enrols(svc: Services, student_id: str, class_id: str) -> None:
    """An enrolment as an instance of the code before roster shards makes it: the class's count
    on its item, conditioned on the class."""
    student = get_item(svc, *keys.node(Kind.STUDENT, student_id))
    klass = get_item(svc, *keys.node(Kind.CLASS, class_id))
    assert student is not None and klass is not None
    relation = items.ENROLMENT
    actions = [
        tx.put(relation.edge_item(student, klass), tx.NOT_EXISTS),
        tx.update(keys.node(Kind.CLASS, class_id), tx.EXISTS, add={"studentCount": 1}),
        tx.update(
            keys.node(Kind.STUDENT, student_id),
            assign={relation.path(class_id): relation.entry_of(klass)},
            add={relation.owner_count: 1},
        ),
    ]
    awaited(migrate.transact(svc.dynamo, svc.settings.table, actions))


def test_migrate_moves_class_counts_into_shards_while_old_and_new_code_enrol(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class of the layout before reads and takes enrolments (new code writes its item
    while it has no shards); migrate moves its count into shards, and an old instance's
    enrolment between migrate's scan and its move refuses the move, which is planned again:
    nothing lost or counted twice, and new code then writes shards only."""
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    all_ok(execute_concurrently(svc, enrolments(svc, 10)[:4]))
    _to_layout_before(svc, "c1")
    assert {f.kind for f in awaited(check_table(svc.dynamo, svc.settings.table))} == {"old-layout"}
    assert ok(svc, COUNTS)["class"]["studentCount"] == 4
    all_ok(execute_concurrently(svc, [(ENROLL_MIN, {"s": "s04", "c": "c1"})]))  # new code
    assert unenroll(svc, "s00", "c1").problems == []
    _old_code_enrols(svc, "s05", "c1")
    assert ok(svc, COUNTS)["class"] == {"studentCount": 5, "students": {"totalCount": 5}}
    delete = 'mutation { deleteStudent(id: "s01") { userErrors { code } } }'
    assert ok(svc, delete)["deleteStudent"]["userErrors"] == []  # its count: on the item
    create_student(svc, id="s01", name="S1")
    all_ok(execute_concurrently(svc, [(ENROLL_MIN, {"s": "s01", "c": "c1"})]))
    assert ok(svc, COUNTS)["class"] == {"studentCount": 5, "students": {"totalCount": 5}}

    original, moves = migrate.transact, []

    async def transact(dynamo: Any, table: str, actions: list[tx.Action]) -> None:
        if len(actions) == 1 + keys.ROSTER_SHARDS and not moves:
            moves.append(True)  # an instance of the old code enrols before the first move
            await asyncio.to_thread(_old_code_enrols, svc, "s06", "c1")
        await original(dynamo, table, actions)

    monkeypatch.setattr(migrate, "transact", transact)
    report = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table))
    assert report.complete and report.rosters == 1 and report.scans == 2
    klass = get_item(svc, *keys.node(Kind.CLASS, "c1"))
    assert klass is not None and "studentCount" not in klass
    assert_counted(svc, 6)
    all_ok(execute_concurrently(svc, [(ENROLL_MIN, {"s": f"s{n:02d}", "c": "c1"}) for n in (7, 8)]))
    assert unenroll(svc, "s05", "c1").problems == []
    assert_counted(svc, 7)
    again = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table))
    assert again.complete and again.transactions == 0


def test_a_class_handed_over_stamps_its_shards_and_its_new_teacher_enrols(
    svc: Services,
) -> None:
    """A class moved to another teacher: the shards carry the new teacher (the owner guard
    of a teacher's enrolment conditions on them), the old one's guard fails."""
    create_teacher(svc, "t1")
    create_teacher(svc, "t2")
    create_class(svc, "c1", "t1")
    all_ok(execute_concurrently(svc, enrolments(svc, 3)))
    create_student(svc, id="s09", name="S9")
    write(svc, lambda table: classes.update(table, "c1", None, "t2", None))
    shards = [get_item(svc, *k) for k in roster_shards.shards(Kind.CLASS, "c1")]
    assert {s["teacherId"] for s in shards if s is not None} == {"t2"}
    with pytest.raises(Forbidden, match="not taught by the caller"):
        write(svc, lambda table: memberships.link(table, items.ENROLMENT, "s09", "c1", Guard("t1")))
    with pytest.raises(Forbidden, match="not taught by the caller"):
        write(
            svc, lambda table: memberships.unlink(table, items.ENROLMENT, "s00", "c1", Guard("t1"))
        )
    write(svc, lambda table: memberships.unlink(table, items.ENROLMENT, "s00", "c1", Guard("t2")))
    assert_counted(svc, 2)


def test_a_teacher_rename_too_big_for_one_transaction_stamps_each_class_with_its_shards(
    svc: Services, touched: list[set[tuple[str, str]]]
) -> None:
    """14 classes with their 8 shards each cannot be renamed in one transaction: each class
    is renamed in the same transaction as its shards' stamps, never before them (a link in
    between met a renamed class whose shards still held the old name, and failed on them
    until it gave up)."""
    create_teacher(svc, "t1")
    class_ids = [f"c{n:02d}" for n in range(14)]
    for class_id in class_ids:
        create_class(svc, class_id, "t1")
    touched.clear()
    write(svc, lambda table: teachers.update(table, "t1", "Renamed", None))
    for class_id in class_ids:
        class_key = tuple(keys.node(Kind.CLASS, class_id))
        shard_keys = {tuple(k) for k in roster_shards.shards(Kind.CLASS, class_id)}
        renamed = [t for t in touched if class_key in t]
        stamped = [t for t in touched if shard_keys & t]
        assert len(renamed) == 1 and stamped == renamed and shard_keys <= renamed[0]
        shards = [get_item(svc, *k) for k in shard_keys]
        assert {s["teacherName"] for s in shards if s is not None} == {"Renamed"}
    assert len(touched) > 1  # followed: more than one transaction
    assert_clean(svc)


SPORT_COUNTS = 'query { sport(id: "p1") { studentCount students { totalCount } } }'
JOIN = """mutation($s: ID!, $p: ID!) {
  joinSport(studentId: $s, sportId: $p) { sport { id } userErrors { code } } }"""


def test_memberships_write_no_sport_item_and_a_rename_between_read_and_write_reaches_them(
    svc: Services, touched: list[set[tuple[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sport counts its members in roster shards too: 12 memberships at once touch no sport
    item (before: each added to its studentCount, and rewrote its catalog entry); a rename
    committed between a membership's read and its write is copied; an empty sport's delete
    takes its shards."""
    create_sport(svc, "p1", name="Chess")
    for n in range(13):
        create_student(svc, id=f"s{n:02d}", name=f"S{n}")
    touched.clear()
    all_ok(execute_concurrently(svc, [(JOIN, {"s": f"s{n:02d}", "p": "p1"}) for n in range(12)]))
    sport_key = tuple(keys.node(Kind.SPORT, "p1"))
    assert len(touched) == 12 and not [t for t in touched if sport_key in t]
    original = memberships.transact
    renamed: list[bool] = []

    async def rename_first(table: Any, actions: Any, token: str | None = None) -> None:
        if not renamed:
            renamed.append(True)
            await sports.update(table, "p1", "Go", sports.UNSET, None)
        await original(table, actions, token)

    monkeypatch.setattr(memberships, "transact", rename_first)
    all_ok(execute_concurrently(svc, [(JOIN, {"s": "s12", "p": "p1"})]))
    student = get_item(svc, *keys.node(Kind.STUDENT, "s12"))
    assert student is not None and student["sports"]["p1"] == {"name": "Go"}
    counts = ok(svc, SPORT_COUNTS)["sport"]
    assert counts == {"studentCount": 13, "students": {"totalCount": 13}}
    assert_clean(svc)
    leave = """mutation($s: ID!) { leaveSport(studentId: $s, sportId: "p1") {
      userErrors { code } } }"""
    all_ok(execute_concurrently(svc, [(leave, {"s": f"s{n:02d}"}) for n in range(13)]))
    assert ok(svc, 'mutation { deleteSport(id: "p1") { userErrors { code } } }')
    assert [i for i in scan(svc) if keys.roster_counted(keys.Key(i["PK"], i["SK"]))] == []
    assert_clean(svc)
