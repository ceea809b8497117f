"""Writes that DynamoDB stops taking half-way: a rename or a handover whose node is saved
but whose copies are not all written answers the node saved and its copies pending, and its
to-do is finished by itself (the finisher of a serving process, or `graph-api finish`) once
DynamoDB answers again; a handover revokes the old teacher before it answers."""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support import (
    AUTH,
    USER_ERRORS,
    Faults,
    assert_clean,
    awaited,
    claims,
    fresh_services,
    live_app,
    run_on,
    scan,
    seed,
    throttle,
    until,
)

from graph_api import cli
from graph_api.graph.auth.tokens import AuthResult, Principal
from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import build_schema
from graph_api.model import items
from graph_api.model.items import ENROLMENT, TEACHING
from graph_api.ops.check import check_table
from graph_api.store import retry
from graph_api.store.codec import Item
from graph_api.store.table import Table
from graph_api.writes import finisher


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request policy's count, with sleeps of a millisecond or two: a throttled chunk
    gives up at once, as it would after its retries."""
    monkeypatch.setattr(
        retry, "REQUEST", dataclasses.replace(retry.REQUEST, base=0.0005, cap=0.002)
    )


@pytest.fixture
def services(endpoint: str) -> Iterator[Services]:
    """Sign-in configured, personal data private, and a deadline no busy machine reaches."""
    with fresh_services(
        endpoint, public_personal_data=False, deadline_seconds=60.0, **AUTH
    ) as services:
        yield services


def throttle_transactions_after(faults: Faults, passes: Callable[[dict[str, Any]], bool]) -> None:
    """Every TransactWriteItems is throttled once `passes` (given each one's request) first
    says False: DynamoDB stops taking writes at that point, for good (until `undo`)."""
    stopped = [False]

    def make() -> Any:
        body = faults.sent[-1]
        stopped[0] = stopped[0] or not passes(body)
        return throttle() if stopped[0] else None

    faults.fail("TransactWriteItems", None, make)


def finish_now(services: Services) -> finisher.Finished:
    """What `graph-api finish` does: every to-do finished, however young."""

    async def run_it() -> finisher.Finished:
        table = Table(services.dynamo, services.settings.table, deadline=time.monotonic() + 60)
        return await finisher.finish_all(table, 0.0)

    result: finisher.Finished = run_on(services, run_it())
    return result


def kinds(services: Services) -> set[str]:
    return {f.kind for f in awaited(check_table(services.dynamo, services.settings.table))}


STAFF = {"roles": ["admin"]}


async def as_(services: Services, who: dict[str, Any], query: str, **variables: Any) -> Any:
    principal = Principal.of_claims(claims(**who), services.settings)
    context = Context.create(services, "unfinished", AuthResult(principal=principal))
    schema = build_schema(services.settings)
    return await schema.execute(query, variable_values=variables, context_value=context)


# -- a rename -------------------------------------------------------------------------------

STUDENTS = 100
RENAME = f"""mutation($v: Int) {{
  updateTeacher(id: "t1", input: {{name: "Grace Hopper"}}, expectedVersion: $v)
  {{ teacher {{ id name version }} {USER_ERRORS} }} }}"""


def a_teacher_of_many(services: Services) -> None:
    """t1 ("Grace", version 9) teaches c1 and c2; 100 students are in both: 202 copies of
    the name, more than one transaction holds."""
    t1 = {**items.teacher("t1", "Grace"), "version": 9}
    classes = [items.school_class(c, c.upper(), t1) for c in ("c1", "c2")]
    students = [items.student(f"s{n:03d}", f"S{n}", f"s{n}@ex.org") for n in range(STUDENTS)]
    links: list[tuple[Any, Item, Item]] = [(TEACHING, t1, k) for k in classes]
    links += [(ENROLMENT, s, k) for s in students for k in classes]
    seed(services, [t1, *classes, *students], links)


def names_copied(services: Services) -> set[str]:
    found = scan(services)
    names = {i["teacherName"] for i in found if i["type"] == "class"}
    for student in (i for i in found if i["type"] == "student"):
        names |= {entry["teacherName"] for entry in student["classes"].values()}
    return names


def interrupted_rename(services: Services) -> Any:
    """The rename, with every TransactWriteItems after its first one throttled."""
    a_teacher_of_many(services)
    faults = Faults(services.dynamo)
    count = itertools.count()
    throttle_transactions_after(faults, lambda _: next(count) == 0)
    try:
        return run_on(services, as_(services, STAFF, RENAME, v=9))
    finally:
        faults.undo()


def test_a_rename_interrupted_by_a_throttle_answers_saved_with_its_copies_pending(
    services: Services,
) -> None:
    result = interrupted_rename(services)
    # Saved, and said so: no UNAVAILABLE for a write that happened; no need to send it again.
    assert not result.errors, result.errors
    assert result.data["updateTeacher"]["userErrors"] == []
    assert result.data["updateTeacher"]["teacher"] == {
        "id": "t1",
        "name": "Grace Hopper",
        "version": 10,
    }
    assert result.extensions["copiesPending"]["nodes"] == ["teacher t1"]
    assert names_copied(services) == {"Grace", "Grace Hopper"}  # some copies are behind
    # `check` says they are pending, not broken.
    assert kinds(services) == {"pending"}

    # DynamoDB answers again: the finisher completes the copies, and `check` passes.
    done = finish_now(services)
    assert (done.finished, done.left) == (1, 0)
    assert names_copied(services) == {"Grace Hopper"}
    assert_clean(services)
    assert finish_now(services) == finisher.Finished()  # nothing left to do


def test_a_serving_process_finishes_an_interrupted_rename_by_itself(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not interrupted_rename(services).errors
    assert kinds(services) == {"pending"}
    # Looks every 50 ms, and takes every to-do (in production: past a request's deadline).
    monkeypatch.setattr(finisher, "EVERY", 0.05)
    monkeypatch.setattr(finisher, "grace", lambda _: 0.0)
    with live_app(services):
        until(lambda: names_copied(services) == {"Grace Hopper"}, "the finisher")
        until(lambda: not kinds(services), "the to-do's end")
    assert_clean(services)


# -- a handover -----------------------------------------------------------------------------

PUPILS = 120  # more than one transaction holds: the copies follow
HAND_OVER = f"""mutation {{ updateClass(id: "c1", input: {{teacherId: "t2"}})
  {{ class {{ teacher {{ id }} version }} {USER_ERRORS} }} }}"""
EMAILS = "query($ids: [ID!]!) { students(ids: $ids) { id email } }"


def pupils() -> list[str]:
    return [f"s{n:03d}" for n in range(PUPILS)]


def a_large_class(services: Services) -> None:
    t1, t2 = items.teacher("t1", "Tess"), items.teacher("t2", "Tom")
    c1 = items.school_class("c1", "Maths", t1)
    students = [items.student(s, s.upper(), f"{s}@ex.org") for s in pupils()]
    links: list[tuple[Any, Item, Item]] = [(TEACHING, t1, c1)]
    links += [(ENROLMENT, s, c1) for s in students]
    seed(services, [t1, t2, c1, *students], links)


def emails_read_by(services: Services, teacher: str) -> int:
    """How many of the class's students' emails `teacher` reads."""
    who = {"roles": ["teacher"], "graph:teacher": teacher}
    ids, read = pupils(), 0
    for start in range(0, len(ids), 50):  # students(ids:) takes at most 100
        result = run_on(services, as_(services, who, EMAILS, ids=ids[start : start + 50]))
        assert result.data is not None, result.errors
        read += sum(s["email"] is not None for s in result.data["students"])
    return read


def sets_the_teacher(body: dict[str, Any]) -> bool:
    """Whether a transaction writes the class's own `teacherId` (the handover's swap)."""
    for action in body["TransactItems"]:
        update = action.get("Update", {})
        names = set(update.get("ExpressionAttributeNames", {}).values())
        if (
            update.get("Key", {}).get("PK", {}).get("S") == "CLASS#c1"
            and {
                "teacherId",
                "version",
            }
            <= names
        ):
            return True
    return False


def test_an_interrupted_handover_revokes_the_old_teacher_from_its_answer_on(
    services: Services,
) -> None:
    a_large_class(services)
    assert emails_read_by(services, "t1") == PUPILS
    # DynamoDB takes the class's swap and one transaction after it, then no more.
    faults = Faults(services.dynamo)
    after_swap = [-1]

    def passes(body: dict[str, Any]) -> bool:
        if after_swap[0] < 0 and sets_the_teacher(body):
            after_swap[0] = 0
        elif after_swap[0] >= 0:
            after_swap[0] += 1
        return after_swap[0] <= 1

    throttle_transactions_after(faults, passes)
    try:
        result = run_on(services, as_(services, STAFF, HAND_OVER))
    finally:
        faults.undo()
    assert not result.errors, result.errors
    assert result.data["updateClass"]["class"]["teacher"] == {"id": "t2"}  # saved, and said so
    assert result.extensions["copiesPending"]["nodes"] == ["class c1"]
    # From the answer on, the old teacher reads none of the class's students.
    assert emails_read_by(services, "t1") == 0
    assert emails_read_by(services, "t2") < PUPILS  # the rest come with the finisher
    assert kinds(services) == {"pending"}

    assert finish_now(services).finished == 1
    assert emails_read_by(services, "t2") == PUPILS
    assert emails_read_by(services, "t1") == 0
    assert_clean(services)


def hand_over_throttled_after(services: Services, transactions: int) -> Any:
    """c1 handed to t2 by staff, DynamoDB throttling every transaction after the first
    `transactions` of it: the handover's answer."""
    faults = Faults(services.dynamo)
    count = itertools.count()
    throttle_transactions_after(faults, lambda _: next(count) < transactions)
    try:
        return run_on(services, as_(services, STAFF, HAND_OVER))
    finally:
        faults.undo()


