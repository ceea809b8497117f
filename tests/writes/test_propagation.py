"""Renames whose copies do not fit one transaction (100 actions): the node and the first
copies commit together, the rest follow in idempotent chunks, and every copy ends current."""

from __future__ import annotations

from typing import Any

import pytest
from racing import CREATE_STUDENT_MIN, all_ok, execute_concurrently, sport_count
from support import (
    USER_ERRORS,
    assert_clean,
    awaited,
    create_class,
    create_student,
    create_teacher,
    execute_async,
    fresh_services,
    of_type,
    ok,
    run,
    scan,
)

from graph_api.errors import Unavailable
from graph_api.graph.engine.context import Services
from graph_api.store import admin
from graph_api.store.codec import Item
from graph_api.writes import propagation

# A hundred classes renamed, a student with more edges than a transaction holds: on a busy
# machine DynamoDB Local takes 20-30 s for them; the copies are what these tests are about.
pytestmark = pytest.mark.settings(deadline_seconds=60.0)

STUDENTS = 100
CLASSES = ("c1", "c2")
ENROLL_TWICE = f"""mutation($s: ID!) {{
  a: enrollStudent(studentId: $s, classId: "c1") {{ class {{ id }} {USER_ERRORS} }}
  b: enrollStudent(studentId: $s, classId: "c2") {{ class {{ id }} {USER_ERRORS} }} }}"""
RENAME = f"""mutation($n: String!) {{
  updateTeacher(id: "t1", input: {{name: $n}}) {{ teacher {{ id name version }} {USER_ERRORS} }}
}}"""
EVERY_COPY = """query($ids: [ID!]!) {
  students(ids: $ids) { id classes(first: 100) { edges { node { id teacher { id name } } } } }
  c1: class(id: "c1") { teacher { name } }
  c2: class(id: "c2") { teacher { name } }
  classes { edges { node { id teacher { name } } } }
  teacher(id: "t1") { classes { edges { node { id teacher { name } } } } }
}"""


def student_ids() -> list[str]:
    return [f"s{n:02d}" for n in range(STUDENTS)]


@pytest.fixture(scope="module")
def school_items(endpoint: str) -> list[Item]:
    """Teacher t1 ("Grace") teaching c1 and c2; 100 students, each enrolled in both: 2
    classes copy the teacher's name, and 200 class entries on the 100 student items copy it
    from them (one update per student item: 103 writes, more than one transaction holds).
    Built once through mutations; each test gets its own copy of the items."""
    with fresh_services(endpoint) as svc:
        create_teacher(svc, "t1", "Grace")
        for class_id in CLASSES:
            create_class(svc, class_id, "t1")
        students = [
            (CREATE_STUDENT_MIN, {"i": {"id": s, "name": s.upper(), "email": f"{s}@ex.org"}})
            for s in student_ids()
        ]
        all_ok(execute_concurrently(svc, students))
        all_ok(execute_concurrently(svc, [(ENROLL_TWICE, {"s": s}) for s in student_ids()]))
        assert_clean(svc)
        return scan(svc)


@pytest.fixture
def school(empty_services: Services, school_items: list[Item]) -> Services:
    awaited(admin.batch_write(empty_services.dynamo, empty_services.settings.table, school_items))
    return empty_services


def teacher_names_shown(svc: Services) -> set[str]:
    """Every place the API shows t1's name from a copy."""
    data = ok(svc, EVERY_COPY, {"ids": student_ids()})
    names = []
    for student in data["students"]:
        classes = [e["node"] for e in student["classes"]["edges"]]
        assert sorted(c["id"] for c in classes) == list(CLASSES)
        names += [c["teacher"]["name"] for c in classes]
    names += [data[c]["teacher"]["name"] for c in CLASSES]
    names += [e["node"]["teacher"]["name"] for e in data["classes"]["edges"]]
    names += [e["node"]["teacher"]["name"] for e in data["teacher"]["classes"]["edges"]]
    assert len(names) == 2 * STUDENTS + 6
    return set(names)


def copies_of_teacher_name(svc: Services) -> list[str]:
    items = scan(svc)
    entries = [e for s in of_type(items, "student") for e in s["classes"].values()]
    copies = entries + of_type(items, "class")
    assert len(copies) == 2 * STUDENTS + 2
    return [i["teacherName"] for i in copies]


def transactions(result: Any) -> int:
    return [c.operation for c in result.context.ledger.calls].count("TransactWriteItems")


def test_teacher_rename_reaches_more_copies_than_one_transaction_holds(school: Services) -> None:
    assert teacher_names_shown(school) == {"Grace"}
    result = run(school, RENAME, {"n": "Grace Hopper"})
    assert result.problems == []
    assert result.data == {
        "updateTeacher": {
            "teacher": {"id": "t1", "name": "Grace Hopper", "version": 2},
            "userErrors": [],
        }
    }
    assert transactions(result) >= 2  # 1 teacher + 2 classes + 100 students: chunked
    assert teacher_names_shown(school) == {"Grace Hopper"}
    assert set(copies_of_teacher_name(school)) == {"Grace Hopper"}
    assert_clean(school)


