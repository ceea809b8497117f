"""Writes that race: many at once on one node, and two interleavings forced step by step.

Concurrent operations run on one event loop, each with its own request context (as two HTTP
requests would), through the shared DynamoDB client.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from racing import CHANGE_SUBJECT, CREATE_STUDENT_MIN, all_ok, execute_concurrently, interleave
from support import (
    ENROLL_MIN,
    USER_ERRORS,
    assert_clean,
    class_students,
    create_class,
    create_student,
    create_teacher,
    of_type,
    ok,
    run,
    scan,
    student_classes,
    teacher_classes,
)

from graph_api.graph.engine.context import Services
from graph_api.writes import classes, memberships, propagation, students

# Up to 21 writes at once on a busy machine's DynamoDB Local: what is tested is that every
# copy ends current, not how fast the race is run.
pytestmark = pytest.mark.settings(deadline_seconds=60.0)

STUDENTS = 25
FAILURES_EXPECTED = {"ALREADY_EXISTS", "NOT_FOUND"}
ENROLL = f"""mutation($s: ID!, $c: ID!) {{
  enrollStudent(studentId: $s, classId: $c) {{ class {{ studentCount }} {USER_ERRORS} }} }}"""
UNENROLL = f"""mutation($s: ID!, $c: ID!) {{
  unenrollStudent(studentId: $s, classId: $c) {{ class {{ studentCount }} {USER_ERRORS} }} }}"""
CLASS_COUNT = 'query { class(id: "c1") { studentCount } }'


def _student_id(n: int) -> str:
    return f"s{n:02d}"


def enroll_unenroll_storm(svc: Services, *, students: int, steps: tuple[str, ...]) -> None:
    """Every other student enrolled first; then each student runs `steps` (enrolls and
    unenrolls), all students' steps at once in a shuffled order."""
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    all_ok(execute_concurrently(svc, [_create(n) for n in range(students)]))
    already = [_student_id(n) for n in range(0, students, 2)]
    all_ok(execute_concurrently(svc, [(ENROLL_MIN, {"s": s, "c": "c1"}) for s in already]))

    operations = [
        (step, {"s": _student_id(n), "c": "c1"}) for n in range(students) for step in steps
    ]
    random.Random(7).shuffle(operations)
    results = execute_concurrently(svc, operations, in_flight=len(operations))

    # Some fail, legitimately: enrolled already, or not (yet) enrolled. Nothing else.
    assert [e for r in results for e in r.errors] == []
    codes = [code for r in results for code in r.user_codes]
    assert set(codes) <= FAILURES_EXPECTED, [e for r in results for e in r.user_errors][:3]
    succeeded = [(op, r) for op, r in zip(operations, results, strict=True) if not r.user_errors]
    enrolled = sum(1 for (query, _), _ in succeeded if query is ENROLL)
    unenrolled = len(succeeded) - enrolled
    for _, result in succeeded:
        (answer,) = result.data.values()
        assert 0 <= answer["class"]["studentCount"] <= students

    expected = len(already) + enrolled - unenrolled
    count = ok(svc, CLASS_COUNT)["class"]["studentCount"]
    edges = [i for i in of_type(scan(svc), "enrolment") if i["classId"] == "c1"]
    listed = class_students(svc, "c1")
    assert count == len(edges) == len(listed) == expected
    assert sorted(s["id"] for s in listed) == sorted(e["studentId"] for e in edges)
    assert_clean(svc)


def _create(n: int) -> tuple[str, dict[str, Any]]:
    student = {"id": _student_id(n), "name": f"S{n}", "email": f"{n}@ex.org"}
    return CREATE_STUDENT_MIN, {"i": student}


def test_fifty_concurrent_enrolls_and_unenrolls_keep_the_count_exact(
    empty_services: Services,
) -> None:
    # 25 students, 50 mutations: each student enrolls once and unenrolls once.
    enroll_unenroll_storm(empty_services, students=STUDENTS, steps=(ENROLL, UNENROLL))