def test_a_handover_interrupted_before_its_swap_is_unavailable_and_undone_by_the_finisher(
    services: Services,
) -> None:
    a_large_class(services)
    # The class marked, and the first chunk of entries revoked: then DynamoDB stops.
    result = hand_over_throttled_after(services, 2)
    assert [e.extensions["code"] for e in result.errors] == ["UNAVAILABLE"]
    # Not handed over; meanwhile the students are read by no teacher (fail closed).
    klass = next(i for i in scan(services) if i["PK"] == "CLASS#c1")
    assert (klass["teacherId"], klass["version"]) == ("t1", 1)
    assert emails_read_by(services, "t2") == 0
    assert emails_read_by(services, "t1") < PUPILS

    assert finish_now(services).finished == 1
    assert emails_read_by(services, "t1") == PUPILS
    assert emails_read_by(services, "t2") == 0
    assert_clean(services)

    # Sent again, it hands the class over whole.
    again = run_on(services, as_(services, STAFF, HAND_OVER))
    assert not again.errors and again.data["updateClass"]["userErrors"] == []
    assert again.data["updateClass"]["class"] == {"teacher": {"id": "t2"}, "version": 2}
    assert (emails_read_by(services, "t1"), emails_read_by(services, "t2")) == (0, PUPILS)
    assert_clean(services)


