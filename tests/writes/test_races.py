"""Writes that race a rename whose copies take several transactions: each ends with every
copy current and `graph-api check` clean."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from racing import CHANGE_SUBJECT, interleave
from support import (
    USER_ERRORS,
    assert_clean,
    execute_async,
    of_type,
    ok,
    run,
    scan,
    seed,
    sport_students,
    student_classes,
    student_sports,
)

from graph_api.errors import NotFound
from graph_api.graph.engine.context import Services
from graph_api.model import items
from graph_api.model.items import ENROLMENT, MEMBERSHIP
from graph_api.store import transactions
from graph_api.store.codec import Item
from graph_api.store.table import Table
from graph_api.writes import classes, memberships, propagation, sports, teachers

# Renames here take several chunks, and races on a busy machine: a deadline to match.
pytestmark = pytest.mark.settings(deadline_seconds=60.0)

Hook = Callable[[], Awaitable[Any]]
RENAME_ALICE = f"""mutation {{ updateTeacher(id: "tA", input: {{name: "Alicia"}}) {{
  teacher {{ name }} {USER_ERRORS} }} }}"""


def entries(svc: Services, field: str, target_id: str | None = None) -> list[dict[str, Any]]:
    """The map entries (copies of a class or a sport) on every student item, or only those
    for `target_id`."""
    found = [
        (tid, entry)
        for student in of_type(scan(svc), "student")
        for tid, entry in student[field].items()
    ]
    return [entry for tid, entry in found if target_id in (None, tid)]


def students(count: int) -> list[Item]:
    return [items.student(f"s{n:03d}", f"S{n}", f"s{n}@ex.org") for n in range(count)]


@pytest.fixture
def between_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Hook], None]]:
    """Runs `hook` once, after a write's first transaction and before its follow-up chunks."""

    def install(hook: Hook) -> None:
        original = propagation.transact_each

        async def hooked(*args: Any, **kwargs: Any) -> bool:
            monkeypatch.setattr(propagation, "transact_each", original)
            await hook()
            return await original(*args, **kwargs)

        monkeypatch.setattr(propagation, "transact_each", hooked)

    yield install


def table_of(services: Services) -> Table:
    return Table(services.dynamo, services.settings.table)


def test_a_write_that_copies_nothing_leaves_a_rename_in_flight_alone(
    svc: Services, between_chunks: Callable[[Hook], None]
) -> None:
    sport = items.sport("sp", "Chess", None)
    members = students(120)
    seed(svc, [sport, *members], [(MEMBERSHIP, s, sport) for s in members])
    between_chunks(lambda: sports.update(table_of(svc), "sp", None, "New coach", None))
    result = run(
        svc,
        f"""mutation {{ updateSport(id: "sp", input: {{name: "Go"}}) {{
          sport {{ name coach }} {USER_ERRORS} }} }}""",
    )
    assert result.problems == []
    assert {e["name"] for e in entries(svc, "sports")} == {"Go"}
    assert_clean(svc)


def test_a_class_moved_during_its_teachers_rename_keeps_its_new_teacher(
    svc: Services, between_chunks: Callable[[Hook], None]
) -> None:
    alice, bob = items.teacher("tA", "Alice"), items.teacher("tB", "Bob")
    c1, c2 = items.school_class("c1", "Math", alice), items.school_class("c2", "Art", alice)
    pupils = students(102)
    links: list[tuple[Any, Item, Item]] = [
        (items.TEACHING, alice, c1),
        (items.TEACHING, alice, c2),
        *((ENROLMENT, s, c1) for s in pupils[:100]),
        *((ENROLMENT, s, c2) for s in pupils[100:]),
    ]
    seed(svc, [alice, bob, c1, c2, *pupils], links)
    between_chunks(lambda: classes.update(table_of(svc), "c2", None, "tB", None))
    assert run(svc, RENAME_ALICE).problems == []
    moved = ok(svc, '{ class(id: "c2") { teacher { id name } } }')["class"]["teacher"]
    assert moved == {"id": "tB", "name": "Bob"}
    c2_copies = {e["teacherName"] for e in entries(svc, "classes", "c2")}
    assert c2_copies == {"Bob"}
    assert_clean(svc)


