"""Relations carried on a node's item are bounded (schema/table.md says why the bounds hold
for a school): a write past a bound is BAD_USER_INPUT, names the bound, and writes nothing."""

from __future__ import annotations

from typing import Any

from support import USER_ERRORS, assert_clean, run, scan, seed

from graph_api.graph.engine.context import Services
from graph_api.model import items
from graph_api.model.items import ENROLMENT, MEMBERSHIP, TEACHING
from graph_api.store.codec import Item


def refused_and_unchanged(svc: Services, document: str, field: str, bound: int) -> None:
    before = scan(svc)
    result = run(svc, document)
    assert result.errors == []
    (problem,) = result.user_errors
    assert problem["code"] == "BAD_USER_INPUT" and problem["field"] == field
    assert f"already has {bound}" in problem["message"] or f"teaches {bound}" in problem["message"]
    assert scan(svc) == before


def test_a_student_at_its_bound_of_sports_cannot_join_another(svc: Services) -> None:
    ada = items.student("ada", "Ada", "ada@ex.org")
    sports = [items.sport(f"p{n:03d}", f"Sport {n}", None) for n in range(MEMBERSHIP.limit + 1)]
    links: list[tuple[Any, Item, Item]] = [(MEMBERSHIP, ada, p) for p in sports[:-1]]
    seed(svc, [ada, *sports], links)
    join = f"""mutation {{ joinSport(studentId: "ada", sportId: "{sports[-1]["id"]}") {{
      sport {{ id }} {USER_ERRORS} }} }}"""
    refused_and_unchanged(svc, join, "sportId", MEMBERSHIP.limit)
    # Leaving one makes room again.
    leave = f"""mutation {{ leaveSport(studentId: "ada", sportId: "p000") {{
      sport {{ id }} {USER_ERRORS} }} }}"""
    assert run(svc, leave).problems == []
    assert run(svc, join).problems == []
    assert_clean(svc)


def test_a_student_at_its_bound_of_classes_cannot_enrol_in_another(svc: Services) -> None:
    ada = items.student("ada", "Ada", "ada@ex.org")
    alice = items.teacher("tA", "Alice")
    classes = [
        items.school_class(f"c{n:03d}", f"Class {n}", alice) for n in range(ENROLMENT.limit + 1)
    ]
    links: list[tuple[Any, Item, Item]] = [(TEACHING, alice, c) for c in classes]
    links += [(ENROLMENT, ada, c) for c in classes[:-1]]
    seed(svc, [ada, alice, *classes], links)
    enrol = f"""mutation {{ enrollStudent(studentId: "ada", classId: "{classes[-1]["id"]}") {{
      class {{ id }} {USER_ERRORS} }} }}"""
    refused_and_unchanged(svc, enrol, "classId", ENROLMENT.limit)
    assert_clean(svc)


def test_a_teacher_at_its_bound_of_classes_gets_no_new_class(svc: Services) -> None:
    alice, bob = items.teacher("tA", "Alice"), items.teacher("tB", "Bob")
    classes = [items.school_class(f"c{n:03d}", f"Class {n}", alice) for n in range(TEACHING.limit)]
    spare = items.school_class("spare", "Spare", bob)
    links: list[tuple[Any, Item, Item]] = [(TEACHING, alice, c) for c in classes]
    seed(svc, [alice, bob, *classes, spare], [*links, (TEACHING, bob, spare)])
    create = f"""mutation {{ createClass(input: {{id: "new", subject: "S", teacherId: "tA"}}) {{
      class {{ id }} {USER_ERRORS} }} }}"""
    refused_and_unchanged(svc, create, "teacherId", TEACHING.limit)
    move = f"""mutation {{ updateClass(id: "spare", input: {{teacherId: "tA"}}) {{
      class {{ id }} {USER_ERRORS} }} }}"""
    refused_and_unchanged(svc, move, "teacherId", TEACHING.limit)
    assert_clean(svc)
