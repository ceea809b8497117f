"""A teacher's class writes race staff handing the class to another teacher: the teacher's
write commits only while the class is theirs (a condition in its own transaction), so it
never lands after the handover, and a refusal writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from racing import before_next_transaction
from support import (
    AUTH,
    USER_ERRORS,
    assert_clean,
    claims,
    class_count,
    fresh_services,
    get_item,
    run_on,
    seed,
)

from graph_api.graph.auth import policy
from graph_api.graph.auth.tokens import AuthResult, Principal
from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import build_schema
from graph_api.model import items
from graph_api.model.items import ENROLMENT, TEACHING
from graph_api.store.codec import Item
from graph_api.writes import memberships, propagation

pytestmark = pytest.mark.settings(deadline_seconds=60.0)

TEACHER = {"roles": ["teacher"], "graph:teacher": "t1"}
STAFF = {"roles": ["admin"]}
HAND_OVER = f"""mutation {{ updateClass(id: "c1", input: {{teacherId: "t2", subject: "Staff's"}})
  {{ {USER_ERRORS} }} }}"""


def rename(subject: str) -> str:
    return f"""mutation {{ updateClass(id: "c1", input: {{subject: "{subject}"}})
      {{ class {{ subject }} {USER_ERRORS} }} }}"""


async def as_(services: Services, who: dict[str, Any], query: str) -> dict[str, Any]:
    principal = Principal.of_claims(claims(**who), services.settings)
    context = Context.create(services, "race", AuthResult(principal=principal))
    result = await build_schema(services.settings).execute(query, context_value=context)
    assert not result.errors, result.errors
    assert isinstance(result.data, dict)
    return result.data


def user_codes(data: dict[str, Any]) -> list[str]:
    return [e["code"] for payload in data.values() for e in payload["userErrors"]]


def school(services: Services, pupils: int = 2, enrolled: int = 1) -> list[Item]:
    t1, t2 = items.teacher("t1", "Tess"), items.teacher("t2", "Tom")
    c1 = items.school_class("c1", "Maths", t1)
    students = [items.student(f"s{n:03d}", f"S{n}", f"s{n}@ex.org") for n in range(pupils)]
    links: list[tuple[Any, Item, Item]] = [
        (TEACHING, t1, c1),
        *((ENROLMENT, s, c1) for s in students[:enrolled]),
    ]
    seed(services, [t1, t2, c1, *students], links)
    return students


@pytest.fixture
def signed(endpoint: str, request: pytest.FixtureRequest) -> Iterator[Services]:
    """Services with sign-in configured, and the module's `settings` mark (a deadline long
    enough for a 120-student handover run inside another write on a busy machine)."""
    mark = request.node.get_closest_marker("settings")
    with fresh_services(endpoint, **AUTH, **(mark.kwargs if mark else {})) as services:
        yield services


def hand_over_before_next_transaction(
    services: Services, monkeypatch: pytest.MonkeyPatch, module: Any
) -> list[dict[str, Any]]:
    """Staff hands c1 to t2 just before `module`'s next transaction: after the teacher's
    write has read the class (theirs then), before it writes."""
    return before_next_transaction(monkeypatch, module, lambda: as_(services, STAFF, HAND_OVER))


def the_class(services: Services) -> Item:
    found = get_item(services, "CLASS#c1", "CLASS#c1")
    assert found is not None
    return found


@pytest.mark.parametrize("pupils", [2, 120], ids=["one-transaction", "followed"])
def test_a_handover_between_a_teachers_read_and_write_refuses_the_rename(
    signed: Services, monkeypatch: pytest.MonkeyPatch, pupils: int
) -> None:
    # 120 students: the rename's copies do not fit one transaction, so its first one (the
    # class and its claim) carries the condition.
    school(signed, pupils, enrolled=pupils)
    handed = hand_over_before_next_transaction(signed, monkeypatch, propagation)
    answer = run_on(signed, as_(signed, TEACHER, rename("Teacher's")))
    assert handed and user_codes(handed[0]) == []
    assert user_codes(answer) == ["FORBIDDEN"]
    assert answer["updateClass"]["class"] is None
    klass = the_class(signed)
    assert (klass["subject"], klass["teacherId"]) == ("Staff's", "t2")
    assert_clean(signed)


@pytest.mark.parametrize("mutation", ["enrollStudent", "unenrollStudent"])
def test_a_handover_between_a_teachers_read_and_write_refuses_the_enrolment(
    signed: Services, monkeypatch: pytest.MonkeyPatch, mutation: str
) -> None:
    # Enrolling is not a teacher's (policy.WRITES): a table that granted it on their own
    # classes would still have the writer hold the condition until the write commits.
    teaches = {**policy.WRITES[mutation], policy.Role.TEACHER: policy.Owner.TEACHES}
    monkeypatch.setitem(policy.WRITES, mutation, teaches)
    school(signed, pupils=2, enrolled=1)  # s000 is in c1, s001 is not
    student = "s001" if mutation == "enrollStudent" else "s000"
    handed = hand_over_before_next_transaction(signed, monkeypatch, memberships)
    before = class_count(signed, "c1")
    query = f"""mutation {{ {mutation}(studentId: "{student}", classId: "c1")
      {{ {USER_ERRORS} }} }}"""
    answer = run_on(signed, as_(signed, TEACHER, query))
    assert handed and user_codes(handed[0]) == []
    assert user_codes(answer) == ["FORBIDDEN"]
    assert class_count(signed, "c1") == before
    assert_clean(signed)


def test_a_teacher_unenrolling_a_student_not_in_their_class_hears_not_found(
    signed: Services,
) -> None:
    school(signed, pupils=2, enrolled=1)
    query = f'mutation {{ unenrollStudent(studentId: "s001", classId: "c1") {{ {USER_ERRORS} }} }}'
    assert user_codes(run_on(signed, as_(signed, TEACHER, query))) == ["NOT_FOUND"]


ROUNDS = 12  # both orders happened within these, on both backends, on a quiet machine


def test_a_teachers_rename_racing_a_handover_never_lands_after_it(signed: Services) -> None:
    school(signed, pupils=3, enrolled=3)
    back = """mutation { updateClass(id: "c1", input: {teacherId: "t1", subject: "Maths"})
      { userErrors { code } } }"""

    async def rounds() -> None:
        for n in range(ROUNDS):
            mine = f"Teacher's {n}"
            teacher, staff = await asyncio.gather(
                as_(signed, TEACHER, rename(mine)), as_(signed, STAFF, HAND_OVER)
            )
            assert user_codes(staff) == []
            assert user_codes(teacher) in ([], ["FORBIDDEN"]), teacher
            # Staff's write set the subject: the teacher's, if it committed, came before it.
            klass = await asyncio.to_thread(the_class, signed)
            assert (klass["subject"], klass["teacherId"]) == ("Staff's", "t2"), n
            assert user_codes(await as_(signed, STAFF, back)) == []

    run_on(signed, rounds())
    assert_clean(signed)