def test_a_chunked_rename_with_expected_version_finishes_when_a_class_changes(
    svc: Services, between_chunks: Callable[[Hook], None]
) -> None:
    alice = items.teacher("tA", "Alice")
    c1, c2 = items.school_class("c1", "Math", alice), items.school_class("c2", "Art", alice)
    pupils = students(103)
    links: list[tuple[Any, Item, Item]] = [
        (items.TEACHING, alice, c1),
        (items.TEACHING, alice, c2),
        *((ENROLMENT, s, c1) for s in pupils[:100]),
        *((ENROLMENT, s, c2) for s in pupils[100:102]),
    ]
    seed(svc, [alice, c1, c2, *pupils], links)
    # An ordinary enrolment lands in c2 while the rename's follow-up chunks are pending.
    between_chunks(lambda: memberships.link(table_of(svc), ENROLMENT, "s102", "c2"))
    result = run(
        svc,
        f"""mutation {{ updateTeacher(id: "tA", input: {{name: "Alicia"}}, expectedVersion: 1) {{
          teacher {{ name version }} {USER_ERRORS} }} }}""",
    )
    assert result.problems == []
    assert result.data["updateTeacher"]["teacher"] == {"name": "Alicia", "version": 2}
    assert {e["teacherName"] for e in entries(svc, "classes")} == {"Alicia"}
    assert_clean(svc)