def test_a_class_renamed_after_a_handover_that_was_never_made_is_left_unmarked(
    services: Services,
) -> None:
    """A copying write of a class a failed handover left marked (before the finisher came)
    rewrites its entries unmarked and drops the mark: nothing stays locked with no to-do."""
    a_large_class(services)
    result = hand_over_throttled_after(services, 2)
    assert [e.extensions["code"] for e in result.errors] == ["UNAVAILABLE"]
    rename = (
        'mutation { updateClass(id: "c1", input: {subject: "Algebra"}) { userErrors { code } } }'
    )
    assert run_on(services, as_(services, STAFF, rename)).data == {
        "updateClass": {"userErrors": []}
    }
    assert emails_read_by(services, "t1") == PUPILS  # the class is still t1's
    assert emails_read_by(services, "t2") == 0
    finish_now(services)  # drops the handover's to-do: nothing of it is left to do
    assert not [i for i in scan(services) if "handingOver" in str(i)]
    assert_clean(services)


def test_a_student_enrolled_while_a_class_is_handed_over_is_read_by_neither_teacher(
    services: Services,
) -> None:
    """An enrolment that commits between the class's mark and its swap copies the mark."""
    a_large_class(services)
    seed(services, [items.student("late", "Late", "late@ex.org")], [])
    result = hand_over_throttled_after(services, 1)  # only the mark
    assert [e.extensions["code"] for e in result.errors] == ["UNAVAILABLE"]
    enrol = 'mutation { enrollStudent(studentId: "late", classId: "c1") { userErrors { code } } }'
    assert run_on(services, as_(services, STAFF, enrol)).data == {
        "enrollStudent": {"userErrors": []}
    }
    who = {"roles": ["teacher"], "graph:teacher": "t1"}
    late = run_on(services, as_(services, who, EMAILS, ids=["late"]))
    assert late.data["students"] == [{"id": "late", "email": None}]
    assert finish_now(services).finished == 1
    late = run_on(services, as_(services, who, EMAILS, ids=["late"]))
    assert late.data["students"] == [{"id": "late", "email": "late@ex.org"}]
    assert_clean(services)


def test_graph_api_finish_completes_what_check_reports_pending(
    services: Services,
    endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert not interrupted_rename(services).errors
    for name in list(os.environ):
        if name.startswith(("AWS_", "GRAPH_API_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    for name, value in {
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "GRAPH_API_TABLE": services.settings.table,
    }.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert cli.main(["check"]) == 1
    report = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in report[:-1]} == {"pending"}
    assert any("teacher t1" in line for line in report)

    assert cli.main(["finish"]) == 0
    assert capsys.readouterr().out.startswith("1 write(s) finished")
    assert cli.main(["check"]) == 0
    assert names_copied(services) == {"Grace Hopper"}