def test_renames_racing_with_enrolments_leave_every_copy_current(
    empty_services: Services,
) -> None:
    """Enrolments copy names that concurrent renames change: the fences make each write
    either see the rename or be retried, so no copy is left stale."""
    svc = empty_services
    create_teacher(svc, "t1", "Grace")
    create_class(svc, "c1", "t1", "Math")
    all_ok(execute_concurrently(svc, [_create(n) for n in range(12)]))
    operations: list[tuple[str, dict[str, Any] | None]] = [
        (ENROLL, {"s": _student_id(n), "c": "c1"}) for n in range(12)
    ]
    operations += [
        (
            f"""mutation($s: String!) {{
              updateClass(id: "c1", input: {{subject: $s}}) {{ class {{ id }} {USER_ERRORS} }}
            }}""",
            {"s": f"Math {n}"},
        )
        for n in range(3)
    ]
    operations += [
        (
            f"""mutation($n: String!) {{
              updateTeacher(id: "t1", input: {{name: $n}}) {{ teacher {{ id }} {USER_ERRORS} }}
            }}""",
            {"n": f"Grace {n}"},
        )
        for n in range(2)
    ]
    operations += [
        (
            f"""mutation($id: ID!, $n: String!) {{
              updateStudent(id: $id, input: {{name: $n}}) {{ student {{ id }} {USER_ERRORS} }}
            }}""",
            {"id": _student_id(n), "n": f"Renamed {n}"},
        )
        for n in range(0, 12, 3)
    ]
    random.Random(3).shuffle(operations)
    results = execute_concurrently(svc, operations, in_flight=len(operations))
    all_ok(results)

    assert ok(svc, CLASS_COUNT)["class"]["studentCount"] == 12
    listed = {s["id"]: s["name"] for s in class_students(svc, "c1")}
    assert listed == {_student_id(n): f"Renamed {n}" if n % 3 == 0 else f"S{n}" for n in range(12)}
    klass = ok(svc, 'query { class(id: "c1") { subject teacher { name } } }')["class"]
    for n in range(12):
        assert student_classes(svc, _student_id(n)) == [
            {
                "id": "c1",
                "subject": klass["subject"],
                "teacher": {"id": "t1", "name": klass["teacher"]["name"]},
            }
        ]
    assert_clean(svc)


# -- interleavings forced step by step (see `interleave`) ----------------------------------


