"""Who may write what (graph/policy.py's WRITES): every role x every mutation x its own node
or another's. What a role may do succeeds; what it may not is FORBIDDEN in the payload's
`userErrors` (anonymous on a server with sign-in: UNAUTHENTICATED for the operation), writes
nothing, and its message holds no personal value. The expectations below are written out
by hand, not read from the policy, so a change to the table shows here."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from support import AUTH, USER_ERRORS, fresh_services, hs256, run_on, scan

from graph_api.graph import policy
from graph_api.graph.context import Context, Services
from graph_api.graph.schema import build_schema
from graph_api.graph.tokens import AuthResult
from graph_api.store import admin

SECRETS = ("s1-private@ex.org", "s2-private@ex.org", "1 Hidden Lane", "2 Hidden Lane")

# The school: t1 teaches c1 and c3 (empty), t2 teaches c2 and c4 (empty), t3 teaches nothing;
# s1 and s2 are in c1, c2 and sport p1; s3 is in nothing; p2 has no members.
SETUP = [
    'createTeacher(input: {id: "t1", name: "Tess"})',
    'createTeacher(input: {id: "t2", name: "Tom"})',
    'createTeacher(input: {id: "t3", name: "Tia"})',
    'createClass(input: {id: "c1", subject: "Maths", teacherId: "t1"})',
    'createClass(input: {id: "c2", subject: "Art", teacherId: "t2"})',
    'createClass(input: {id: "c3", subject: "Latin", teacherId: "t1"})',
    'createClass(input: {id: "c4", subject: "Greek", teacherId: "t2"})',
    'createSport(input: {id: "p1", name: "Chess"})',
    'createSport(input: {id: "p2", name: "Rowing"})',
    'createStudent(input: {id: "s1", name: "Sam", email: "s1-private@ex.org",'
    ' home: {country: "NL", state: "NH", city: "Haarlem", street: "1 Hidden Lane"}})',
    'createStudent(input: {id: "s2", name: "Sue", email: "s2-private@ex.org",'
    ' home: {country: "NL", state: "NH", city: "Haarlem", street: "2 Hidden Lane"}})',
    'createStudent(input: {id: "s3", name: "Syd", email: "s3@ex.org"})',
    *(
        f'enrollStudent(studentId: "{s}", classId: "{c}")'
        for s in ("s1", "s2")
        for c in ("c1", "c2")
    ),
    *(f'joinSport(studentId: "{s}", sportId: "p1")' for s in ("s1", "s2")),
]

HOME = '{country: "NL", state: "NH", city: "Leiden", street: "3 New Street"}'

# (mutation, target, arguments): "own" is the teacher's (t1, c1, c3) or the student's (s1).
CASES: list[tuple[str, str, str]] = [
    ("createStudent", "-", 'input: {name: "New", email: "new@ex.org"}'),
    ("updateStudent", "own", 'id: "s1", input: {name: "Samuel"}'),
    ("updateStudent", "other", 'id: "s2", input: {email: "sue@ex.org"}'),
    ("deleteStudent", "own", 'id: "s1"'),
    ("deleteStudent", "other", 'id: "s2"'),
    ("setHome", "own", f'studentId: "s1", home: {HOME}'),
    ("setHome", "other", f'studentId: "s2", home: {HOME}'),
    ("createTeacher", "-", 'input: {id: "t9", name: "Ned"}'),
    ("updateTeacher", "own", 'id: "t1", input: {name: "Tessa"}'),
    ("updateTeacher", "other", 'id: "t2", input: {name: "Thomas"}'),
    ("deleteTeacher", "other", 'id: "t3"'),
    ("createClass", "own", 'input: {id: "c9", subject: "Music", teacherId: "t1"}'),
    ("createClass", "other", 'input: {id: "c9", subject: "Music", teacherId: "t2"}'),
    ("updateClass", "own", 'id: "c1", input: {subject: "Algebra"}'),
    ("updateClass", "other", 'id: "c2", input: {subject: "Drawing"}'),
    ("updateClass", "handover", 'id: "c1", input: {teacherId: "t2"}'),
    ("updateClass", "take", 'id: "c2", input: {teacherId: "t1"}'),
    ("deleteClass", "own", 'id: "c3"'),
    ("deleteClass", "other", 'id: "c4"'),
    ("createSport", "-", 'input: {id: "p9", name: "Golf"}'),
    ("updateSport", "-", 'id: "p1", input: {name: "Go"}'),
    ("deleteSport", "-", 'id: "p2"'),
    ("enrollStudent", "own", 'studentId: "s3", classId: "c1"'),
    ("enrollStudent", "other", 'studentId: "s3", classId: "c2"'),
    ("unenrollStudent", "own", 'studentId: "s1", classId: "c1"'),
    ("unenrollStudent", "other", 'studentId: "s1", classId: "c2"'),
    ("joinSport", "own", 'studentId: "s1", sportId: "p2"'),
    ("joinSport", "other", 'studentId: "s2", sportId: "p2"'),
    ("leaveSport", "own", 'studentId: "s1", sportId: "p1"'),
    ("leaveSport", "other", 'studentId: "s2", sportId: "p1"'),
]
EVERY = {(mutation, target) for mutation, target, _ in CASES}

# What each role may, by hand. Refusals decided on the class item (the class must be the
# caller's when the write commits) read it first; every other refusal sends no request.
ALLOWED: dict[str, set[tuple[str, str]]] = {
    "admin": EVERY,
    "open": EVERY,
    "teacher": {
        ("updateTeacher", "own"),
        ("createClass", "own"),
        ("updateClass", "own"),
        ("enrollStudent", "own"),
        ("unenrollStudent", "own"),
    },
    "student": {
        ("updateStudent", "own"),
        ("setHome", "own"),
        ("joinSport", "own"),
        ("leaveSport", "own"),
    },
    "guardian": set(),
    "unknown-role": set(),  # a role the policy does not know grants nothing
    "no-roles": set(),  # a valid token without a roles claim: signed in, allowed nothing
    "anonymous": set(),
}
DECIDED_ON_THE_CLASS = {
    ("updateClass", "other"),
    ("updateClass", "take"),  # names the caller as the teacher: the class says it is not theirs
    ("enrollStudent", "other"),
    ("unenrollStudent", "other"),
}

CLAIMS: dict[str, dict[str, Any] | None] = {
    "admin": {"roles": ["admin"]},
    "teacher": {"roles": ["teacher"], "graph:teacher": "t1"},
    "student": {"roles": ["student"], "graph:student": "s1"},
    "guardian": {"roles": ["guardian"], "graph:students": ["s1"]},
    "unknown-role": {"roles": ["superuser", "root"], "graph:teacher": "t1"},
    "no-roles": {"roles": None, "graph:student": "s1"},
    "anonymous": None,  # no token
    "open": None,  # no sign-in configured
}


@dataclass
class School:
    services: Services
    snapshot: list[dict[str, Any]]

    def restore(self) -> None:
        table = self.services.settings.table
        admin.delete_items(self.services.dynamo, table)
        admin.batch_write(self.services.dynamo, table, self.snapshot)


def execute_as(services: Services, role: str, query: str) -> tuple[dict[str, Any], Context]:
    async def go() -> tuple[dict[str, Any], Context]:
        claims = CLAIMS[role]
        header = None if claims is None else f"Bearer {hs256(**claims)}"
        auth: AuthResult = await services.auth.authenticate(header)
        context = Context.create(services, f"test-{role}", auth)
        result = await build_schema(services.settings).execute(query, context_value=context)
        errors = [e.formatted for e in result.errors or []]
        return {"data": result.data, "errors": errors}, context

    answer: tuple[dict[str, Any], Context] = run_on(services, go())
    return answer


@contextlib.contextmanager
def school(endpoint: str, **settings: Any) -> Iterator[School]:
    with fresh_services(endpoint, **settings) as services:
        mutations = "\n".join(f"m{n}: {m} {{ {USER_ERRORS} }}" for n, m in enumerate(SETUP))
        who = "admin" if settings else "open"
        answer, _ = execute_as(services, who, f"mutation {{ {mutations} }}")
        assert answer["errors"] == [], answer
        assert all(p["userErrors"] == [] for p in answer["data"].values()), answer
        yield School(services, scan(services))


@pytest.fixture(scope="module")
def signed(endpoint: str) -> Iterator[School]:
    with school(endpoint, **AUTH) as made:
        yield made


@pytest.fixture(scope="module")
def unsigned(endpoint: str) -> Iterator[School]:
    with school(endpoint) as made:
        yield made


@pytest.mark.parametrize("role", sorted(ALLOWED))
def test_every_role_writes_what_the_policy_allows_and_nothing_else(
    role: str, signed: School, backend: str, request: pytest.FixtureRequest
) -> None:
    if role == "open" and backend != "moto":
        # A server with no sign-in runs every write, as admin does: the admin row shows those
        # writes on this backend; the open row is the policy's, the same on every backend.
        pytest.skip("no sign-in writes as admin does: its row runs on the embedded backend")
    where: School = request.getfixturevalue("unsigned") if role == "open" else signed
    for mutation, target, arguments in CASES:
        case = f"{role} {mutation} {target}"
        query = f"mutation {{ {mutation}({arguments}) {{ {USER_ERRORS} }} }}"
        answer, context = execute_as(where.services, role, query)
        messages = [e["message"] for e in answer["errors"]]
        if answer["data"] and answer["data"].get(mutation):
            messages += [e["message"] for e in answer["data"][mutation]["userErrors"]]
        assert not [m for m in messages if any(secret in m for secret in SECRETS)], case
        if (mutation, target) in ALLOWED[role]:
            assert answer["errors"] == [], case
            assert answer["data"][mutation]["userErrors"] == [], (case, answer)
            where.restore()
            continue
        if role == "anonymous":
            assert [e["extensions"]["code"] for e in answer["errors"]] == ["UNAUTHENTICATED"]
            assert answer["data"] is None, case
        else:
            assert answer["errors"] == [], case
            errors = answer["data"][mutation]["userErrors"]
            assert [e["code"] for e in errors] == ["FORBIDDEN"], (case, answer)
        requests = [call.operation for call in context.ledger.calls]
        if (mutation, target) not in DECIDED_ON_THE_CLASS or role != "teacher":
            assert requests == [], (case, requests)  # refused before any read
        assert scan(where.services) == where.snapshot, case


def test_a_rule_that_breaks_refuses_the_write(
    signed: School, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any) -> Any:
        raise KeyError("a claim the rule did not expect")

    monkeypatch.setattr(policy, "may_write", broken)
    query = f'mutation {{ createSport(input: {{id: "p9", name: "Golf"}}) {{ {USER_ERRORS} }} }}'
    answer, context = execute_as(signed.services, "admin", query)
    assert answer["errors"] == []
    assert [e["code"] for e in answer["data"]["createSport"]["userErrors"]] == ["FORBIDDEN"]
    assert context.ledger.calls == []
    assert scan(signed.services) == signed.snapshot


def test_a_condition_the_writer_cannot_apply_refuses_instead_of_allowing(
    signed: School, monkeypatch: pytest.MonkeyPatch
) -> None:
    # deleteClass's writer applies no guard: were the table to grant teachers their own
    # classes' deletion, the condition must not be dropped and the delete let through.
    writes = {**policy.WRITES, "deleteClass": {policy.Role.TEACHER: policy.Owner.TEACHES}}
    monkeypatch.setattr(policy, "WRITES", writes)
    for class_id in ("c3", "c4"):  # t1's own empty class, and another teacher's
        query = f'mutation {{ deleteClass(id: "{class_id}") {{ {USER_ERRORS} }} }}'
        answer, context = execute_as(signed.services, "teacher", query)
        assert answer["errors"] == []
        assert [e["code"] for e in answer["data"]["deleteClass"]["userErrors"]] == ["FORBIDDEN"]
        assert context.ledger.calls == []
    assert scan(signed.services) == signed.snapshot
