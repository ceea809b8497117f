"""Who may write what (graph/auth/policy.py's WRITES): every role x every mutation x its own node
or another's. What a role may do succeeds; what it may not is FORBIDDEN in the payload's
`userErrors` (anonymous on a server with sign-in: UNAUTHENTICATED for the operation), writes
nothing, and its message holds no personal value. The expectations below are written out
by hand, not read from the policy, so a change to the table shows here."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from graphql import GraphQLObjectType, get_named_type
from support import AUTH, USER_ERRORS, awaited, fresh_services, hs256, run_on, scan

from graph_api.graph.auth import policy
from graph_api.graph.auth.tokens import AuthResult
from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import build_schema, schema
from graph_api.store import admin

SECRETS = (
    "s1-private@ex.org",
    "s2-private@ex.org",
    "s4-private@ex.org",
    "1 Hidden Lane",
    "2 Hidden Lane",
    "4 Hidden Lane",
)

# The school: t1 teaches c1 and c3 (empty), t2 teaches c2 and c4 (empty), t3 teaches nothing;
# s1 and s2 are in c1, c2 and sport p1; s3 is in nothing; s4 is in c2; p2 has no members.
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
    'createStudent(input: {id: "s4", name: "Sol", email: "s4-private@ex.org",'
    ' home: {country: "NL", state: "NH", city: "Leiden", street: "4 Hidden Lane"}})',
    'enrollStudent(studentId: "s4", classId: "c2")',
    *(
        f'enrollStudent(studentId: "{s}", classId: "{c}")'
        for s in ("s1", "s2")
        for c in ("c1", "c2")
    ),
    *(f'joinSport(studentId: "{s}", sportId: "p1")' for s in ("s1", "s2")),
]

HOME = '{country: "NL", state: "NH", city: "Leiden", street: "3 New Street"}'

# (mutation, target, arguments): "own" is the teacher's (t1, c1, c3) or the student's (s1);
# "self" is the student's own enrolment (s1) in the teacher's class; "neither" is neither's.
CASES: list[tuple[str, str, str]] = [
    ("createStudent", "-", 'input: {name: "New", email: "new@ex.org"}'),
    ("updateStudent", "own", 'id: "s1", input: {name: "Samuel"}'),
    ("updateStudent", "other", 'id: "s2", input: {email: "sue@ex.org"}'),
    ("updateStudent", "own email", 'id: "s1", input: {email: "sam@ex.org"}'),
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
    ("enrollStudent", "self", 'studentId: "s1", classId: "c3"'),  # the student s1's own
    ("unenrollStudent", "own", 'studentId: "s1", classId: "c1"'),
    ("unenrollStudent", "other", 'studentId: "s1", classId: "c2"'),
    ("unenrollStudent", "neither", 'studentId: "s2", classId: "c2"'),
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
        ("unenrollStudent", "own"),
    },
    "student": {
        ("updateStudent", "own"),
        ("setHome", "own"),
        ("enrollStudent", "self"),
        ("unenrollStudent", "own"),
        ("unenrollStudent", "other"),
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
    ("unenrollStudent", "other"),
    ("unenrollStudent", "neither"),
}

CLAIMS: dict[str, dict[str, Any] | None] = {
    "admin": {"roles": ["admin"]},
    "teacher": {"roles": ["teacher"], "graph:teacher": "t1"},
    "student": {"roles": ["student"], "graph:student": "s1"},
    "guardian": {"roles": ["guardian"], "graph:students": ["s1"]},
    "teacher of nothing": {"roles": ["teacher"], "graph:teacher": "t3"},
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
        awaited(admin.delete_items(self.services.dynamo, table))
        awaited(admin.batch_write(self.services.dynamo, table, self.snapshot))


def execute_as(
    services: Services, role: str, query: str, variables: dict[str, Any] | None = None
) -> tuple[dict[str, Any], Context]:
    async def go() -> tuple[dict[str, Any], Context]:
        claims = CLAIMS[role]
        header = None if claims is None else f"Bearer {hs256(**claims)}"
        auth: AuthResult = await services.auth.authenticate(header)
        context = Context.create(services, f"test-{role}", auth)
        result = await build_schema(services.settings).execute(
            query, variable_values=variables, context_value=context
        )
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
    with school(endpoint, public_personal_data=False, **AUTH) as made:
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


def email_change(student: str, email: str) -> str:
    return f"""mutation {{ updateStudent(id: "{student}", input: {{email: "{email}"}})
      {{ student {{ id }} userErrors {{ code message field }} }} }}"""


@pytest.mark.parametrize("role", ["student", "teacher", "guardian"])
def test_an_email_change_tells_no_one_but_staff_whether_an_address_is_taken(
    role: str, signed: School
) -> None:
    """The oracle: a student changing their own address to another's heard "belongs to
    another student". Now the address is staff's to change: whoever else sends one gets the
    same FORBIDDEN, taken or not (case and blanks ignored), before anything is read."""
    answers = []
    for email in ("S2-Private@EX.org ", "nobody-has-this@ex.org"):
        answer, context = execute_as(signed.services, role, email_change("s1", email))
        assert answer["errors"] == [], answer
        assert context.ledger.calls == [], (role, email)  # refused before any read
        answers.append(answer["data"]["updateStudent"])
    taken, free = answers
    assert taken == free
    assert [e["code"] for e in taken["userErrors"]] == ["FORBIDDEN"]
    if role == "student":  # their own node: what is not theirs is the argument
        assert taken["userErrors"][0]["field"] == "email"
    assert scan(signed.services) == signed.snapshot


def test_staff_hear_an_address_is_taken_but_not_whose(signed: School) -> None:
    sent = " S2-PRIVATE@ex.org"
    answer, _ = execute_as(signed.services, "admin", email_change("s1", sent))
    assert answer["errors"] == []
    [error] = answer["data"]["updateStudent"]["userErrors"]
    assert (error["code"], error["field"]) == ("ALREADY_EXISTS", "email")
    said = json.dumps(answer).replace(sent.strip(), "")
    assert not re.search(r"\bs2\b|Sue", said), said  # neither the owner's id nor name
    assert scan(signed.services) == signed.snapshot
    # Their own student's address, typed otherwise, is no conflict.
    answer, _ = execute_as(signed.services, "admin", email_change("s1", " S1-Private@ex.org"))
    assert answer["data"]["updateStudent"]["userErrors"] == []
    signed.restore()


# -- no write of a caller's own widens what it reads ---------------------------------------

PERSONAL = "fragment P on Student { id email home { street } }"
ROSTER = "students(first: 20) { edges { node { ...P } } }"

# Every way the school's students' personal fields are read: by id, by global id, in class,
# sport and teacher rosters, by place.
READINGS = [
    "query($ids: [ID!]!) { students(ids: $ids) { ...P } }",
    "query($nodes: [ID!]!) { nodes(ids: $nodes) { ... on Student { ...P } } }",
    f"{{ classes(first: 50) {{ edges {{ node {{ id {ROSTER} }} }} }} }}",
    f"{{ sports(first: 50) {{ edges {{ node {{ id {ROSTER} }} }} }} }}",
    f"{{ teachers(first: 5) {{ edges {{ node {{ classes(first: 5) {{ edges {{ node {{ {ROSTER}"
    " } } } } } } }",
    '{ studentsByLocation(country: "NL", first: 50) { edges { node { ...P } } } }',
]

# What each payload field shows of the students it reaches.
SHOWN = {
    "student": "student { ...P }",
    "class": f"class {{ id {ROSTER} }}",
    "sport": f"sport {{ id {ROSTER} }}",
    "teacher": f"teacher {{ classes(first: 5) {{ edges {{ node {{ {ROSTER} }} }} }} }}",
}

STREET = '{country: "NL", state: "NH", city: "Haarlem", street: "9 Lane"}'

# Writes aimed at widening, for each entry of WRITES ("updateStudent.email" is updateStudent
# sending an email). "{teacher}"/"{student}": the caller's own id, else t1/s1. Run in WRITES'
# order, one after the other: a class the caller creates is then renamed, handed over, and
# enrolled into.
ATTEMPTS: dict[str, list[str]] = {
    "createStudent": [f'input: {{id: "s9", name: "N", email: "s9@ex.org", home: {STREET}}}'],
    "updateStudent": ['id: "{student}", input: {name: "Renamed"}', 'id: "s3", input: {name: "X"}'],
    "updateStudent.email": [
        'id: "{student}", input: {email: "s4-private@ex.org"}',
        'id: "{student}", input: {email: "fresh@ex.org"}',
    ],
    "deleteStudent": ['id: "s3"'],
    "setHome": [f'studentId: "{{student}}", home: {STREET}', f'studentId: "s3", home: {STREET}'],
    "createTeacher": ['input: {id: "t9", name: "Nine"}'],
    "updateTeacher": ['id: "{teacher}", input: {name: "Renamed"}', 'id: "t2", input: {name: "X"}'],
    "deleteTeacher": ['id: "t2"'],
    "createClass": [
        'input: {id: "c9", subject: "Mine", teacherId: "{teacher}"}',
        'input: {id: "c8", subject: "Theirs", teacherId: "t2"}',
    ],
    "updateClass": [
        'id: "c9", input: {subject: "Renamed"}',
        'id: "c1", input: {subject: "Renamed"}',
        'id: "c2", input: {teacherId: "{teacher}"}',
        'id: "c9", input: {teacherId: "t2"}',
    ],
    "deleteClass": ['id: "c4"'],
    "createSport": ['input: {id: "p9", name: "Golf"}'],
    "updateSport": ['id: "p1", input: {coach: "{teacher}"}'],
    "deleteSport": ['id: "p2"'],
    "enrollStudent": [
        f'studentId: "{s}", classId: "{c}"'
        for s in ("s3", "s4", "s2", "{student}")
        for c in ("c9", "c1", "c3", "c2")
    ],
    "unenrollStudent": [
        'studentId: "s1", classId: "c1"',
        'studentId: "{student}", classId: "c2"',
        'studentId: "s4", classId: "c2"',
    ],
    "joinSport": ['studentId: "{student}", sportId: "p2"', 'studentId: "s3", sportId: "p1"'],
    "leaveSport": ['studentId: "{student}", sportId: "p1"'],
}

# A caller of each role whose reads have a condition (a teacher of no class too): a new grant
# to any of these roles is tried here.
WIDENERS = {
    "teacher": policy.Role.TEACHER,
    "teacher of nothing": policy.Role.TEACHER,
    "student": policy.Role.STUDENT,
    "guardian": policy.Role.GUARDIAN,
}


def document(query: str) -> str:
    return f"{query} {PERSONAL}" if "...P" in query else query


def readable(data: Any) -> set[tuple[str, str]]:
    """The personal fields (student id, field) that `data` shows a value of."""
    found: set[tuple[str, str]] = set()
    if isinstance(data, list):
        for value in data:
            found |= readable(value)
    elif isinstance(data, dict):
        if data.get("email") is not None:
            found.add((data["id"], "email"))
        if (data.get("home") or {}).get("street") is not None:
            found.add((data["id"], "street"))
        for value in data.values():
            found |= readable(value)
    return found


def read_all(services: Services, role: str) -> set[tuple[str, str]]:
    ids = sorted(i["id"] for i in scan(services) if i["type"] == "student")
    variables = {"ids": ids, "nodes": [f"Student:{i}" for i in ids]}
    seen: set[tuple[str, str]] = set()
    for query in READINGS:
        used = {k: v for k, v in variables.items() if f"${k}" in query}
        answer, _ = execute_as(services, role, document(query), used)
        assert answer["data"] is not None, (role, query, answer)
        seen |= readable(answer["data"])
    return seen


def payload_selection(mutation: str) -> str:
    """What the mutation's answer shows of the students it reaches: every field of its
    payload that leads to students."""
    mutations = schema._schema.mutation_type
    assert mutations is not None
    payload = get_named_type(mutations.fields[mutation].type)
    assert isinstance(payload, GraphQLObjectType)
    shown = [selection for field, selection in SHOWN.items() if field in payload.fields]
    return " ".join([*shown, USER_ERRORS])


def test_every_attempt_names_a_write_of_the_policy() -> None:
    """A new entry of WRITES (or a new mutation) gets attempts here, or this fails."""
    assert set(ATTEMPTS) == set(policy.WRITES)


def test_no_sequence_of_a_callers_own_writes_widens_what_it_reads(signed: School) -> None:
    """Each caller runs every write the policy grants its roles (read from WRITES, so a new
    grant is tried too), with arguments aimed at reaching students it may not read: after
    each write that succeeds, and in the write's own answer, it reads no personal field it
    could not read before. Each grant is used at least once, so none is tried in vain."""
    used: dict[policy.Role, set[str]] = {role: set() for role in WIDENERS.values()}
    for caller, role in WIDENERS.items():
        claims = CLAIMS[caller]
        assert claims is not None
        own = {
            "teacher": claims.get("graph:teacher", "t1"),
            "student": claims.get("graph:student", "s1"),
        }
        before = read_all(signed.services, caller)
        assert before or caller == "teacher of nothing", caller
        assert ("s4", "email") not in before, caller  # s4 is none of theirs
        for entry, grant in policy.WRITES.items():
            if role not in grant:
                continue
            mutation = entry.partition(".")[0]
            for arguments in ATTEMPTS[entry]:
                filled = arguments.replace("{teacher}", own["teacher"])
                filled = filled.replace("{student}", own["student"])
                query = f"mutation {{ {mutation}({filled}) {{ {payload_selection(mutation)} }} }}"
                answer, _ = execute_as(signed.services, caller, document(query))
                where = (caller, mutation, filled)
                assert readable(answer["data"]) <= before, where
                if answer["data"][mutation]["userErrors"] == []:
                    used[role].add(entry)
                    assert read_all(signed.services, caller) <= before, where
        signed.restore()
    for role, entries in used.items():
        assert entries == {e for e, grant in policy.WRITES.items() if role in grant}, role