def test_delete_student_racing_an_email_change_frees_the_new_email(
    empty_services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deleteStudent must release the guard of the email the student has when the delete
    commits: an email change committed in between must not leave the new address reserved."""
    svc = empty_services
    create_student(svc, "Ada", "old@ex.org", id="s1")
    intruders = interleave(
        monkeypatch,
        students,
        svc,
        f"""mutation {{ updateStudent(id: "s1", input: {{email: "new@ex.org"}}) {{
          student {{ email }} {USER_ERRORS} }} }}""",
        {},
    )
    result = run(svc, 'mutation { deleteStudent(id: "s1") { deletedId } }')
    assert intruders[0].problems == []
    monkeypatch.undo()

    assert result.errors == [] and result.data == {"deleteStudent": {"deletedId": "s1"}}
    assert ok(svc, 'query { student(id: "s1") { id } }')["student"] is None
    assert [i for i in scan(svc) if i["type"] == "email"] == []
    for email in ("old@ex.org", "new@ex.org"):  # both addresses are free again
        bob = create_student(svc, "Bob", email)
        ok(
            svc,
            f"mutation($id: ID!) {{ deleteStudent(id: $id) {{ deletedId {USER_ERRORS} }} }}",
            {"id": bob["id"]},
        )
    assert_clean(svc)


def test_delete_class_racing_a_teacher_move_unlinks_the_new_teacher(
    empty_services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deleteClass must unlink the class from the teacher it has when the delete commits,
    not the one it read: a move committed in between must not leave a deleted class in
    t2's `classes` map, nor take c1 off t1's count a second time."""
    svc = empty_services
    create_teacher(svc, "t1")
    create_teacher(svc, "t2")
    create_class(svc, "c1", "t1")
    create_class(svc, "c2", "t1")
    intruders = interleave(
        monkeypatch,
        classes,
        svc,
        f"""mutation {{ updateClass(id: "c1", input: {{teacherId: "t2"}}) {{
          class {{ id }} {USER_ERRORS} }} }}""",
        {},
    )
    result = run(svc, 'mutation { deleteClass(id: "c1") { deletedId } }')
    assert intruders[0].problems == []
    monkeypatch.undo()

    assert result.errors == [] and result.data == {"deleteClass": {"deletedId": "c1"}}
    assert ok(svc, 'query { class(id: "c1") { id } }')["class"] is None
    assert [c["id"] for c in teacher_classes(svc, "t1")] == ["c2"]
    assert teacher_classes(svc, "t2") == []
    # t1 still teaches c2, so it cannot be deleted; t2 teaches nothing and can.
    delete = f"mutation($id: ID!) {{ deleteTeacher(id: $id) {{ deletedId {USER_ERRORS} }} }}"
    assert run(svc, delete, {"id": "t1"}).user_codes == ["CONFLICT"]
    assert ok(svc, delete, {"id": "t2"}) == {"deleteTeacher": {"deletedId": "t2", "userErrors": []}}
    assert_clean(svc)


def test_interleave_helper_really_interleaves(
    empty_services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forced interleaving is real: a rename committed between an enrolment's read and
    write is noticed (the copied name moved) and the roster copies the new name.

    (The old layout raced setHome, which copied the name onto a home item. A home is now a
    map on the student item, written by one update with nothing read first: no read-write
    gap to interleave. An enrolment still reads the student and copies its name onto the
    edge item in the class's roster.)"""
    svc = empty_services
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_student(svc, "Ada", "ada@ex.org", id="s1")
    intruders = interleave(
        monkeypatch,
        memberships,
        svc,
        f"""mutation {{ updateStudent(id: "s1", input: {{name: "Ada L"}}) {{
          student {{ version }} {USER_ERRORS} }} }}""",
        {},
    )
    result = run(svc, ENROLL, {"s": "s1", "c": "c1"})
    monkeypatch.undo()
    assert intruders[0].data == {"updateStudent": {"student": {"version": 2}, "userErrors": []}}
    assert result.errors == []
    assert result.data == {"enrollStudent": {"class": {"studentCount": 1}, "userErrors": []}}
    operations = [c.operation for c in result.context.ledger.calls]
    assert operations.count("TransactWriteItems") == 2  # the first one failed its guard
    assert class_students(svc, "c1") == [{"id": "s1", "name": "Ada L"}]
    assert_clean(svc)


# A student's `classes` entries copy fields of two nodes: `subject` from the class,
# `teacherName` from the teacher (through the class); the teacher's `classes` entries copy the
# subject. Each rename must leave the other's copies alone.
RENAME_TEACHER = f"""mutation {{ updateTeacher(id: "t1", input: {{name: "Grace H"}}) {{
  teacher {{ name }} {USER_ERRORS} }} }}"""


@pytest.mark.parametrize(
    ("writer", "intruder"),
    [(CHANGE_SUBJECT, RENAME_TEACHER), (RENAME_TEACHER, CHANGE_SUBJECT)],
    ids=["teacher renamed during a subject change", "subject changed during a teacher rename"],
)
def test_a_class_and_its_teacher_renamed_at_once_leave_both_copies_current(
    empty_services: Services, monkeypatch: pytest.MonkeyPatch, writer: str, intruder: str
) -> None:
    svc = empty_services
    create_teacher(svc, "t1", "Grace")
    create_class(svc, "c1", "t1", "Math")
    create_student(svc, "Ada", id="s1")
    ok(svc, ENROLL_MIN, {"s": "s1", "c": "c1"})
    intruders = interleave(monkeypatch, propagation, svc, intruder, {})
    result = run(svc, writer)
    monkeypatch.undo()

    assert intruders[0].problems == [] and result.problems == []
    current = {"id": "c1", "subject": "Physics", "teacher": {"id": "t1", "name": "Grace H"}}
    assert student_classes(svc, "s1") == [current]
    assert teacher_classes(svc, "t1") == [current]
    assert ok(svc, 'query { class(id: "c1") { id subject teacher { id name } } }') == {
        "class": current
    }
    assert_clean(svc)