def test_setting_a_class_to_its_own_teacher_cannot_undo_a_rename(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = items.teacher("tA", "Alice")
    klass = items.school_class("c1", "Math", alice)
    pupil = students(1)
    seed(
        svc, [alice, klass, *pupil], [(items.TEACHING, alice, klass), (ENROLMENT, pupil[0], klass)]
    )
    original = propagation.plan

    async def rename_lands_after_the_read(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(propagation, "plan", original)
        await asyncio.to_thread(ok, svc, RENAME_ALICE)
        return await original(*args, **kwargs)

    monkeypatch.setattr(propagation, "plan", rename_lands_after_the_read)
    result = run(
        svc,
        f"""mutation {{ updateClass(id: "c1", input: {{teacherId: "tA"}}) {{
          class {{ id }} {USER_ERRORS} }} }}""",
    )
    assert result.problems == []
    assert {e["teacherName"] for e in entries(svc, "classes")} == {"Alicia"}
    assert_clean(svc)


@pytest.mark.parametrize("renamed_first", ["subject", "teacher"])
def test_a_class_and_its_teacher_renamed_at_once_leave_every_copy_current(
    svc: Services, between_chunks: Callable[[Hook], None], renamed_first: str
) -> None:
    """Enrolments copy the subject from the class and the teacher's name through it: a
    rename of either, landing between the other's chunks, must survive in every copy."""
    alice = items.teacher("tA", "Alice")
    klass = items.school_class("c1", "Math", alice)
    pupils = students(120)
    links: list[tuple[Any, Item, Item]] = [
        (items.TEACHING, alice, klass),
        *((ENROLMENT, s, klass) for s in pupils),
    ]
    seed(svc, [alice, klass, *pupils], links)
    if renamed_first == "subject":
        between_chunks(lambda: teachers.update(table_of(svc), "tA", "Alicia", None))
        assert run(svc, CHANGE_SUBJECT).problems == []
    else:
        between_chunks(lambda: classes.update(table_of(svc), "c1", "Physics", None, None))
        assert run(svc, RENAME_ALICE).problems == []
    copies = {(e["subject"], e["teacherName"]) for e in entries(svc, "classes")}
    assert copies == {("Physics", "Alicia")}
    (teacher,) = of_type(scan(svc), "teacher")
    assert teacher["classes"] == {"c1": {"subject": "Physics"}}
    (class_,) = of_type(scan(svc), "class")
    assert (class_["subject"], class_["teacherName"]) == ("Physics", "Alicia")
    assert_clean(svc)


# -- an edge swapped in before a chunked write's first transaction ---------------------------
#
# Chunked writes fence their edges by count. One edge unlinked and another linked between the
# plan's read and its first transaction leave the count as it was; the new edge copied the old
# value. The unlinked edge's copy (last in order, so in a follow-up chunk) then fails its
# condition, and the write must plan again rather than skip it.


def write_after_swap(svc: Services, monkeypatch: pytest.MonkeyPatch, swap: str, write: str) -> None:
    """Run `write`, with `swap` committed between its read and its first transaction."""
    intruders = interleave(monkeypatch, propagation, svc, swap)
    result = run(svc, write)
    monkeypatch.undo()
    assert intruders[0].problems == [] and result.problems == []


@pytest.mark.parametrize(
    ("write", "check"),
    [
        (
            CHANGE_SUBJECT,
            lambda svc: [c["subject"] for c in student_classes(svc, "s120")] == ["Physics"],
        ),
        (
            RENAME_ALICE,
            lambda svc: [c["teacher"]["name"] for c in student_classes(svc, "s120")] == ["Alicia"],
        ),
    ],
    ids=["subject change", "teacher rename"],
)
def test_a_chunked_class_write_reaches_an_enrolment_swapped_in_before_it(
    svc: Services, monkeypatch: pytest.MonkeyPatch, write: str, check: Callable[..., bool]
) -> None:
    alice = items.teacher("tA", "Alice")
    klass = items.school_class("c1", "Math", alice)
    pupils = students(121)  # s120 is not enrolled yet
    links: list[tuple[Any, Item, Item]] = [
        (items.TEACHING, alice, klass),
        *((ENROLMENT, s, klass) for s in pupils[:120]),
    ]
    seed(svc, [alice, klass, *pupils], links)
    swap = f"""mutation {{
      unenrollStudent(studentId: "s119", classId: "c1") {{ class {{ id }} {USER_ERRORS} }}
      enrollStudent(studentId: "s120", classId: "c1") {{ class {{ id }} {USER_ERRORS} }} }}"""
    write_after_swap(svc, monkeypatch, swap, write)
    assert check(svc)
    assert_clean(svc)


def test_a_chunked_sport_rename_reaches_a_membership_swapped_in_before_it(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    sport = items.sport("p1", "Chess", None)
    members = students(121)
    seed(svc, [sport, *members], [(MEMBERSHIP, s, sport) for s in members[:120]])
    swap = f"""mutation {{
      leaveSport(studentId: "s119", sportId: "p1") {{ sport {{ id }} {USER_ERRORS} }}
      joinSport(studentId: "s120", sportId: "p1") {{ sport {{ id }} {USER_ERRORS} }} }}"""
    rename = f"""mutation {{ updateSport(id: "p1", input: {{name: "Go"}}) {{
      sport {{ id }} {USER_ERRORS} }} }}"""
    write_after_swap(svc, monkeypatch, swap, rename)
    assert [s["name"] for s in student_sports(svc, "s120")] == ["Go"]
    assert_clean(svc)


def test_a_chunked_student_rename_reaches_a_membership_swapped_in_before_it(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """49 sports and 60 classes: 109 edge items copy the name, more than one transaction."""
    ada = items.student("ada", "Ada", "ada@ex.org")
    alice = items.teacher("tA", "Alice")
    sports_ = [items.sport(f"p{n:03d}", f"Sport {n}", None) for n in range(50)]
    classes_ = [items.school_class(f"c{n:03d}", f"Class {n}", alice) for n in range(60)]
    links: list[tuple[Any, Item, Item]] = [
        *((MEMBERSHIP, ada, p) for p in sports_[:49]),
        *((items.TEACHING, alice, c) for c in classes_),
        *((ENROLMENT, ada, c) for c in classes_),
    ]
    seed(svc, [ada, alice, *sports_, *classes_], links)
    swap = f"""mutation {{
      leaveSport(studentId: "ada", sportId: "p048") {{ sport {{ id }} {USER_ERRORS} }}
      joinSport(studentId: "ada", sportId: "p049") {{ sport {{ id }} {USER_ERRORS} }} }}"""
    rename = f"""mutation {{ updateStudent(id: "ada", input: {{name: "Ada L"}}) {{
      student {{ id }} {USER_ERRORS} }} }}"""
    write_after_swap(svc, monkeypatch, swap, rename)
    assert [s["name"] for s in sport_students(svc, "p049")] == ["Ada L"]
    assert_clean(svc)


# -- renames under enrolment churn -----------------------------------------------------------
#
# With students enrolling and unenrolling in a teacher's classes all the time, a
# rename that re-plans whenever a roster moved never finishes. A write whose plan went stale
# follows instead: the classes take the new name first, so later enrolments copy it, and the
# students' entries are read after that; a student who left meanwhile is skipped.


@pytest.fixture
def churn(monkeypatch: pytest.MonkeyPatch, svc: Services) -> Callable[[list[str]], list[str]]:
    """Before every transaction the write sends, another client enrols a waiting student in
    one of `classes` or unenrols one (alternately): the rosters never hold still. Returns
    the log of what the churn did."""
    log: list[str] = []
    original = transactions._apply
    busy = False

    def install(class_ids: list[str]) -> list[str]:
        async def churned(*args: Any, **kwargs: Any) -> None:
            nonlocal busy
            if not busy:
                busy = True
                try:
                    n = len(log)
                    class_id = class_ids[n % len(class_ids)]
                    if n % 2 == 0:
                        await memberships.link(table_of(svc), ENROLMENT, f"w{n:03d}", class_id)
                        log.append(f"+w{n:03d}>{class_id}")
                    else:  # s<n> is in class n % 3 while the school lasts (else: enrol)
                        try:
                            await memberships.unlink(
                                table_of(svc), ENROLMENT, f"s{n:03d}", class_id
                            )
                            log.append(f"-s{n:03d}>{class_id}")
                        except NotFound:
                            await memberships.link(table_of(svc), ENROLMENT, f"w{n:03d}", class_id)
                            log.append(f"+w{n:03d}>{class_id}")
                finally:
                    busy = False
            await original(*args, **kwargs)

        monkeypatch.setattr(transactions, "_apply", churned)
        return log

    return install


@pytest.mark.parametrize("size", [5, 40], ids=["one transaction", "chunked"])
def test_a_teacher_rename_finishes_while_its_classes_churn(
    svc: Services, churn: Callable[[list[str]], list[str]], size: int
) -> None:
    alice = items.teacher("tA", "Alice")
    klasses = [items.school_class(f"c{n}", f"Subject {n}", alice) for n in range(3)]
    pupils = students(3 * size)
    waiting = [items.student(f"w{n:03d}", f"W{n}", f"w{n}@ex.org") for n in range(60)]
    links: list[tuple[Any, Item, Item]] = [(items.TEACHING, alice, k) for k in klasses]
    # Each pupil is in two of the three classes: one update of its item copies both names,
    # and leaving one class must not cost the other its copy.
    links += [(ENROLMENT, p, klasses[(i + d) % 3]) for i, p in enumerate(pupils) for d in (0, 1)]
    seed(svc, [alice, *klasses, *pupils, *waiting], links)
    log = churn([k["id"] for k in klasses])
    result = run(svc, RENAME_ALICE)
    assert result.problems == []
    assert result.data["updateTeacher"]["teacher"]["name"] == "Alicia"
    assert len(log) >= 2  # the rosters moved under the rename, more than once
    assert {e["teacherName"] for e in entries(svc, "classes")} == {"Alicia"}
    assert {k["teacherName"] for k in of_type(scan(svc), "class")} == {"Alicia"}
    assert_clean(svc)


def test_a_class_subject_change_finishes_while_its_roster_churns(
    svc: Services, churn: Callable[[list[str]], list[str]]
) -> None:
    alice = items.teacher("tA", "Alice")
    klass = items.school_class("c1", "Math", alice)
    pupils = students(120)
    waiting = [items.student(f"w{n:03d}", f"W{n}", f"w{n}@ex.org") for n in range(60)]
    links: list[tuple[Any, Item, Item]] = [(items.TEACHING, alice, klass)]
    links += [(ENROLMENT, p, klass) for p in pupils]
    seed(svc, [alice, klass, *pupils, *waiting], links)
    log = churn(["c1"])
    assert run(svc, CHANGE_SUBJECT).problems == []
    assert len(log) >= 2
    assert {e["subject"] for e in entries(svc, "classes")} == {"Physics"}
    assert of_type(scan(svc), "teacher")[0]["classes"] == {"c1": {"subject": "Physics"}}
    assert_clean(svc)


def test_a_class_too_big_for_one_transaction_reads_its_roster_once(svc: Services) -> None:
    """Its count says the copies cannot fit: the change is planned to be followed from the
    start, and the roster is read after the class takes the new subject, not also before."""
    alice = items.teacher("tA", "Alice")
    klass = items.school_class("c1", "Math", alice)
    pupils = students(120)
    links: list[tuple[Any, Item, Item]] = [(items.TEACHING, alice, klass)]
    links += [(ENROLMENT, p, klass) for p in pupils]
    seed(svc, [alice, klass, *pupils], links)
    result = run(svc, CHANGE_SUBJECT)
    assert result.problems == []
    operations = [c.operation for c in result.context.ledger.calls]
    assert operations.count("Query") == 1
    assert {e["subject"] for e in entries(svc, "classes")} == {"Physics"}
    assert_clean(svc)


# -- renames while clients enrol and unenrol at once -----------------------------------------
#
# Renaming the teacher of the busiest classes while six clients keep enrolling and
# unenrolling students in them succeeds. It used to fail with UNAVAILABLE ("the graph kept
# changing under this write"): every attempt's plan read rosters that had moved by the time
# it was checked.

ENROL = f"""mutation($s: ID!, $c: ID!) {{
  enrollStudent(studentId: $s, classId: $c) {{ class {{ id }} {USER_ERRORS} }} }}"""
UNENROL = f"""mutation($s: ID!, $c: ID!) {{
  unenrollStudent(studentId: $s, classId: $c) {{ class {{ id }} {USER_ERRORS} }} }}"""
RENAME = f"""mutation($n: String!) {{ updateTeacher(id: "tA", input: {{name: $n}}) {{
  teacher {{ name }} {USER_ERRORS} }} }}"""
CLIENTS = 6


@pytest.mark.parametrize("size", [6, 30], ids=["one transaction", "several transactions"])
def test_a_teacher_renamed_three_times_while_six_clients_enrol_and_unenrol(
    svc: Services, size: int
) -> None:
    alice = items.teacher("tA", "Alice")
    klasses = [items.school_class(f"c{n}", f"Subject {n}", alice) for n in range(4)]
    pupils = students(4 * size)  # `size` students stay in each class
    own = [
        [items.student(f"k{k}-{n}", f"K{k}", f"k{k}{n}@ex.org") for n in range(3)]
        for k in range(CLIENTS)
    ]
    links: list[tuple[Any, Item, Item]] = [(items.TEACHING, alice, k) for k in klasses]
    links += [(ENROLMENT, p, klasses[i % 4]) for i, p in enumerate(pupils)]
    seed(svc, [alice, *klasses, *pupils, *(s for mine in own for s in mine)], links)
    class_ids = [k["id"] for k in klasses]
    names = [f"Alicia {n}" for n in range(3)]

    async def race() -> tuple[list[Any], list[int]]:
        renamed = asyncio.Event()
        done = [0] * CLIENTS  # each client's enrolments and unenrolments while renames ran

        async def client(k: int) -> None:
            # Each client toggles its own students in and out of the teacher's classes.
            pick = random.Random(k)
            enrolled: set[tuple[str, str]] = set()
            while not renamed.is_set():
                pair = (pick.choice(own[k])["id"], pick.choice(class_ids))
                query = UNENROL if pair in enrolled else ENROL
                result = await execute_async(svc, query, {"s": pair[0], "c": pair[1]})
                assert result.problems == [], result.problems
                enrolled ^= {pair}
                done[k] += 1

        async def renames() -> list[Any]:
            while min(done) == 0:  # every client is busy before the first rename
                await asyncio.sleep(0.01)
            start = list(done)
            results = [await execute_async(svc, RENAME, {"n": name}) for name in names]
            renamed.set()
            done[:] = [d - s for d, s in zip(done, start, strict=True)]
            return results

        clients = [asyncio.create_task(client(k)) for k in range(CLIENTS)]
        try:
            results = await renames()
        finally:
            renamed.set()
            await asyncio.gather(*clients)
        return results, done

    results, done = asyncio.run(race())
    assert [r.problems for r in results] == [[], [], []]
    assert min(done) >= 1  # every client enrolled or unenrolled while the renames ran
    last = names[-1]
    assert {k["teacherName"] for k in of_type(scan(svc), "class")} == {last}
    assert {e["teacherName"] for e in entries(svc, "classes")} == {last}
    for class_id in class_ids:
        taught = ok(svc, f'{{ class(id: "{class_id}") {{ teacher {{ name }} }} }}')
        assert taught["class"]["teacher"]["name"] == last
    assert_clean(svc)
