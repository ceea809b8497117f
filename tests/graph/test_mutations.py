"""The write path, mutation by mutation, as a client sees it: each test builds its graph on a
fresh table through mutations, checks what the API then answers (and, where the contract is
about storage, the items), and ends with the integrity checker finding nothing wrong."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from graphql import GraphQLNonNull, GraphQLObjectType
from mutation_steps import by_location, catalog, ids_of, leave
from support import (
    STUDENT_FIELDS,
    USER_ERRORS,
    all_pages,
    assert_clean,
    class_students,
    create_class,
    create_sport,
    create_student,
    create_teacher,
    dynamodb_requests,
    enroll,
    fresh_services,
    get_item,
    join,
    of_type,
    ok,
    payload,
    run,
    scan,
    single_user_error,
    sport_students,
    student_classes,
    student_sports,
    teacher_classes,
    unenroll,
)

from graph_api.errors import Unavailable
from graph_api.graph.engine.context import Services
from graph_api.graph.schema import schema
from graph_api.writes import teachers

ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
HOME = {"country": "USA", "state": "CA", "city": "San Diego", "street": "1 Main St"}
OTHER_HOME = {"country": "Canada", "state": "QC", "city": "Montréal", "street": None}

CREATE_STUDENT = f"""mutation($i: CreateStudentInput!) {{
  createStudent(input: $i) {{ student {{ {STUDENT_FIELDS} }} {USER_ERRORS} }} }}"""
UPDATE_STUDENT = f"""mutation($id: ID!, $i: UpdateStudentInput!, $v: Int) {{
  updateStudent(id: $id, input: $i, expectedVersion: $v) {{
    student {{ {STUDENT_FIELDS} }} {USER_ERRORS} }} }}"""
SET_HOME = f"""mutation($id: ID!, $h: HomeInput) {{
  setHome(studentId: $id, home: $h) {{ student {{ {STUDENT_FIELDS} }} {USER_ERRORS} }} }}"""
DELETE_STUDENT = f"mutation($id: ID!) {{ deleteStudent(id: $id) {{ deletedId {USER_ERRORS} }} }}"
STUDENT = f"query($id: ID!) {{ student(id: $id) {{ {STUDENT_FIELDS} }} }}"

CREATE_TEACHER = f"""mutation($i: CreateTeacherInput!) {{
  createTeacher(input: $i) {{ teacher {{ id }} {USER_ERRORS} }} }}"""
UPDATE_TEACHER = f"""mutation($id: ID!, $i: UpdateTeacherInput!, $v: Int) {{
  updateTeacher(id: $id, input: $i, expectedVersion: $v) {{
    teacher {{ id name version }} {USER_ERRORS} }} }}"""
DELETE_TEACHER = f"mutation($id: ID!) {{ deleteTeacher(id: $id) {{ deletedId {USER_ERRORS} }} }}"
TEACHER = "query($id: ID!) { teacher(id: $id) { id name version } }"

CLASS_FIELDS = "id subject studentCount version teacher { id name }"
CREATE_CLASS = f"""mutation($i: CreateClassInput!) {{
  createClass(input: $i) {{ class {{ {CLASS_FIELDS} }} {USER_ERRORS} }} }}"""
UPDATE_CLASS = f"""mutation($id: ID!, $i: UpdateClassInput!, $v: Int) {{
  updateClass(id: $id, input: $i, expectedVersion: $v) {{
    class {{ {CLASS_FIELDS} }} {USER_ERRORS} }} }}"""
DELETE_CLASS = f"mutation($id: ID!) {{ deleteClass(id: $id) {{ deletedId {USER_ERRORS} }} }}"
CLASS = f"query($id: ID!) {{ class(id: $id) {{ {CLASS_FIELDS} }} }}"

SPORT_FIELDS = "id name coach studentCount version"
CREATE_SPORT = f"""mutation($i: CreateSportInput!) {{
  createSport(input: $i) {{ sport {{ {SPORT_FIELDS} }} {USER_ERRORS} }} }}"""
UPDATE_SPORT = f"""mutation($id: ID!, $i: UpdateSportInput!, $v: Int) {{
  updateSport(id: $id, input: $i, expectedVersion: $v) {{
    sport {{ {SPORT_FIELDS} }} {USER_ERRORS} }} }}"""
DELETE_SPORT = f"mutation($id: ID!) {{ deleteSport(id: $id) {{ deletedId {USER_ERRORS} }} }}"
SPORT = f"query($id: ID!) {{ sport(id: $id) {{ {SPORT_FIELDS} }} }}"


def student(services: Services, id_: str) -> dict[str, Any] | None:
    return ok(services, STUDENT, {"id": id_})["student"]  # type: ignore[no-any-return]


def class_node(services: Services, id_: str) -> dict[str, Any] | None:
    return ok(services, CLASS, {"id": id_})["class"]  # type: ignore[no-any-return]


def sport_node(services: Services, id_: str) -> dict[str, Any] | None:
    return ok(services, SPORT, {"id": id_})["sport"]  # type: ignore[no-any-return]


def single_error(result: Any, code: str) -> dict[str, Any]:
    """The one user error of a mutation that wrote nothing; its payload names no node."""
    error = single_user_error(result, code)
    (answer,) = result.data.values()
    assert [v for k, v in answer.items() if k != "userErrors"] == [None] * (len(answer) - 1)
    return error


def deleted(id_: str) -> dict[str, Any]:
    return {"deletedId": id_, "userErrors": []}


# -- createStudent ---------------------------------------------------------------------------


def test_create_student_generates_valid_ids_that_sort_by_creation(svc: Services) -> None:
    first = create_student(svc, "First", "first@ex.org")
    second = create_student(svc, "Second", "second@ex.org")
    assert ID_RE.fullmatch(first["id"]) and ID_RE.fullmatch(second["id"])
    assert first["id"] < second["id"]
    assert first["version"] == 1 and first["home"] is None
    assert student(svc, first["id"]) == first
    assert student(svc, second["id"]) == second
    assert_clean(svc)


def test_create_student_with_id_and_home_is_listed_by_location(svc: Services) -> None:
    created = create_student(svc, "  Ada Lovelace \t", " Ada@Ex.org ", id="ada", home=HOME)
    assert created == {
        "id": "ada",
        "name": "Ada Lovelace",
        "email": "Ada@Ex.org",
        "version": 1,
        "home": HOME,
    }
    assert student(svc, "ada") == created
    expected = [{"id": "ada", "name": "Ada Lovelace"}]
    assert by_location(svc, "USA") == expected
    assert by_location(svc, "usa", "ca") == expected
    assert by_location(svc, "USA", "CA", "san diego") == expected
    assert by_location(svc, "USA", "CA", "San Jose") == []
    assert_clean(svc)


def test_duplicate_student_id_is_already_exists_and_writes_nothing(svc: Services) -> None:
    create_student(svc, "Ada", "ada@ex.org", id="s1")
    before = scan(svc)
    result = run(
        svc,
        CREATE_STUDENT,
        {"i": {"id": "s1", "name": "Bob", "email": "bob@ex.org", "home": HOME}},
    )
    assert single_error(result, "ALREADY_EXISTS")["field"] == "id"
    assert payload(result, "createStudent")["student"] is None
    assert scan(svc) == before
    # Bob's address was not reserved by the failed write.
    assert create_student(svc, "Bob", "bob@ex.org", id="s2")["email"] == "bob@ex.org"
    assert_clean(svc)


def test_duplicate_email_in_other_case_is_already_exists_and_writes_nothing(
    svc: Services,
) -> None:
    create_student(svc, "Ada", "Ada@Example.org", id="s1")
    before = scan(svc)
    result = run(
        svc,
        CREATE_STUDENT,
        {"i": {"id": "s2", "name": "Bob", "email": " aDA@EXAMPLE.ORG ", "home": HOME}},
    )
    assert single_error(result, "ALREADY_EXISTS")["field"] == "email"
    assert scan(svc) == before
    assert student(svc, "s2") is None
    assert by_location(svc, "USA") == []
    assert_clean(svc)


# -- updateStudent ---------------------------------------------------------------------------


def test_update_student_changes_fields_and_bumps_version_on_every_write(svc: Services) -> None:
    create_student(svc, "Ada", "ada@ex.org", id="s1")
    steps: list[dict[str, Any]] = [
        {"name": " Ada Lovelace "},
        {"email": "lovelace@ex.org"},
        {"name": "Countess", "email": "countess@ex.org"},
        {"name": "Countess"},  # no change is still a write
        {},
    ]
    expected = {"id": "s1", "name": "Ada", "email": "ada@ex.org", "version": 1, "home": None}
    for step in steps:
        data = ok(svc, UPDATE_STUDENT, {"id": "s1", "i": step})
        expected = {
            **expected,
            **{k: v.strip() for k, v in step.items()},
            "version": expected["version"] + 1,
        }
        assert data["updateStudent"]["student"] == expected
        assert student(svc, "s1") == expected
    assert expected["version"] == 6
    assert_clean(svc)


def test_update_student_with_stale_expected_version_is_conflict(svc: Services) -> None:
    create_student(svc, "Ada", "ada@ex.org", id="s1")
    ok(svc, UPDATE_STUDENT, {"id": "s1", "i": {"name": "Ada L"}, "v": 1})
    before = scan(svc)
    result = run(
        svc, UPDATE_STUDENT, {"id": "s1", "i": {"name": "Bob", "email": "bob@ex.org"}, "v": 1}
    )
    assert single_error(result, "CONFLICT")["currentVersion"] == 2
    assert scan(svc) == before
    # The version the conflict reported is the one to send.
    data = ok(svc, UPDATE_STUDENT, {"id": "s1", "i": {"name": "Bob"}, "v": 2})
    assert data["updateStudent"]["student"]["version"] == 3
    assert_clean(svc)


def test_update_unknown_student_is_not_found(svc: Services) -> None:
    result = run(svc, UPDATE_STUDENT, {"id": "nobody", "i": {"name": "X"}})
    single_error(result, "NOT_FOUND")
    assert scan(svc) == []


def test_email_change_frees_the_old_address_and_takes_the_new(svc: Services) -> None:
    create_student(svc, "Ada", "ada@ex.org", id="s1")
    ok(svc, UPDATE_STUDENT, {"id": "s1", "i": {"email": "lovelace@ex.org"}})
    # The old address is free for someone else ...
    assert create_student(svc, "Bob", "ADA@ex.org", id="s2")["email"] == "ADA@ex.org"
    # ... and the new one is taken.
    result = run(svc, CREATE_STUDENT, {"i": {"id": "s3", "name": "Cy", "email": "Lovelace@Ex.org"}})
    assert single_error(result, "ALREADY_EXISTS")["field"] == "email"
    assert student(svc, "s3") is None
    assert_clean(svc)


def test_email_change_to_a_taken_address_is_already_exists_and_changes_nothing(
    svc: Services,
) -> None:
    create_student(svc, "Ada", "ada@ex.org", id="s1")
    create_student(svc, "Bob", "bob@ex.org", id="s2")
    before = scan(svc)
    result = run(svc, UPDATE_STUDENT, {"id": "s1", "i": {"name": "Ada L", "email": "BOB@ex.org"}})
    assert single_error(result, "ALREADY_EXISTS")["field"] == "email"
    assert scan(svc) == before
    assert student(svc, "s1")["email"] == "ada@ex.org"  # type: ignore[index]
    # Ada still holds her own address.
    result = run(svc, CREATE_STUDENT, {"i": {"name": "Cy", "email": "ada@ex.org"}})
    assert single_error(result, "ALREADY_EXISTS")["field"] == "email"
    assert_clean(svc)


def test_email_change_in_case_only_keeps_the_address(svc: Services) -> None:
    create_student(svc, "Ada", "ada@ex.org", id="s1")
    data = ok(svc, UPDATE_STUDENT, {"id": "s1", "i": {"email": "ADA@ex.org"}})
    assert data["updateStudent"]["student"]["email"] == "ADA@ex.org"
    result = run(svc, CREATE_STUDENT, {"i": {"name": "Cy", "email": "ada@EX.org"}})
    assert single_error(result, "ALREADY_EXISTS")["field"] == "email"
    assert_clean(svc)


# -- setHome ---------------------------------------------------------------------------------


def test_set_home_sets_replaces_and_clears_and_the_location_index_follows(
    svc: Services,
) -> None:
    create_student(svc, "Ada", "ada@ex.org", id="s1")
    listed = [{"id": "s1", "name": "Ada"}]

    data = ok(svc, SET_HOME, {"id": "s1", "h": HOME})["setHome"]["student"]
    assert data["home"] == HOME and data["version"] == 2
    assert by_location(svc, "USA", "CA", "San Diego") == listed

    data = ok(svc, SET_HOME, {"id": "s1", "h": OTHER_HOME})["setHome"]["student"]
    assert data["home"] == OTHER_HOME and data["version"] == 3
    assert by_location(svc, "USA") == []
    assert by_location(svc, "canada", "qc", "MONTRÉAL") == listed

    data = ok(svc, SET_HOME, {"id": "s1", "h": None})["setHome"]["student"]
    assert data["home"] is None and data["version"] == 4
    assert by_location(svc, "Canada") == []
    assert student(svc, "s1")["home"] is None  # type: ignore[index]
    assert of_type(scan(svc), "home") == []
    assert_clean(svc)


def test_set_home_of_unknown_student_is_not_found(svc: Services) -> None:
    result = run(svc, SET_HOME, {"id": "nobody", "h": HOME})
    assert single_error(result, "NOT_FOUND")["field"] == "studentId"
    assert scan(svc) == []


# -- deleteStudent ---------------------------------------------------------------------------


def test_delete_student_removes_node_home_guard_and_edges(svc: Services) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_class(svc, "c2", "t1")
    create_sport(svc, "p1")
    create_student(svc, "Ada", "ada@ex.org", id="s1", home=HOME)
    create_student(svc, "Bob", "bob@ex.org", id="s2", home=HOME)
    for class_id in ("c1", "c2"):
        assert enroll(svc, "s1", class_id).problems == []
    assert enroll(svc, "s2", "c1").problems == []
    assert join(svc, "s1", "p1").problems == []

    data = ok(svc, DELETE_STUDENT, {"id": "s1"})
    assert data == {"deleteStudent": deleted("s1")}

    assert student(svc, "s1") is None
    assert [i for i in scan(svc) if "s1" in (i["PK"], i.get("studentId"))] == []
    assert class_node(svc, "c1")["studentCount"] == 1  # type: ignore[index]
    assert class_node(svc, "c2")["studentCount"] == 0  # type: ignore[index]
    assert sport_node(svc, "p1")["studentCount"] == 0  # type: ignore[index]
    assert ids_of(class_students(svc, "c1")) == ["s2"]
    assert class_students(svc, "c2") == []
    assert sport_students(svc, "p1") == []
    assert ids_of(by_location(svc, "USA")) == ["s2"]
    # The email is free again.
    assert create_student(svc, "Ada again", "ADA@ex.org", id="s3")["email"] == "ADA@ex.org"
    assert_clean(svc)


def test_delete_unknown_student_is_not_found(svc: Services) -> None:
    result = run(svc, DELETE_STUDENT, {"id": "nobody"})
    single_error(result, "NOT_FOUND")
    assert payload(result, "deleteStudent") == {
        "deletedId": None,
        "userErrors": [
            {
                "code": "NOT_FOUND",
                "message": "student nobody does not exist",
                "field": "id",
                "currentVersion": None,
            }
        ],
    }
    assert scan(svc) == []


# -- teachers --------------------------------------------------------------------------------


def test_create_and_update_teacher(svc: Services) -> None:
    data = ok(
        svc,
        f"""mutation {{ createTeacher(input: {{name: " Grace Hopper "}}) {{
          teacher {{ id name version }} {USER_ERRORS} }} }}""",
    )["createTeacher"]["teacher"]
    assert ID_RE.fullmatch(data["id"])
    assert data["name"] == "Grace Hopper" and data["version"] == 1
    teacher_id = data["id"]
    create_teacher(svc, "t2", "Alan Turing")
    assert catalog(svc, "teachers") == sorted([teacher_id, "t2"])

    data = ok(svc, UPDATE_TEACHER, {"id": teacher_id, "i": {"name": "Rear Admiral Hopper"}})
    assert data["updateTeacher"]["teacher"] == {
        "id": teacher_id,
        "name": "Rear Admiral Hopper",
        "version": 2,
    }
    data = ok(svc, UPDATE_TEACHER, {"id": teacher_id, "i": {}, "v": 2})
    assert data["updateTeacher"]["teacher"]["version"] == 3

    before = scan(svc)
    result = run(svc, UPDATE_TEACHER, {"id": teacher_id, "i": {"name": "X"}, "v": 2})
    assert single_error(result, "CONFLICT")["currentVersion"] == 3
    assert scan(svc) == before
    assert ok(svc, TEACHER, {"id": teacher_id})["teacher"]["name"] == "Rear Admiral Hopper"
    assert_clean(svc)


def test_duplicate_teacher_id_is_already_exists(svc: Services) -> None:
    create_teacher(svc, "t1", "Grace")
    before = scan(svc)
    result = run(
        svc,
        f"""mutation {{ createTeacher(input: {{id: "t1", name: "Alan"}}) {{
          teacher {{ id }} {USER_ERRORS} }} }}""",
    )
    assert single_error(result, "ALREADY_EXISTS")["field"] == "id"
    assert scan(svc) == before
    assert_clean(svc)


def test_delete_teacher_with_classes_is_conflict_until_they_are_deleted(svc: Services) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_class(svc, "c2", "t1")
    before = scan(svc)
    result = run(svc, DELETE_TEACHER, {"id": "t1"})
    single_error(result, "CONFLICT")
    message = result.user_errors[0]["message"]
    assert "2 class" in message and "delete them" in message
    assert scan(svc) == before

    ok(svc, DELETE_CLASS, {"id": "c1"})
    single_error(run(svc, DELETE_TEACHER, {"id": "t1"}), "CONFLICT")
    ok(svc, DELETE_CLASS, {"id": "c2"})
    assert ok(svc, DELETE_TEACHER, {"id": "t1"}) == {"deleteTeacher": deleted("t1")}
    assert ok(svc, TEACHER, {"id": "t1"})["teacher"] is None
    assert catalog(svc, "teachers") == []
    left = {(i["PK"].rsplit("#", 1)[0], i["type"], i.get("count")) for i in scan(svc)}
    assert left == {("COUNT#CATALOG#TEACHER", "counter", 0), ("COUNT#CATALOG#CLASS", "counter", 0)}
    assert_clean(svc)


def test_delete_teacher_after_its_class_moved_away(svc: Services) -> None:
    create_teacher(svc, "t1")
    create_teacher(svc, "t2")
    create_class(svc, "c1", "t1")
    ok(svc, UPDATE_CLASS, {"id": "c1", "i": {"teacherId": "t2"}})
    assert ok(svc, DELETE_TEACHER, {"id": "t1"}) == {"deleteTeacher": deleted("t1")}
    single_error(run(svc, DELETE_TEACHER, {"id": "t2"}), "CONFLICT")
    assert_clean(svc)


def test_delete_or_update_unknown_teacher_is_not_found(svc: Services) -> None:
    single_error(run(svc, DELETE_TEACHER, {"id": "nobody"}), "NOT_FOUND")
    single_error(run(svc, UPDATE_TEACHER, {"id": "nobody", "i": {"name": "X"}}), "NOT_FOUND")
    assert scan(svc) == []


# -- classes ---------------------------------------------------------------------------------


def test_create_class_with_unknown_teacher_is_not_found(svc: Services) -> None:
    result = run(svc, CREATE_CLASS, {"i": {"id": "c1", "subject": "Math", "teacherId": "nobody"}})
    assert single_error(result, "NOT_FOUND")["field"] == "teacherId"
    assert scan(svc) == []


def test_create_class_is_listed_by_its_teacher_and_the_catalog(svc: Services) -> None:
    create_teacher(svc, "t1", "Grace")
    data = ok(svc, CREATE_CLASS, {"i": {"subject": " Math ", "teacherId": "t1"}})["createClass"][
        "class"
    ]
    class_id = data["id"]
    assert ID_RE.fullmatch(class_id)
    assert data == {
        "id": class_id,
        "subject": "Math",
        "studentCount": 0,
        "version": 1,
        "teacher": {"id": "t1", "name": "Grace"},
    }
    assert teacher_classes(svc, "t1") == [
        {"id": class_id, "subject": "Math", "teacher": {"id": "t1", "name": "Grace"}}
    ]
    assert catalog(svc, "classes") == [class_id]
    # The catalog answers `teacher { name }` from the class's copy: one Query, no reads.
    result = run(svc, "{ classes { edges { node { id teacher { id name } } } } }")
    assert result.problems == []
    assert result.data["classes"]["edges"][0]["node"]["teacher"] == {"id": "t1", "name": "Grace"}
    assert dynamodb_requests(result) == 1
    assert ok(svc, TEACHER, {"id": "t1"})["teacher"]["version"] == 1
    assert_clean(svc)


def test_duplicate_class_id_is_already_exists_and_writes_nothing(svc: Services) -> None:
    create_teacher(svc, "t1")
    create_teacher(svc, "t2")
    create_class(svc, "c1", "t1", "Math")
    before = scan(svc)
    for teacher_id in ("t1", "t2"):
        result = run(
            svc, CREATE_CLASS, {"i": {"id": "c1", "subject": "Art", "teacherId": teacher_id}}
        )
        assert single_error(result, "ALREADY_EXISTS")["field"] == "id"
        assert scan(svc) == before
    assert_clean(svc)


def test_class_subject_rename_reaches_every_copy(svc: Services) -> None:
    create_teacher(svc, "t1", "Grace")
    create_class(svc, "c1", "t1", "Math")
    create_class(svc, "c2", "t1", "Art")
    for n in range(3):
        create_student(svc, f"S{n}", id=f"s{n}")
        assert enroll(svc, f"s{n}", "c1").problems == []
        assert enroll(svc, f"s{n}", "c2").problems == []

    data = ok(svc, UPDATE_CLASS, {"id": "c1", "i": {"subject": "Mathematics"}, "v": 1})
    assert data["updateClass"]["class"] == {
        "id": "c1",
        "subject": "Mathematics",
        "studentCount": 3,
        "version": 2,
        "teacher": {"id": "t1", "name": "Grace"},
    }
    for n in range(3):
        assert {c["id"]: c["subject"] for c in student_classes(svc, f"s{n}")} == {
            "c1": "Mathematics",
            "c2": "Art",
        }
    assert {c["id"]: c["subject"] for c in teacher_classes(svc, "t1")} == {
        "c1": "Mathematics",
        "c2": "Art",
    }
    assert ids_of(class_students(svc, "c1")) == ["s0", "s1", "s2"]
    assert_clean(svc)


def test_update_class_with_stale_version_is_conflict(svc: Services) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1", "Math")
    ok(svc, UPDATE_CLASS, {"id": "c1", "i": {"subject": "Algebra"}})
    before = scan(svc)
    result = run(svc, UPDATE_CLASS, {"id": "c1", "i": {"subject": "Art"}, "v": 1})
    assert single_error(result, "CONFLICT")["currentVersion"] == 2
    assert scan(svc) == before
    assert_clean(svc)


def test_update_class_teacher_moves_the_class(svc: Services) -> None:
    create_teacher(svc, "t1", "Grace")
    create_teacher(svc, "t2", "Alan")
    create_class(svc, "c1", "t1", "Math")
    create_class(svc, "c2", "t1", "Art")
    for n in range(2):
        create_student(svc, f"S{n}", id=f"s{n}")
        assert enroll(svc, f"s{n}", "c1").problems == []

    data = ok(svc, UPDATE_CLASS, {"id": "c1", "i": {"teacherId": "t2"}})
    assert data["updateClass"]["class"]["teacher"] == {"id": "t2", "name": "Alan"}
    assert data["updateClass"]["class"]["version"] == 2
    assert ids_of(teacher_classes(svc, "t1")) == ["c2"]
    assert teacher_classes(svc, "t2") == [
        {"id": "c1", "subject": "Math", "teacher": {"id": "t2", "name": "Alan"}}
    ]
    for n in range(2):
        assert student_classes(svc, f"s{n}") == [
            {"id": "c1", "subject": "Math", "teacher": {"id": "t2", "name": "Alan"}}
        ]
    result = run(svc, "{ classes { edges { node { id teacher { id name } } } } }")
    assert [e["node"] for e in result.data["classes"]["edges"]] == [
        {"id": "c1", "teacher": {"id": "t2", "name": "Alan"}},
        {"id": "c2", "teacher": {"id": "t1", "name": "Grace"}},
    ]

    # Moving and renaming at once.
    data = ok(svc, UPDATE_CLASS, {"id": "c1", "i": {"teacherId": "t1", "subject": "Maths"}})
    assert data["updateClass"]["class"]["teacher"] == {"id": "t1", "name": "Grace"}
    assert student_classes(svc, "s0") == [
        {"id": "c1", "subject": "Maths", "teacher": {"id": "t1", "name": "Grace"}}
    ]
    assert teacher_classes(svc, "t2") == []
    assert_clean(svc)


def test_update_class_to_unknown_teacher_is_not_found_and_changes_nothing(
    svc: Services,
) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    before = scan(svc)
    result = run(svc, UPDATE_CLASS, {"id": "c1", "i": {"teacherId": "nobody", "subject": "X"}})
    assert single_error(result, "NOT_FOUND")["field"] == "teacherId"
    assert scan(svc) == before
    single_error(run(svc, UPDATE_CLASS, {"id": "nobody", "i": {"subject": "X"}}), "NOT_FOUND")
    assert_clean(svc)


def test_delete_class_with_students_is_conflict_and_an_empty_one_goes(svc: Services) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_class(svc, "c2", "t1")
    create_student(svc, "Ada", id="s1")
    assert enroll(svc, "s1", "c1").problems == []
    before = scan(svc)
    result = run(svc, DELETE_CLASS, {"id": "c1"})
    single_error(result, "CONFLICT")
    assert "unenroll" in result.user_errors[0]["message"]
    assert scan(svc) == before

    assert ok(svc, DELETE_CLASS, {"id": "c2"}) == {"deleteClass": deleted("c2")}
    assert class_node(svc, "c2") is None
    assert catalog(svc, "classes") == ["c1"]
    assert ids_of(teacher_classes(svc, "t1")) == ["c1"]

    assert unenroll(svc, "s1", "c1").problems == []
    assert ok(svc, DELETE_CLASS, {"id": "c1"}) == {"deleteClass": deleted("c1")}
    assert catalog(svc, "classes") == []
    assert teacher_classes(svc, "t1") == []
    single_error(run(svc, DELETE_CLASS, {"id": "c1"}), "NOT_FOUND")
    assert_clean(svc)


# -- sports ----------------------------------------------------------------------------------


def test_create_and_update_sport_coach(svc: Services) -> None:
    data = ok(svc, CREATE_SPORT, {"i": {"name": " Chess ", "coach": " Kasparov "}})["createSport"][
        "sport"
    ]
    sport_id = data["id"]
    assert ID_RE.fullmatch(sport_id)
    assert data == {
        "id": sport_id,
        "name": "Chess",
        "coach": "Kasparov",
        "studentCount": 0,
        "version": 1,
    }
    assert catalog(svc, "sports") == [sport_id]

    data = ok(svc, UPDATE_SPORT, {"id": sport_id, "i": {"name": "Go"}})["updateSport"]["sport"]
    assert (data["name"], data["coach"], data["version"]) == ("Go", "Kasparov", 2)
    data = ok(svc, UPDATE_SPORT, {"id": sport_id, "i": {"coach": None}})["updateSport"]["sport"]
    assert (data["name"], data["coach"], data["version"]) == ("Go", None, 3)
    data = ok(svc, UPDATE_SPORT, {"id": sport_id, "i": {"coach": "Lee"}, "v": 3})["updateSport"][
        "sport"
    ]
    assert (data["name"], data["coach"], data["version"]) == ("Go", "Lee", 4)
    assert sport_node(svc, sport_id) == data

    before = scan(svc)
    result = run(svc, UPDATE_SPORT, {"id": sport_id, "i": {"coach": None}, "v": 3})
    assert single_error(result, "CONFLICT")["currentVersion"] == 4
    assert scan(svc) == before
    assert_clean(svc)


def test_sport_rename_reaches_student_sports(svc: Services) -> None:
    create_sport(svc, "p1", "Chess")
    create_sport(svc, "p2", "Go")
    for n in range(3):
        create_student(svc, f"S{n}", id=f"s{n}")
        assert join(svc, f"s{n}", "p1").problems == []
    assert join(svc, "s0", "p2").problems == []
    ok(svc, UPDATE_SPORT, {"id": "p1", "i": {"name": "Speed chess"}})
    for n in range(3):
        names = {s["id"]: s["name"] for s in student_sports(svc, f"s{n}")}
        assert names["p1"] == "Speed chess"
    assert {s["id"]: s["name"] for s in student_sports(svc, "s0")}["p2"] == "Go"
    assert_clean(svc)


def test_delete_sport_with_members_is_conflict(svc: Services) -> None:
    create_sport(svc, "p1")
    create_student(svc, "Ada", id="s1")
    assert join(svc, "s1", "p1").problems == []
    before = scan(svc)
    result = run(svc, DELETE_SPORT, {"id": "p1"})
    single_error(result, "CONFLICT")
    assert "leave" in result.user_errors[0]["message"].lower()
    assert scan(svc) == before

    assert leave(svc, "s1", "p1").problems == []
    assert ok(svc, DELETE_SPORT, {"id": "p1"}) == {"deleteSport": deleted("p1")}
    assert sport_node(svc, "p1") is None
    assert catalog(svc, "sports") == []
    single_error(run(svc, DELETE_SPORT, {"id": "p1"}), "NOT_FOUND")
    assert_clean(svc)


def test_duplicate_sport_id_is_already_exists(svc: Services) -> None:
    create_sport(svc, "p1", "Chess")
    before = scan(svc)
    result = run(svc, CREATE_SPORT, {"i": {"id": "p1", "name": "Go"}})
    assert single_error(result, "ALREADY_EXISTS")["field"] == "id"
    assert scan(svc) == before
    assert_clean(svc)


# -- enrolments and memberships --------------------------------------------------------------


def test_enroll_and_unenroll_answer_with_the_new_count(svc: Services) -> None:
    create_teacher(svc, "t1", "Grace")
    create_class(svc, "c1", "t1", "Math")
    for n in range(3):
        create_student(svc, f"S{n}", id=f"s{n}")
    for n in range(3):
        result = enroll(svc, f"s{n}", "c1")
        assert result.data == {
            "enrollStudent": {"class": {"id": "c1", "studentCount": n + 1}, "userErrors": []}
        }
    assert ids_of(class_students(svc, "c1")) == ["s0", "s1", "s2"]
    assert student_classes(svc, "s1") == [
        {"id": "c1", "subject": "Math", "teacher": {"id": "t1", "name": "Grace"}}
    ]
    result = unenroll(svc, "s1", "c1")
    assert result.data == {
        "unenrollStudent": {"class": {"id": "c1", "studentCount": 2}, "userErrors": []}
    }
    assert ids_of(class_students(svc, "c1")) == ["s0", "s2"]
    assert student_classes(svc, "s1") == []
    assert_clean(svc)


def test_enrolling_twice_is_already_exists_and_counts_once(svc: Services) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_student(svc, "Ada", id="s1")
    assert enroll(svc, "s1", "c1").problems == []
    before = scan(svc)
    result = enroll(svc, "s1", "c1")
    single_error(result, "ALREADY_EXISTS")
    assert scan(svc) == before
    assert class_node(svc, "c1")["studentCount"] == 1  # type: ignore[index]
    assert len(of_type(scan(svc), "enrolment")) == 1
    assert_clean(svc)


def test_unenrolling_a_student_not_enrolled_is_not_found_and_keeps_the_count(
    svc: Services,
) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_class(svc, "c2", "t1")
    create_student(svc, "Ada", id="s1")
    create_student(svc, "Bob", id="s2")
    assert enroll(svc, "s1", "c1").problems == []
    before = scan(svc)
    single_error(unenroll(svc, "s2", "c1"), "NOT_FOUND")  # someone else is enrolled
    single_error(unenroll(svc, "s1", "c2"), "NOT_FOUND")  # an empty class: never below zero
    single_error(unenroll(svc, "nobody", "c1"), "NOT_FOUND")
    single_error(unenroll(svc, "s1", "nothing"), "NOT_FOUND")
    assert scan(svc) == before
    assert class_node(svc, "c1")["studentCount"] == 1  # type: ignore[index]
    assert class_node(svc, "c2")["studentCount"] == 0  # type: ignore[index]

    assert unenroll(svc, "s1", "c1").data == {
        "unenrollStudent": {"class": {"id": "c1", "studentCount": 0}, "userErrors": []}
    }
    single_error(unenroll(svc, "s1", "c1"), "NOT_FOUND")
    assert class_node(svc, "c1")["studentCount"] == 0  # type: ignore[index]
    assert_clean(svc)


@pytest.mark.parametrize(
    ("student_id", "class_id", "field"),
    [("nobody", "c1", "studentId"), ("s1", "nothing", "classId")],
)
def test_enrolling_unknown_student_or_class_is_not_found_naming_the_field(
    svc: Services, student_id: str, class_id: str, field: str
) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_student(svc, "Ada", id="s1")
    before = scan(svc)
    result = enroll(svc, student_id, class_id)
    assert single_error(result, "NOT_FOUND")["field"] == field
    assert scan(svc) == before
    assert_clean(svc)


def test_join_and_leave_sport(svc: Services) -> None:
    create_sport(svc, "p1", "Chess")
    create_sport(svc, "p2", "Go")
    create_student(svc, "Ada", id="s1")
    create_student(svc, "Bob", id="s2")
    assert join(svc, "s1", "p1").data == {
        "joinSport": {"sport": {"id": "p1", "studentCount": 1}, "userErrors": []}
    }
    assert join(svc, "s2", "p1").data == {
        "joinSport": {"sport": {"id": "p1", "studentCount": 2}, "userErrors": []}
    }
    assert student_sports(svc, "s1") == [{"id": "p1", "name": "Chess"}]
    assert ids_of(sport_students(svc, "p1")) == ["s1", "s2"]

    before = scan(svc)
    single_error(join(svc, "s1", "p1"), "ALREADY_EXISTS")
    single_error(leave(svc, "s1", "p2"), "NOT_FOUND")
    assert scan(svc) == before
    assert sport_node(svc, "p2")["studentCount"] == 0  # type: ignore[index]

    assert join(svc, "s1", "nothing").user_errors == [
        {
            "code": "NOT_FOUND",
            "message": "sport nothing does not exist",
            "field": "sportId",
            "currentVersion": None,
        }
    ]
    assert join(svc, "nobody", "p1").user_errors[0]["field"] == "studentId"
    assert scan(svc) == before

    assert leave(svc, "s1", "p1").data == {
        "leaveSport": {"sport": {"id": "p1", "studentCount": 1}, "userErrors": []}
    }
    assert ids_of(sport_students(svc, "p1")) == ["s2"]
    assert student_sports(svc, "s1") == []
    single_error(leave(svc, "s1", "p1"), "NOT_FOUND")
    assert sport_node(svc, "p1")["studentCount"] == 1  # type: ignore[index]
    assert_clean(svc)


def test_student_rename_reaches_every_list_that_shows_the_name(svc: Services) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_sport(svc, "p1")
    create_student(svc, "Ada", id="s1", home=HOME)
    create_student(svc, "Bob", id="s2", home=HOME)
    for student_id in ("s1", "s2"):
        assert enroll(svc, student_id, "c1").problems == []
        assert join(svc, student_id, "p1").problems == []

    data = ok(svc, UPDATE_STUDENT, {"id": "s1", "i": {"name": "Ada Lovelace"}})
    assert data["updateStudent"]["student"]["version"] == 2
    expected = [{"id": "s1", "name": "Ada Lovelace"}, {"id": "s2", "name": "Bob"}]
    assert class_students(svc, "c1") == expected
    assert sport_students(svc, "p1") == expected
    assert by_location(svc, "USA", "CA") == expected
    assert_clean(svc)


def test_student_paging_through_class_students(svc: Services) -> None:
    """`all_pages` (used by the other tests) really pages: 3 pages of 2."""
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    for n in range(5):
        create_student(svc, f"S{n}", id=f"s{n}")
        assert enroll(svc, f"s{n}", "c1").problems == []
    pages = all_pages(
        svc,
        """query($after: String) { class(id: "c1") { students(first: 2, after: $after) {
          edges { node { id } } pageInfo { hasNextPage endCursor } } } }""",
        ["class", "students"],
    )
    assert ids_of(pages) == [f"s{n}" for n in range(5)]


# -- input validation: BAD_USER_INPUT naming the field, before any request -------------------


@pytest.fixture(scope="module")
def school(endpoint: str) -> Iterator[Services]:
    """A small graph shared by the validation tests, which must not change it."""
    with fresh_services(endpoint) as services:
        create_teacher(services, "t1")
        create_class(services, "c1", "t1")
        create_sport(services, "p1")
        create_student(services, "Ada", "ada@ex.org", id="s1", home=HOME)
        yield services


BAD_NAMES = {
    "empty": "",
    "blank": " \t ",
    "201 chars": "x" * 201,
    "control char": "Ada\x07",
}
BAD_EMAILS = {"no at": "ada.example.org", "spaces": "ada lovelace@ex.org"}
BAD_PLACES = {"empty": "", "101 chars": "x" * 101}
BAD_IDS = {"hash": "a#b", "slash": "a/b", "65 chars": "a" * 65}

# (mutation document, variables with a {bad} placeholder value, field named in the error)
NAME_CASES = [
    (CREATE_STUDENT, {"i": {"name": "{bad}", "email": "x@ex.org"}}, "name"),
    (UPDATE_STUDENT, {"id": "s1", "i": {"name": "{bad}"}}, "name"),
    (
        CREATE_TEACHER,
        {"i": {"name": "{bad}"}},
        "name",
    ),
    (UPDATE_TEACHER, {"id": "t1", "i": {"name": "{bad}"}}, "name"),
    (CREATE_CLASS, {"i": {"subject": "{bad}", "teacherId": "t1"}}, "subject"),
    (UPDATE_CLASS, {"id": "c1", "i": {"subject": "{bad}"}}, "subject"),
    (CREATE_SPORT, {"i": {"name": "{bad}"}}, "name"),
    (CREATE_SPORT, {"i": {"name": "Chess", "coach": "{bad}"}}, "coach"),
    (UPDATE_SPORT, {"id": "p1", "i": {"name": "{bad}"}}, "name"),
    (UPDATE_SPORT, {"id": "p1", "i": {"coach": "{bad}"}}, "coach"),
]
EMAIL_CASES = [
    (CREATE_STUDENT, {"i": {"name": "Ada", "email": "{bad}"}}, "email"),
    (UPDATE_STUDENT, {"id": "s1", "i": {"email": "{bad}"}}, "email"),
]


def _home_with(part: str) -> dict[str, Any]:
    return {**HOME, part: "{bad}"}


PLACE_CASES = [
    case
    for part in ("country", "state", "city", "street")
    for case in (
        (
            CREATE_STUDENT,
            {"i": {"name": "Bob", "email": "bob@ex.org", "home": _home_with(part)}},
            f"home.{part}",
        ),
        (SET_HOME, {"id": "s1", "h": _home_with(part)}, f"home.{part}"),
    )
]
ENROLL = f"""mutation($s: ID!, $c: ID!) {{
  enrollStudent(studentId: $s, classId: $c) {{ class {{ id }} {USER_ERRORS} }} }}"""
UNENROLL = f"""mutation($s: ID!, $c: ID!) {{
  unenrollStudent(studentId: $s, classId: $c) {{ class {{ id }} {USER_ERRORS} }} }}"""
JOIN = f"""mutation($s: ID!, $c: ID!) {{
  joinSport(studentId: $s, sportId: $c) {{ sport {{ id }} {USER_ERRORS} }} }}"""
LEAVE = f"""mutation($s: ID!, $c: ID!) {{
  leaveSport(studentId: $s, sportId: $c) {{ sport {{ id }} {USER_ERRORS} }} }}"""
ID_CASES = [
    (CREATE_STUDENT, {"i": {"id": "{bad}", "name": "Bob", "email": "bob@ex.org"}}, "id"),
    (
        CREATE_TEACHER,
        {"i": {"id": "{bad}", "name": "T"}},
        "id",
    ),
    (CREATE_CLASS, {"i": {"id": "{bad}", "subject": "Art", "teacherId": "t1"}}, "id"),
    (CREATE_SPORT, {"i": {"id": "{bad}", "name": "Go"}}, "id"),
    (UPDATE_STUDENT, {"id": "{bad}", "i": {"name": "X"}}, "id"),
    (DELETE_STUDENT, {"id": "{bad}"}, "id"),
    (SET_HOME, {"id": "{bad}", "h": HOME}, "studentId"),
    (UPDATE_TEACHER, {"id": "{bad}", "i": {"name": "X"}}, "id"),
    (DELETE_TEACHER, {"id": "{bad}"}, "id"),
    (CREATE_CLASS, {"i": {"subject": "Art", "teacherId": "{bad}"}}, "teacherId"),
    (UPDATE_CLASS, {"id": "{bad}", "i": {"subject": "X"}}, "id"),
    (UPDATE_CLASS, {"id": "c1", "i": {"teacherId": "{bad}"}}, "teacherId"),
    (DELETE_CLASS, {"id": "{bad}"}, "id"),
    (UPDATE_SPORT, {"id": "{bad}", "i": {"name": "X"}}, "id"),
    (DELETE_SPORT, {"id": "{bad}"}, "id"),
    (ENROLL, {"s": "{bad}", "c": "c1"}, "studentId"),
    (ENROLL, {"s": "s1", "c": "{bad}"}, "classId"),
    (UNENROLL, {"s": "{bad}", "c": "c1"}, "studentId"),
    (UNENROLL, {"s": "s1", "c": "{bad}"}, "classId"),
    (JOIN, {"s": "{bad}", "c": "p1"}, "studentId"),
    (JOIN, {"s": "s1", "c": "{bad}"}, "sportId"),
    (LEAVE, {"s": "{bad}", "c": "p1"}, "studentId"),
    (LEAVE, {"s": "s1", "c": "{bad}"}, "sportId"),
]


def _fill(value: Any, bad: str) -> Any:
    if value == "{bad}":
        return bad
    if isinstance(value, dict):
        return {k: _fill(v, bad) for k, v in value.items()}
    return value


def _operation_name(document: str) -> str:
    return re.search(r"\{\s*(\w+)\(", document).group(1)  # type: ignore[union-attr]


def _cases(cases: list[tuple[str, dict[str, Any], str]], bad_values: dict[str, str]) -> list[Any]:
    return [
        pytest.param(
            document,
            _fill(variables, bad),
            field,
            id=f"{_operation_name(document)}-{field}-{label}",
        )
        for document, variables, field in cases
        for label, bad in bad_values.items()
    ]


@pytest.mark.parametrize(
    ("document", "variables", "field"),
    _cases(NAME_CASES, BAD_NAMES)
    + _cases(EMAIL_CASES, BAD_EMAILS)
    + _cases(PLACE_CASES, BAD_PLACES)
    + _cases(ID_CASES, BAD_IDS),
)
def test_invalid_input_is_refused_before_any_request(
    school: Services, document: str, variables: dict[str, Any], field: str
) -> None:
    before = scan(school)
    result = run(school, document, variables)
    assert single_error(result, "BAD_USER_INPUT")["field"] == field
    assert dynamodb_requests(result) == 0
    assert scan(school) == before


def test_valid_edge_values_are_accepted(svc: Services) -> None:
    """The limits are inclusive: 200-character names, 100-character places, 64-char ids."""
    home = {"country": "c" * 100, "state": "s" * 100, "city": "y" * 100, "street": "t" * 100}
    created = create_student(svc, "n" * 200, "a@b.co", id="i" * 64, home=home)
    assert created["name"] == "n" * 200 and created["home"] == home
    assert ok(svc, UPDATE_STUDENT, {"id": "i" * 64, "i": {"name": "Ü" * 200}})
    stored = get_item(svc, "STUDENT#" + "i" * 64, "STUDENT#" + "i" * 64)
    assert stored is not None and stored["name"] == "Ü" * 200 and stored["home"] == home
    assert_clean(svc)


def test_places_too_long_for_a_key_are_bad_user_input(svc: Services) -> None:
    wide = "\U0001d1c0" * 100  # 100 characters that fold to 1,200 bytes of key
    created = run(
        svc,
        f"""mutation($s: String!) {{ createStudent(input: {{name: "A", email: "a@ex.org",
          home: {{country: "X", state: $s, city: "Y"}}}}) {{ student {{ id }} {USER_ERRORS} }}
        }}""",
        {"s": wide},
    )
    assert created.errors == [] and created.user_codes == ["BAD_USER_INPUT"]
    assert created.user_errors[0]["field"] == "home.state"
    assert scan(svc) == []
    searched = run(
        svc,
        'query($s: String!) { studentsByLocation(country: "X", state: $s) { edges { cursor } } }',
        {"s": wide},
    )
    assert searched.codes == ["BAD_USER_INPUT"]


def test_mutations_of_one_document_run_in_order_and_each_answers_its_own_write(
    svc: Services,
) -> None:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    create_student(svc, "Ada", id="s1")
    create_student(svc, "Bob", id="s2")
    count = f"class {{ studentCount }} {USER_ERRORS}"
    named = f"student {{ name version }} {USER_ERRORS}"
    data = ok(
        svc,
        f"""mutation {{
          a: enrollStudent(studentId: "s1", classId: "c1") {{ {count} }}
          b: enrollStudent(studentId: "s2", classId: "c1") {{ {count} }}
          c: unenrollStudent(studentId: "s1", classId: "c1") {{
            {count} student {{ classes {{ edges {{ node {{ id }} }} }} }} }}
          d: updateStudent(id: "s2", input: {{name: "Bobby"}}) {{ {named} }}
          e: updateStudent(id: "s2", input: {{name: "Robert"}}) {{ {named} }}
        }}""",
    )
    assert data == {
        "a": {"class": {"studentCount": 1}, "userErrors": []},
        "b": {"class": {"studentCount": 2}, "userErrors": []},
        "c": {
            "class": {"studentCount": 1},
            "student": {"classes": {"edges": []}},
            "userErrors": [],
        },
        "d": {"student": {"name": "Bobby", "version": 2}, "userErrors": []},
        "e": {"student": {"name": "Robert", "version": 3}, "userErrors": []},
    }
    assert class_students(svc, "c1") == [{"id": "s2", "name": "Robert"}]
    assert_clean(svc)


def test_a_failed_mutation_keeps_the_results_of_the_others_in_its_document(
    svc: Services,
) -> None:
    """The sport created first stays in `data`, not lost to a `data: null`."""
    result = run(
        svc,
        f"""mutation {{
          createSport(input: {{id: "p1", name: "Chess"}}) {{ sport {{ id name }} {USER_ERRORS} }}
          deleteTeacher(id: "unknown") {{ deletedId {USER_ERRORS} }}
          createTeacher(input: {{id: "t1", name: "Grace"}}) {{ teacher {{ id }} {USER_ERRORS} }}
        }}""",
    )
    assert result.errors == []
    assert result.data == {
        "createSport": {"sport": {"id": "p1", "name": "Chess"}, "userErrors": []},
        "deleteTeacher": {
            "deletedId": None,
            "userErrors": [
                {
                    "code": "NOT_FOUND",
                    "message": "teacher unknown does not exist",
                    "field": "id",
                    "currentVersion": None,
                }
            ],
        },
        # Mutations after the failed one still run, in order.
        "createTeacher": {"teacher": {"id": "t1"}, "userErrors": []},
    }
    assert sport_node(svc, "p1") == {
        "id": "p1",
        "name": "Chess",
        "coach": None,
        "studentCount": 0,
        "version": 1,
    }
    assert catalog(svc, "teachers") == ["t1"]
    assert_clean(svc)


def test_a_stale_expected_version_is_a_user_error_with_the_current_version(
    svc: Services,
) -> None:
    create_teacher(svc, "t1", "Grace")
    ok(svc, UPDATE_TEACHER, {"id": "t1", "i": {"name": "Grace H"}})
    result = run(svc, UPDATE_TEACHER, {"id": "t1", "i": {"name": "X"}, "v": 1})
    assert payload(result, "updateTeacher") == {
        "teacher": None,
        "userErrors": [
            {
                "code": "CONFLICT",
                "message": "teacher t1 is at version 2, not 1: read it again and reapply your"
                " change",
                "field": "expectedVersion",
                "currentVersion": 2,
            }
        ],
    }
    assert result.errors == []


def test_an_unavailable_mutation_is_a_graphql_error_that_nulls_only_its_own_field(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the client cannot fix stays a GraphQL error with extensions.code; it nulls its
    own (nullable) mutation field, and the mutations before it keep their results."""

    async def busy(*_: Any, **__: Any) -> None:
        raise Unavailable("DynamoDB is busy; try again shortly")

    monkeypatch.setattr(teachers, "transact", busy)
    result = run(
        svc,
        f"""mutation {{
          createSport(input: {{id: "p1", name: "Chess"}}) {{ sport {{ id }} {USER_ERRORS} }}
          createTeacher(input: {{id: "t1", name: "Grace"}}) {{ teacher {{ id }} {USER_ERRORS} }}
        }}""",
    )
    assert result.data == {
        "createSport": {"sport": {"id": "p1"}, "userErrors": []},
        "createTeacher": None,
    }
    assert result.codes == ["UNAVAILABLE"]
    assert result.errors[0]["path"] == ["createTeacher"]
    assert result.user_errors == []
    monkeypatch.undo()
    assert catalog(svc, "sports") == ["p1"]
    assert catalog(svc, "teachers") == []


def test_every_mutation_answers_a_nullable_payload_with_user_errors() -> None:
    """The contract a client codes against, for each mutation (new ones included): one
    failure nulls at most its own field, and client errors come in `userErrors`."""
    mutation = schema._schema.mutation_type
    assert mutation is not None
    for name, field in mutation.fields.items():
        assert not isinstance(field.type, GraphQLNonNull), name
        assert isinstance(field.type, GraphQLObjectType), name
        assert field.type.name == name[0].upper() + name[1:] + "Payload"
        assert str(field.type.fields["userErrors"].type) == "[UserError!]!", name
        others = [f for n, f in field.type.fields.items() if n != "userErrors"]
        assert others and all(not isinstance(f.type, GraphQLNonNull) for f in others), name