def test_a_rename_whose_chunks_fail_answers_saved_and_sending_it_again_finishes(
    school: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def throttled(*_: Any, **__: Any) -> None:
        raise Unavailable("DynamoDB is busy; try again shortly")

    # The node and the first copies commit; DynamoDB then refuses the follow-up chunks.
    monkeypatch.setattr(propagation, "transact_each", throttled)
    saved = run(school, RENAME, {"n": "Grace Hopper"})
    assert saved.problems == []  # saved, as it says, with its copies pending
    assert saved.data["updateTeacher"]["teacher"] == {
        "id": "t1",
        "name": "Grace Hopper",
        "version": 2,
    }
    assert saved.extensions["copiesPending"]["nodes"] == ["teacher t1"]
    monkeypatch.undo()
    assert "Grace" in copies_of_teacher_name(school)  # some copies are behind

    # Sending it again finishes them too (the finisher would, without it).
    result = run(school, RENAME, {"n": "Grace Hopper"})
    assert result.problems == []
    assert set(copies_of_teacher_name(school)) == {"Grace Hopper"}
    assert teacher_names_shown(school) == {"Grace Hopper"}
    assert_clean(school)


def test_a_later_rename_wins_over_an_earlier_ones_late_chunks(
    school: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = propagation.transact_each
    later: list[Any] = []

    async def later_rename_first(*args: Any, **kwargs: Any) -> bool:
        if not later:  # the first rename has committed its head; a second one runs now
            later.append(None)  # (before awaiting: the second rename comes through here too)
            later[0] = await execute_async(school, RENAME, {"n": "Admiral Hopper"})
        return await original(*args, **kwargs)

    monkeypatch.setattr(propagation, "transact_each", later_rename_first)
    first = run(school, RENAME, {"n": "Grace Hopper"})
    monkeypatch.undo()
    assert first.problems == [] and later[0].problems == []
    assert later[0].data["updateTeacher"]["teacher"]["version"] == 3

    assert ok(school, 'query { teacher(id: "t1") { name } }')["teacher"]["name"] == (
        "Admiral Hopper"
    )
    assert set(copies_of_teacher_name(school)) == {"Admiral Hopper"}
    assert_clean(school)


def test_rename_of_a_teacher_with_a_hundred_classes(empty_services: Services) -> None:
    svc = empty_services
    create_teacher(svc, "t1", "Grace")
    create = f"""mutation($i: CreateClassInput!) {{
      createClass(input: $i) {{ class {{ id }} {USER_ERRORS} }} }}"""
    inputs = [{"id": f"c{n:03d}", "subject": f"S{n}", "teacherId": "t1"} for n in range(100)]
    all_ok(execute_concurrently(svc, [(create, {"i": i}) for i in inputs]))
    # The 100 rosters are read a few at a time, so the process's other requests (a reader's)
    # never queue behind a hundred of them for the DynamoDB client's connections.
    in_flight, most = 0, 0
    send = svc.dynamo.call

    async def counting(operation: str, params: dict[str, Any], ledger: Any) -> Any:
        nonlocal in_flight, most
        in_flight += operation == "Query"
        most = max(most, in_flight)
        try:
            return await send(operation, params, ledger)
        finally:
            in_flight -= operation == "Query"

    svc.dynamo.call = counting  # type: ignore[method-assign]
    try:
        result = run(svc, RENAME, {"n": "Grace Hopper"})
    finally:
        svc.dynamo.call = send  # type: ignore[method-assign]
    assert result.problems == []
    assert result.data["updateTeacher"]["teacher"]["version"] == 2
    assert 1 <= most <= propagation.READS_AT_ONCE
    classes = of_type(scan(svc), "class")
    assert len(classes) == 100
    assert {c["teacherName"] for c in classes} == {"Grace Hopper"}
    assert_clean(svc)


def test_delete_of_a_student_with_more_edges_than_one_transaction_holds(
    empty_services: Services,
) -> None:
    """50 memberships: 100 actions to unlink them, plus the node, home and email guard."""
    svc = empty_services
    sports = [f"p{n:02d}" for n in range(50)]
    create = f"""mutation($i: CreateSportInput!) {{
      createSport(input: $i) {{ sport {{ id }} {USER_ERRORS} }} }}"""
    all_ok(execute_concurrently(svc, [(create, {"i": {"id": p, "name": p}}) for p in sports]))
    create_student(
        svc, "Ada", "ada@ex.org", id="s1", home={"country": "UK", "state": "L", "city": "L"}
    )
    create_student(svc, "Bob", "bob@ex.org", id="s2")
    join = f"""mutation($s: ID!, $p: ID!) {{
      joinSport(studentId: $s, sportId: $p) {{ sport {{ id }} {USER_ERRORS} }} }}"""
    all_ok(execute_concurrently(svc, [(join, {"s": "s1", "p": p}) for p in sports]))
    all_ok(execute_concurrently(svc, [(join, {"s": "s2", "p": p}) for p in sports[:3]]))

    result = run(svc, 'mutation { deleteStudent(id: "s1") { deletedId } }')
    assert result.errors == [] and result.data == {"deleteStudent": {"deletedId": "s1"}}
    assert transactions(result) >= 2
    items = scan(svc)
    assert [i for i in items if "s1" in (i["PK"].split("#")[-1], i.get("studentId"))] == []
    counts = {p: sport_count(svc, p) for p in sports}
    assert counts == {p: 1 if p in sports[:3] else 0 for p in sports}
    assert create_student(svc, "Ada", "ada@ex.org")["email"] == "ada@ex.org"
    assert_clean(svc)
