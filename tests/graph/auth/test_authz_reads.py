"""Who reads personal data: `Student.email` and `Home.street` as `graph/auth/policy.py`'s
READS says, wherever they leave. A read matrix (each protected field, by each kind of caller,
by each way of reaching a student), a property test over random query shapes, the bench
queries' request counts for each caller, and tokens and roles over HTTP.

The expectations here are the school's rules written out again, from the seeded items (which
classes a teacher teaches, whom a guardian answers for), not read from the policy module.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jwt
import pytest
from starlette.testclient import TestClient
from support import (
    AUTH,
    README,
    Result,
    awaited,
    bearer,
    close_services,
    dynamodb_requests,
    fresh_services,
    hs256,
    keep_loop,
    live,
    make_settings,
    mutate,
    post,
    run_on,
    subscriber,
)

from bench import queries as bench
from graph_api.graph.auth.policy import CLAIMABLE, READS, WRITES, Owner, Role, may_read
from graph_api.graph.auth.tokens import ANONYMOUS, OPEN, AuthResult, Principal
from graph_api.graph.engine.context import Context, Services
from graph_api.http.app import create_app
from graph_api.ops import demo
from graph_api.settings import Settings
from graph_api.store import admin
from graph_api.store.codec import Item

# -- the school and who is calling ------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class School:
    items: list[Item]
    table: str

    @functools.cached_property
    def students(self) -> dict[str, Item]:
        return {i["id"]: i for i in self.items if i["type"] == "student"}

    def classes_of(self, student_id: str) -> list[str]:
        return sorted(self.students[student_id].get("classes") or {})

    def teacher_of(self, class_id: str) -> str:
        return next(
            i["teacherId"] for i in self.items if i["type"] == "class" and i["id"] == class_id
        )

    @functools.cache  # noqa: B019  (the module's one school: kept as long as the module)
    def taught_by(self, teacher_id: str) -> frozenset[str]:
        """The students in a class the teacher teaches."""
        return frozenset(
            s["id"]
            for s in self.students.values()
            if any(e["teacherId"] == teacher_id for e in (s.get("classes") or {}).values())
        )


@pytest.fixture(scope="module")
def school(endpoint: str) -> Iterator[School]:
    settings = make_settings(endpoint)
    services = Services.create(settings)
    items = demo.generate(students=100, seed=11)
    awaited(admin.create(services.dynamo, settings.table))
    awaited(admin.batch_write(services.dynamo, settings.table, items))
    yield School(items, settings.table)
    awaited(
        services.dynamo.call(
            "DeleteTable", {"TableName": settings.table}, None, missing_table=False
        )
    )
    services.close()


@dataclass(frozen=True)
class Cast:
    """The students and teachers the matrix is about: `me`, a student with a street of its
    own in a class; `other`, another such student, in none of the classes of `teacher`."""

    me: str
    other: str
    klass: str  # a class of `me`, taught by `teacher`
    teacher: str
    stranger: str  # a teacher of none of `me`'s classes
    sport: str | None  # a sport `me` plays, if any


def cast_of(school: School) -> Cast:
    students = school.students
    streets = [
        s["home"]["street"] for s in students.values() if (s.get("home") or {}).get("street")
    ]
    unique = [
        s
        for s in sorted(students)
        if (students[s].get("home") or {}).get("street")
        and streets.count(students[s]["home"]["street"]) == 1
        and school.classes_of(s)
    ]
    me = unique[0]
    klass = school.classes_of(me)[0]
    teacher = school.teacher_of(klass)
    other = next(s for s in unique[1:] if s not in school.taught_by(teacher))
    teachers = sorted({i["id"] for i in school.items if i["type"] == "teacher"})
    stranger = next(t for t in teachers if me not in school.taught_by(t))
    sports = sorted(students[me].get("sports") or {})
    return Cast(me, other, klass, teacher, stranger, sports[0] if sports else None)


@pytest.fixture(scope="module")
def cast(school: School) -> Cast:
    return cast_of(school)


# Who calls: claims of a token (None: no token), on a server with sign-in configured but for
# "open" (no sign-in at all).
CALLERS = (
    "admin",
    "teacher of",
    "teacher not of",
    "student self",
    "other student",
    "guardian of",
    "guardian not of",
    "unknown role",
    "anonymous",
    "open",
)


def caller_claims(caller: str, cast: Cast) -> dict[str, Any] | None:
    return {
        "admin": {"roles": ["admin"]},
        "teacher of": {"roles": ["teacher"], "graph:teacher": cast.teacher},
        "teacher not of": {"roles": ["teacher"], "graph:teacher": cast.stranger},
        "student self": {"roles": ["student"], "graph:student": cast.me},
        "other student": {"roles": ["student"], "graph:student": cast.other},
        "guardian of": {"roles": ["guardian"], "graph:students": [cast.other, cast.me]},
        "guardian not of": {"roles": ["guardian"], "graph:students": [cast.other]},
        # Not roles this API knows ("Admin" is not "admin"): they grant nothing.
        "unknown role": {"roles": ["superuser", "Admin", "staff"]},
    }.get(caller)


def auth_of(caller: str, cast: Cast, settings: Settings) -> AuthResult:
    claims = caller_claims(caller, cast)
    if claims is not None:
        return AuthResult(principal=Principal.of_claims(claims, settings))
    return AuthResult(anonymous=OPEN if caller == "open" else ANONYMOUS)


def readable(caller: str, cast: Cast, school: School, student: str) -> bool:
    """The school's rule, from the data: staff; the student; a guardian of the student; a
    teacher of one of the student's classes."""
    return {
        "admin": True,
        "teacher of": student in school.taught_by(cast.teacher),
        "teacher not of": student in school.taught_by(cast.stranger),
        "student self": student == cast.me,
        "other student": student == cast.other,
        "guardian of": student in (cast.me, cast.other),
        "guardian not of": student == cast.other,
    }.get(caller, False)


# The callers the policy grants the personal fields under some condition.
GRANTED = CALLERS[:7]


def refusal_code(caller: str) -> str:
    return "UNAUTHENTICATED" if caller == "anonymous" else "FORBIDDEN"


@pytest.fixture(scope="module")
def private(endpoint: str, school: School) -> Iterator[Services]:
    """Sign-in configured, personal data not public: the production default."""
    services = keep_loop(
        Services.create(
            make_settings(endpoint, table=school.table, public_personal_data=False, **AUTH)
        )
    )
    yield services
    close_services(services)


@pytest.fixture(scope="module")
def unsigned(endpoint: str, school: School) -> Iterator[Services]:
    """No sign-in configured (a remote table's: no dev tokens either), personal data not
    public: where the caller is "open"."""
    services = keep_loop(
        Services.create(
            make_settings(
                endpoint, table=school.table, public_personal_data=False, backend="remote"
            )
        )
    )
    yield services
    close_services(services)


@pytest.fixture(scope="module")
def as_caller(private: Services, unsigned: Services, cast: Cast) -> Any:
    """(caller, query, variables) -> Result: on the server where the caller calls from."""

    def run(caller: str, query: str, variables: dict[str, Any] | None = None) -> Result:
        services = unsigned if caller == "open" else private
        return execute_as(services, auth_of(caller, cast, services.settings), query, variables)

    return run


def execute_as(
    services: Services, auth: AuthResult, query: str, variables: dict[str, Any] | None = None
) -> Result:
    """`support.execute`, as the caller `auth` says."""
    from graph_api.graph.schema import build_schema

    async def run() -> Result:
        context = Context.create(services, "test-authz", auth)
        schema = build_schema(services.settings)
        result = await schema.execute(query, variable_values=variables, context_value=context)
        errors = [e.formatted for e in result.errors or []]
        return Result(result.data, errors, result.extensions or {}, context)

    result: Result = run_on(services, run())
    return result


# -- the read matrix ---------------------------------------------------------------------------

PERSONAL = "id email home { street }"


def relation_query(relation: str, cast: Cast, school: School) -> tuple[str, dict[str, Any]]:
    """A document that reaches `cast.me` by `relation`, selecting its personal fields."""
    home = school.students[cast.me]["home"]
    return {
        "direct": (f"query($id: ID!) {{ student(id: $id) {{ {PERSONAL} }} }}", {"id": cast.me}),
        "students(ids)": (
            f"query($ids: [ID!]!) {{ students(ids: $ids) {{ {PERSONAL} }} }}",
            {"ids": [cast.other, cast.me]},
        ),
        "roster": (
            f"query($id: ID!) {{ class(id: $id) {{ students(first: 100) {{ edges {{ node"
            f" {{ {PERSONAL} }} }} }} }} }}",
            {"id": cast.klass},
        ),
        "teacher's rosters": (
            f"query($id: ID!) {{ teacher(id: $id) {{ classes(first: 50) {{ edges {{ node {{"
            f" students(first: 100) {{ edges {{ node {{ {PERSONAL} }} }} }} }} }} }} }} }}",
            {"id": cast.teacher},
        ),
        "location page": (
            "query($country: String!, $state: String!, $city: String!) {"
            " studentsByLocation(country: $country, state: $state, city: $city, first: 100)"
            f" {{ edges {{ node {{ {PERSONAL} }} }} }} }}",
            {"country": home["country"], "state": home["state"], "city": home["city"]},
        ),
        "node": (
            f"query($id: ID!) {{ node(id: $id) {{ ... on Student {{ {PERSONAL} }} }} }}",
            {"id": f"Student:{cast.me}"},
        ),
        "nodes": (
            f"query($ids: [ID!]!) {{ nodes(ids: $ids) {{ ...P }} }}"
            f" fragment P on Student {{ {PERSONAL} }}",
            {"ids": [f"Student:{cast.other}", f"Student:{cast.me}"]},
        ),
        "mutation payload": (
            "mutation($id: ID!, $name: String!) { updateStudent(id: $id, input: {name: $name})"
            f" {{ student {{ {PERSONAL} }} userErrors {{ code }} }} }}",
            {"id": cast.me, "name": school.students[cast.me]["name"]},
        ),
    }[relation]


RELATIONS = (
    "direct",
    "students(ids)",
    "roster",
    "teacher's rosters",
    "location page",
    "node",
    "nodes",
    "mutation payload",
)


def found(data: Any, student: str, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The paths of the objects of `data` that are the student `student`."""
    if isinstance(data, dict):
        if data.get("id") == student and "email" in data:
            yield path
        for key, value in data.items():
            yield from found(value, student, (*path, key))
    elif isinstance(data, list):
        for n, value in enumerate(data):
            yield from found(value, student, (*path, n))


def at(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


def assert_sees_as_the_policy_says(
    body: dict[str, Any], caller: str, cast: Cast, school: School, *, may_be_refused: bool = False
) -> None:
    """`cast.me`'s email and street, wherever the answer holds it, are its own for a caller
    who may read them, else null with the refusal's code at their paths; no value of a
    student the caller may not read is anywhere in the answer (errors included)."""
    me = school.students[cast.me]
    paths = list(found(body.get("data"), cast.me))
    if not may_be_refused:
        assert paths, body
    errors = {
        tuple(e["path"]): e["extensions"]["code"] for e in body.get("errors") or [] if "path" in e
    }
    for path in paths:
        student = at(body["data"], path)
        if readable(caller, cast, school, cast.me):
            assert (student["email"], student["home"]["street"]) == (
                me["email"],
                me["home"]["street"],
            ), body
            assert (*path, "email") not in errors and (*path, "home", "street") not in errors
        else:
            assert student["email"] is None and student["home"]["street"] is None, body
            assert errors[(*path, "email")] == refusal_code(caller)
            assert errors[(*path, "home", "street")] == refusal_code(caller)
    assert_no_leak(body, caller, cast, school)


def assert_no_leak(body: Any, caller: str, cast: Cast, school: School) -> None:
    text = json.dumps(body)
    students = school.students
    allowed = {id_ for id_ in students if readable(caller, cast, school, id_)}
    allowed_streets = {(students[id_].get("home") or {}).get("street") for id_ in allowed}
    for id_, student in students.items():
        if id_ in allowed:
            continue
        assert student["email"] not in text, (caller, id_)
        street = (student.get("home") or {}).get("street")
        if street and street not in allowed_streets:  # another's, readable, may share it
            assert street not in text, (caller, id_)


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("caller", CALLERS)
def test_personal_fields_reach_only_whom_the_policy_names(
    as_caller: Any, school: School, cast: Cast, caller: str, relation: str
) -> None:
    query, variables = relation_query(relation, cast, school)
    result = as_caller(caller, query, variables)
    body = {"data": result.data, "errors": result.errors}
    assert {e["extensions"]["code"] for e in result.errors} <= {"FORBIDDEN", "UNAUTHENTICATED"}
    # A mutation its caller may not run (the write rules) answers no student: nothing to see.
    refusable = relation == "mutation payload"
    assert_sees_as_the_policy_says(body, caller, cast, school, may_be_refused=refusable)


def test_a_teacher_reads_the_emails_of_a_class_they_teach_and_no_other(
    private: Services, school: School, cast: Cast
) -> None:
    """A roster of `teacher` read by `teacher`: every email; by another teacher: none."""
    query, variables = relation_query("roster", cast, school)
    roster = {s for s in school.students if cast.klass in (school.students[s].get("classes") or {})}
    own = execute_as(private, auth_of("teacher of", cast, private.settings), query, variables)
    assert own.errors == []
    nodes = [e["node"] for e in own.data["class"]["students"]["edges"]]
    assert {n["id"] for n in nodes} == roster
    assert all(n["email"] == school.students[n["id"]]["email"] for n in nodes)
    theirs = execute_as(
        private, auth_of("teacher not of", cast, private.settings), query, variables
    )
    taught = school.taught_by(cast.stranger)
    shown = {
        n["node"]["id"] for n in theirs.data["class"]["students"]["edges"] if n["node"]["email"]
    }
    assert shown == roster & taught  # a student of theirs too, in another class: theirs to read


# -- subscriptions: each event resolved with its subscriber's own principal --------------------


def event_query(student: str) -> str:
    return f'subscription {{ studentChanged(id: "{student}") {{ kind student {{ {PERSONAL} }} }} }}'


RENAME = """mutation($id: ID!, $name: String!) {
  updateStudent(id: $id, input: {name: $name}) { userErrors { code } } }"""


def test_each_subscriber_sees_an_event_as_its_own_principal(
    endpoint: str, school: School, cast: Cast
) -> None:
    """Subscribers of one student and of a class of theirs, one per caller, hear one write:
    the event's loaders are shared, what each may read is its own (the class's roster too)."""
    callers = [c for c in CALLERS if c != "open"]  # "open" is a server without sign-in: below
    roster = (
        f'subscription {{ classChanged(id: "{cast.klass}") {{ kind class {{'
        f" students(first: 100) {{ edges {{ node {{ {PERSONAL} }} }} }} }} }} }}"
    )
    with (
        live(endpoint, school.items, public_personal_data=False, **AUTH) as (client, services),
        contextlib.ExitStack() as stack,
    ):
        subscribers = {}
        for caller in callers:
            claims = caller_claims(caller, cast)
            init = None if claims is None else {"Authorization": f"Bearer {hs256(**claims)}"}
            subscribers[caller] = stack.enter_context(subscriber(client, services, init))
            subscribers[caller].subscribe("student", event_query(cast.me))
            subscribers[caller].subscribe("class", roster)
        # A new name (a write that changes nothing makes no stream record, so no event),
        # which reaches the roster of each class of the student.
        mutate(client, RENAME, {"id": cast.me, "name": "Renamed"}, bearer(hs256()))
        for caller, sub in subscribers.items():
            heard: dict[str, dict[str, Any]] = {}
            while len(heard) < 2:  # one event of each, in either order
                message = sub.next()
                assert message["type"] == "next", (caller, message)
                heard[message["id"]] = message["payload"]
            assert heard["student"]["data"]["studentChanged"]["kind"] == "UPDATED"
            for payload in heard.values():
                assert_sees_as_the_policy_says(payload, caller, cast, school)


def test_a_subscriber_on_a_server_without_sign_in_sees_no_personal_data(
    endpoint: str, school: School, cast: Cast
) -> None:
    """No sign-in configured (a remote table's: no dev tokens either): open, and personal
    data is for no one unless it is public."""
    with (
        live(endpoint, school.items, public_personal_data=False, backend="remote") as (
            client,
            services,
        ),
        subscriber(client, services) as sub,
    ):
        sub.subscribe("1", event_query(cast.me))
        mutate(client, RENAME, {"id": cast.me, "name": "Renamed"})
        message = sub.next()
        assert message["type"] == "next", message
        assert_sees_as_the_policy_says(message["payload"], "open", cast, school)


# -- random query shapes -----------------------------------------------------------------------


# A student's own fields, for selections too deep for its classes.
SHALLOW = (
    "name",
    "email",
    "e: email",
    "home { city street }",
    "h: home { s: street }",
    "...Personal",
    "... on Student { email home { street } }",
    "nodeId",
)


def student_selection(rng: random.Random) -> str:
    parts = ["id"]
    pool = [*SHALLOW, "classes(first: 3) { edges { node { subject } } }"]
    parts += rng.sample(pool, rng.randint(1, 4))
    return " ".join(parts)


def random_query(rng: random.Random, school: School, cast: Cast) -> str:
    students = sorted(school.students)
    classes = sorted(i["id"] for i in school.items if i["type"] == "class")
    sports = sorted(i["id"] for i in school.items if i["type"] == "sport")
    teachers = sorted(i["id"] for i in school.items if i["type"] == "teacher")
    home = school.students[rng.choice(students)].get("home") or school.students[cast.me]["home"]

    def pick(ids: list[str], n: int) -> str:
        return json.dumps(rng.sample(ids, min(n, len(ids))))

    roots = []
    for n in range(rng.randint(1, 3)):
        sel = student_selection(rng)
        nodes = f"{{ edges {{ node {{ {sel} }} }} }}"
        student = rng.choice([cast.me, cast.other, *students])
        global_ids = json.dumps(["Student:" + s for s in rng.sample(students, 4)])
        place = f"country: {json.dumps(home['country'])}, state: {json.dumps(home['state'])}"
        size = rng.randint(1, 30)
        shape = rng.choice(
            [
                f'student(id: "{student}") {{ {sel} }}',
                f"students(ids: {pick(students, 5)}) {{ {sel} }}",
                f'node(id: "Student:{student}") {{ ... on Student {{ {sel} }} }}',
                f"nodes(ids: {global_ids}) {{ ... on Student {{ {sel} }} }}",
                f'class(id: "{rng.choice(classes)}") {{ subject students(first: {size}) {nodes} }}',
                f'sport(id: "{rng.choice(sports)}") {{ students(first: {size}) {nodes} }}',
                f'teacher(id: "{rng.choice([cast.teacher, *teachers])}") {{ classes(first: 5)'
                f" {{ edges {{ node {{ students(first: 10) {nodes} }} }} }} }}",
                f"studentsByLocation({place}, first: {size}) {nodes}",
            ]
        )
        roots.append(f"r{n}: {shape}")
    document = "query { " + " ".join(roots) + " }"
    if "...Personal" in document:  # an unused fragment would be a validation error
        document += " fragment Personal on Student { email home { street } }"
    return document


@pytest.mark.parametrize("seed", range(4))
def test_no_random_query_shape_shows_a_caller_what_it_may_not_read(
    as_caller: Any, school: School, cast: Cast, seed: int
) -> None:
    rng = random.Random(4600 + seed)
    for _ in range(12):
        caller = rng.choice(CALLERS)
        query = random_query(rng, school, cast)
        result = as_caller(caller, query)
        codes = {e["extensions"]["code"] for e in result.errors}
        assert codes <= {"FORBIDDEN", "UNAUTHENTICATED"}, (query, result.errors)
        assert result.data is not None, (query, result.errors)
        assert_no_leak({"data": result.data, "errors": result.errors}, caller, cast, school)
        if caller == "admin":
            assert result.errors == [], query


# -- random subscription shapes: each event resolved as its subscriber may read ---------------


@dataclass(frozen=True)
class Round:
    """What one round's writes touch: `cast.me` renamed, enrolled into `klass` (a new class
    of `cast.teacher`'s, so no one's right to read changes) and joined to `sport`."""

    klass: str
    sport: str
    name: str


def wrapped(rng: random.Random, type_: str, body: str, fragments: list[str]) -> str:
    """`body` as it is, in an inline fragment, or in a named fragment (added to `fragments`)."""
    how = rng.randrange(3)
    if how == 0:
        return body
    if how == 1:
        return f"... on {type_} {{ {body} }}"
    name = f"F{len(fragments)}"
    fragments.append(f"fragment {name} on {type_} {{ {body} }}")
    return f"...{name}"


def random_subscription(rng: random.Random, shape: str, cast: Cast, round_: Round) -> str:
    """A subscription document of `shape` whose events reach `cast.me` (with its `id`,
    `email` and `home { street }` beside random others), and other students on rosters."""
    fragments: list[str] = []

    def student(room: int) -> str:
        """A student's selection, `room` levels below the root field (the depth limit is 10):
        with its classmates at 2, with its classes at 5 or less, its own fields only else."""
        if room > 5:
            sel = f"id {' '.join(rng.sample(SHALLOW, rng.randint(1, 3)))}"
        else:
            sel = student_selection(rng)
        sel += " email home { street }"
        if room <= 2 and rng.random() < 0.4:
            sel += " mates: classes(first: 6) { edges { node { subject students(first: 100)"
            sel += f" {{ edges {{ node {{ {student(6)} }} }} }} }} }} }}"
        return wrapped(rng, "Student", sel, fragments)

    def roster(room: int) -> str:
        return f"students(first: 100) {{ edges {{ node {{ {student(room + 3)} }} }} }}"

    def klass(room: int) -> str:
        return wrapped(rng, "Class", f"subject teacher {{ name }} {roster(room)}", fragments)

    # Lambdas: only the chosen shape's selections (and their fragments) are made.
    shapes: dict[str, Callable[[], tuple[str, str, str, str]]] = {
        "student": lambda: (
            "studentChanged",
            f'id: "{cast.me}"',
            "StudentChange",
            f"student {{ {student(2)} }}",
        ),
        "class": lambda: (
            "classChanged",
            f'id: "{rng.choice([cast.klass, round_.klass])}"',
            "ClassChange",
            f"enrolment {{ kind studentId student {{ {student(3)} }} }} class {{ {klass(2)} }}",
        ),
        "roster": lambda: (
            "rosterChanged",
            f'classId: "{round_.klass}"',
            "EnrolmentChange",
            f"classId studentId student {{ {student(2)} }} class {{ {klass(2)} }}",
        ),
        "teacher": lambda: (
            "teacherChanged",
            f'id: "{cast.teacher}"',
            "TeacherChange",
            f"teacher {{ name classes(first: 50) {{ edges {{ node {{ {klass(5)} }} }} }} }}",
        ),
        "sport": lambda: (
            "sportChanged",
            f'id: "{round_.sport}"',
            "SportChange",
            f"membership {{ kind student {{ {student(3)} }} }} sport {{ name {roster(2)} }}",
        ),
    }
    root, argument, type_, body = shapes[shape]()
    alias = rng.choice(["", f"{shape}Event: "])
    selection = wrapped(rng, type_, f"kind {body}", fragments)
    document = f"subscription {{ {alias}{root}({argument}) {{ {selection} }} }}"
    if "...Personal" in " ".join([document, *fragments]):
        fragments.append("fragment Personal on Student { email home { street } }")
    return " ".join([document, *fragments])


SUBSCRIPTION_SHAPES = ("student", "class", "roster", "teacher", "sport")

ROUND_WRITES = (
    """mutation($klass: ID!, $teacher: ID!) {
      createClass(input: {id: $klass, subject: "Subscribed", teacherId: $teacher})
      { userErrors { code } } }""",
    """mutation($me: ID!, $klass: ID!) {
      enrollStudent(studentId: $me, classId: $klass) { userErrors { code } } }""",
    """mutation($me: ID!, $sport: ID!) {
      joinSport(studentId: $me, sportId: $sport) { userErrors { code } } }""",
    """mutation($me: ID!, $name: String!) {
      updateStudent(id: $me, input: {name: $name}) { userErrors { code } } }""",
)


def test_no_random_subscription_shape_shows_a_subscriber_what_it_may_not_read(
    endpoint: str, school: School, cast: Cast
) -> None:
    """Each kind of caller subscribes to random documents over every event type (aliases,
    fragments, rosters in classes in teachers); writes make each fire. Every event and error
    holds no personal value of a student the caller may not read, and `cast.me`'s own are
    there for those who may read them, refused at their paths for those who may not."""
    callers = [c for c in CALLERS if c != "open"]  # a server without sign-in: tested above
    free = sorted(
        i["id"]
        for i in school.items
        if i["type"] == "sport" and i["id"] not in (school.students[cast.me].get("sports") or {})
    )
    # What events show, not what they cost: the rows' events would drain a teacher's budget
    # at a rate that depends on the machine's speed (rate limits have their own tests).
    with live(endpoint, school.items, public_personal_data=False, rate_limits="off", **AUTH) as (
        client,
        services,
    ):
        for seed in range(3):
            rng = random.Random(4650 + seed)
            round_ = Round(f"cls-subscribed-{seed}", free[seed], f"Renamed {seed}")
            with contextlib.ExitStack() as stack:
                documents: dict[str, dict[str, str]] = {}
                subscribers = {}
                for caller in callers:
                    claims = caller_claims(caller, cast)
                    init = (
                        None if claims is None else {"Authorization": f"Bearer {hs256(**claims)}"}
                    )
                    sub = stack.enter_context(subscriber(client, services, init))
                    subscribers[caller] = sub
                    # Three shapes: at least two reach `cast.me` in their first event (only a
                    # new class's CREATED may come before anyone is on its roster).
                    shapes = rng.sample(SUBSCRIPTION_SHAPES, 3)
                    documents[caller] = {
                        s: random_subscription(rng, s, cast, round_) for s in shapes
                    }
                    for id_, document in documents[caller].items():
                        sub.subscribe(id_, document)
                variables = {
                    "klass": round_.klass,
                    "teacher": cast.teacher,
                    "me": cast.me,
                    "sport": round_.sport,
                    "name": round_.name,
                }
                for write in ROUND_WRITES:
                    used = {k: v for k, v in variables.items() if f"${k}" in write}
                    mutate(client, write, used, bearer(hs256()))
                for caller, sub in subscribers.items():
                    heard: set[str] = set()
                    seen = False
                    while heard != set(documents[caller]):
                        message = sub.next()
                        id_ = message.get("id", "")
                        where = (seed, caller, documents[caller].get(id_), message)
                        assert message["type"] == "next", where
                        heard.add(id_)
                        payload = message["payload"]
                        assert codes_of(payload) <= {"FORBIDDEN", "UNAUTHENTICATED"}, where
                        assert payload.get("data") is not None, where
                        if caller == "admin":
                            assert "errors" not in payload, where
                        seen = seen or any(found(payload["data"], cast.me))
                        assert_sees_as_the_policy_says(
                            payload, caller, cast, school, may_be_refused=True
                        )
                    assert seen, (seed, caller, documents[caller])


# -- request counts ------------------------------------------------------------------------------


def bench_queries(school: School, cast: Cast) -> list[tuple[str, dict[str, Any]]]:
    students = sorted(school.students)
    home = school.students[cast.me]["home"]
    targets = [
        (bench.Q1, {"ids": students[:30]}),
        (bench.Q2, {"id": cast.klass}),
        (bench.Q3, {"id": cast.teacher}),
        (
            bench.Q4,
            {"id": cast.sport or sorted(i["id"] for i in school.items if i["type"] == "sport")[0]},
        ),
        (bench.Q5, {"country": home["country"], "state": home["state"]}),
    ]
    # And each with the personal fields on every student it shows.
    personal = [(re.sub(r"(\bid\s+name\b)", r"\1 email home { street }", q), v) for q, v in targets]
    assert all(p != q for (p, _), (q, _) in zip(personal, targets, strict=True))
    return targets + personal


@pytest.fixture(scope="module")
def public(endpoint: str, school: School) -> Iterator[Services]:
    """The same table, its personal data public and no sign-in: the counts before roles."""
    services = keep_loop(Services.create(make_settings(endpoint, table=school.table)))
    yield services
    close_services(services)


def test_the_bench_queries_send_as_many_requests_for_every_caller(
    as_caller: Any, public: Services, school: School, cast: Cast
) -> None:
    shapes = bench_queries(school, cast)
    for n, (query, variables) in enumerate(shapes):
        before = execute_as(public, AuthResult(anonymous=OPEN), query, variables)
        assert before.errors == [], before.errors
        expected = dynamodb_requests(before)
        for caller in CALLERS:
            result = as_caller(caller, query, variables)
            sent = dynamodb_requests(result)
            if n < len(shapes) // 2 or caller in GRANTED:
                assert sent == expected, (n, caller, sent, expected)
            else:  # granted nothing: refused before the student items are read, if at all
                assert sent <= expected, (n, caller, sent, expected)


# -- over HTTP: tokens, claims, the embedded backend's dev tokens --------------------------------

DIRECT = "query($id: ID!) { student(id: $id) { name email home { street } } }"


@contextlib.contextmanager
def app(endpoint: str, school: School, **overrides: Any) -> Iterator[TestClient]:
    services = Services.create(make_settings(endpoint, table=school.table, **overrides))
    try:
        with TestClient(create_app(services)) as client:
            yield client
    finally:
        services.close()


def codes_of(body: dict[str, Any]) -> set[str]:
    return {e["extensions"]["code"] for e in body.get("errors") or []}


def test_tokens_of_each_role_read_as_their_claims_say(
    endpoint: str, school: School, cast: Cast
) -> None:
    me = school.students[cast.me]
    with app(endpoint, school, public_personal_data=False, **AUTH) as client:
        for caller in CALLERS[:-1]:
            claims = caller_claims(caller, cast)
            headers = {} if claims is None else bearer(hs256(**claims))
            body = post(client, DIRECT, {"id": cast.me}, headers, status=200)
            assert body["data"]["student"]["name"] == me["name"]
            if readable(caller, cast, school, cast.me):
                assert body["data"]["student"]["email"] == me["email"], caller
                assert "errors" not in body
            else:
                assert body["data"]["student"]["email"] is None, caller
                assert codes_of(body) == {refusal_code(caller)}, caller
            assert_no_leak(body, caller, cast, school)


def test_cognito_groups_and_custom_attributes_map_to_roles_and_ids(
    endpoint: str, school: School, cast: Cast
) -> None:
    """Cognito: roles from `cognito:groups`, the student's id from a custom attribute (an ID
    token's `custom:student_id`, or what a pre-token-generation trigger adds)."""
    cognito = {"roles_claim": "cognito:groups", "student_claim": "custom:student_id"}
    with app(endpoint, school, public_personal_data=False, **AUTH, **cognito) as client:
        own = hs256(roles=None, **{"cognito:groups": ["student"], "custom:student_id": cast.me})
        body = post(client, DIRECT, {"id": cast.me}, bearer(own), status=200)
        assert body["data"]["student"]["email"] == school.students[cast.me]["email"]
        # The default claim names mean nothing on this server.
        default = hs256(roles=["student"], **{"graph:student": cast.me})
        body = post(client, DIRECT, {"id": cast.me}, bearer(default), status=200)
        assert body["data"]["student"]["email"] is None
        assert codes_of(body) == {"FORBIDDEN"}


def test_an_unknown_role_grants_nothing() -> None:
    settings = Settings(**AUTH)
    principal = Principal.of_claims(
        {"roles": ["superuser", "Admin", "open", "anonymous"]}, settings
    )
    assert principal.roles == frozenset()
    both = Principal.of_claims(
        {"roles": "teacher, superuser", "graph:teacher": "tch-001"}, settings
    )
    assert both.roles == {Role.TEACHER} and both.teacher_id == "tch-001"


def test_reads_need_a_token_with_auth_reads_for_every_role(
    endpoint: str, school: School, cast: Cast
) -> None:
    with app(endpoint, school, public_personal_data=False, auth_reads=True, **AUTH) as client:
        refused = post(client, DIRECT, {"id": cast.me})
        assert refused.get("data") is None and codes_of(refused) == {"UNAUTHENTICATED"}
        claims = caller_claims("other student", cast)
        assert claims is not None
        body = post(client, DIRECT, {"id": cast.me}, bearer(hs256(**claims)), status=200)
        assert body["data"]["student"]["name"] == school.students[cast.me]["name"]
        assert codes_of(body) == {"FORBIDDEN"}


def dev_token(*argv: str, capsys: pytest.CaptureFixture[str]) -> str:
    from graph_api import cli

    assert cli.main(["token", *argv]) == 0
    return capsys.readouterr().out.splitlines()[-1]


@pytest.fixture
def embedded_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """`graph-api token` as on `make run`: the embedded backend, no sign-in configured."""
    import os

    for name in list(os.environ):
        if name.startswith(("AWS_", "GRAPH_API_")):
            monkeypatch.delenv(name)


def test_the_embedded_backend_enforces_the_policy_with_its_dev_tokens(
    endpoint: str,
    school: School,
    cast: Cast,
    embedded_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`make run`'s defaults (`Settings.from_env` on the embedded backend): a student's dev
    token reads that student's email only; without a token the caller is anonymous, told
    how to get a dev token, and may not write."""
    me = school.students[cast.me]
    student = dev_token("--role", "student", "--id", cast.me, capsys=capsys)
    other = dev_token("--role", "student", "--id", cast.other, capsys=capsys)
    demo = Settings.from_env({})
    defaults = {"public_personal_data": demo.public_personal_data, "open_writes": demo.open_writes}
    with app(endpoint, school, **defaults) as client:
        own = post(client, DIRECT, {"id": cast.me}, bearer(student), status=200)
        assert own["data"]["student"]["email"] == me["email"] and "errors" not in own
        theirs = post(client, DIRECT, {"id": cast.me}, bearer(other), status=200)
        assert theirs["data"]["student"]["email"] is None and codes_of(theirs) == {"FORBIDDEN"}
        # No token: anonymous, as on a server with sign-in, and told where tokens come from.
        anyone = post(client, DIRECT, {"id": cast.me}, status=200)
        assert anyone["data"]["student"]["name"] == me["name"]
        assert codes_of(anyone) == {"UNAUTHENTICATED"}
        assert "graph-api token" in anyone["errors"][0]["message"]
        assert "no sign-in configured" not in str(anyone)
        anonymous = post(client, RENAME, {"id": cast.me, "name": "X"})
        assert anonymous.get("data") is None and codes_of(anonymous) == {"UNAUTHENTICATED"}
        assert "pick a role in GraphiQL" in anonymous["errors"][0]["message"]
        # A token the dev signer did not sign is no one's: refused, never open.
        forged = post(client, RENAME, {"id": cast.me, "name": "X"}, bearer(hs256()))
        assert forged.get("data") is None and codes_of(forged) == {"UNAUTHENTICATED"}
        same = {"id": cast.me, "name": me["name"]}  # the school is shared: names stay
        renamed = post(client, RENAME, same, bearer(student))
        assert renamed["data"]["updateStudent"]["userErrors"] == []


def test_open_writes_keeps_the_embedded_demo_open_without_a_token(
    endpoint: str, school: School, cast: Cast
) -> None:
    """GRAPH_API_OPEN_WRITES=true: the demo as it was before roles; no token writes, and
    personal data stays the policy's."""
    with app(endpoint, school, public_personal_data=False, open_writes=True) as client:
        anyone = post(client, DIRECT, {"id": cast.me}, status=200)
        assert codes_of(anyone) == {"UNAUTHENTICATED"}  # a dev token would read it
        assert "graph-api token" in anyone["errors"][0]["message"]
        assert "no sign-in configured" not in str(anyone)
        same = {"id": cast.other, "name": school.students[cast.other]["name"]}
        renamed = post(client, RENAME, same)
        assert renamed["data"]["updateStudent"]["userErrors"] == []


def test_graph_api_token_signs_with_the_configured_secret(
    embedded_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from support import AUDIENCE, ISSUER, SECRET

    from graph_api import cli

    monkeypatch.setenv("GRAPH_API_JWT_SECRET", SECRET)
    monkeypatch.setenv("GRAPH_API_JWT_ISSUER", ISSUER)
    monkeypatch.setenv("GRAPH_API_JWT_AUDIENCE", AUDIENCE)
    monkeypatch.setenv("GRAPH_API_GUARDIAN_CLAIM", "custom:wards")
    token = dev_token(
        "--role", "guardian", "--students", "stu-0001,stu-0002", "--ttl", "60", capsys=capsys
    )
    claims = jwt.decode(token, SECRET, algorithms=["HS256"], audience=AUDIENCE, issuer=ISSUER)
    assert claims["roles"] == ["guardian"] and claims["custom:wards"] == ["stu-0001", "stu-0002"]
    assert claims["exp"] - claims["iat"] == 60
    principal = Principal.of_claims(claims, Settings.from_env())
    assert principal.students == {"stu-0001", "stu-0002"}
    for argv in (
        ["--role", "teacher"],  # a teacher is a node: --id
        ["--role", "admin", "--id", "tch-001"],
        ["--role", "student", "--id", "no spaces"],
        ["--role", "guardian"],
        ["--role", "root"],
    ):
        with contextlib.suppress(SystemExit):  # argparse's own refusal exits 2 too
            assert cli.main(["token", *argv]) == 2, argv
        assert capsys.readouterr().out == "", argv
    monkeypatch.delenv("GRAPH_API_JWT_SECRET")
    monkeypatch.setenv("GRAPH_API_JWKS_URL", "https://issuer.test/jwks")
    assert cli.main(["token", "--role", "admin"]) == 2
    assert "JWKS" in capsys.readouterr().err


# -- the README prints the policy ----------------------------------------------------------------


def auth_section() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Acting as a role") :]
    return section[: section.index("\n## ", 1)]


def test_the_readme_prints_the_policy_as_policy_py_has_it() -> None:
    """Each row of the README's policy table names entries of READS or WRITES with the same
    grants: which roles may, and under which condition. The table cannot drift from the code."""
    rows = re.findall(r"^\| (`[\w.]+`(?:, `[\w.]+`)*) \| (.*) \|$", auth_section(), re.M)
    printed = {
        name.strip("`"): cells.split(" | ") for names, cells in rows for name in names.split(", ")
    }
    roles = [Role.ADMIN, Role.TEACHER, Role.STUDENT, Role.GUARDIAN]
    words = {Owner.ANY: "yes", Owner.SELF: "own", Owner.TEACHES: "teaches", Owner.GUARDS: "wards"}
    entries = {**READS, **WRITES}
    assert set(printed) == set(entries)
    for name, grant in entries.items():
        expected = [words[grant[r]] if r in grant else "\N{EN DASH}" for r in roles]
        assert printed[name] == expected, name
    assert set(roles) == CLAIMABLE


def test_the_readme_acts_as_a_teacher_and_as_a_student(
    endpoint: str, embedded_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's example, on `make run`'s school with its personal data private: its
    `graph-api token` commands, and its requests (GET) with the tokens they print."""
    block = re.search(r"```sh\n(TEACHER=.*?)```", auth_section(), re.S)
    assert block is not None
    commands = re.findall(r"^(\w+)=\$\(\.venv/bin/graph-api (.*) \| tail -1\)$", block[1], re.M)
    tokens = {name: dev_token(*shlex.split(argv)[1:], capsys=capsys) for name, argv in commands}
    asked = re.findall(r"Bearer \$(\w+)\" --data-urlencode 'query=(.*)'$", block[1], re.M)
    assert [name for name, _ in asked] == ["TEACHER", "STUDENT"] == list(tokens)
    with fresh_services(endpoint, public_personal_data=False) as services:
        school = demo.generate(students=60, seed=Settings().demo_seed)
        awaited(admin.batch_write(services.dynamo, services.settings.table, school))
        emails = {i["id"]: i["email"] for i in school if i["type"] == "student"}
        with TestClient(create_app(services)) as client:
            answers = [
                client.get("/graphql", params={"query": q}, headers=bearer(tokens[name])).json()
                for name, q in asked
            ]
    teacher, student = answers
    assert "errors" not in teacher
    shown = [e["node"]["email"] for e in teacher["data"]["class"]["students"]["edges"]]
    assert len(shown) == 3 and set(shown) <= set(emails.values())
    assert [s["email"] for s in student["data"]["students"]] == [emails["stu-0001"], None]
    assert codes_of(student) == {"FORBIDDEN"}


def test_a_rule_that_cannot_be_decided_refuses() -> None:
    """Fail closed: a student item whose classes are not what the rule expects is a refusal
    for the rule that reads them, never a pass nor an error."""
    settings = Settings(**AUTH)
    teacher = Principal.of_claims({"roles": ["teacher"], "graph:teacher": "tch-001"}, settings)
    good = {"id": "stu-1", "classes": {"cls-1": {"teacherId": "tch-001"}}}
    assert may_read(teacher, "Student.email", good)
    for classes in (["cls-1"], {"cls-1": "tch-001"}, "tch-001", 7):
        assert not may_read(teacher, "Student.email", {"id": "stu-1", "classes": classes})
    admin_ = Principal.of_claims({"roles": ["admin"]}, settings)
    assert may_read(admin_, "Home.street", {"classes": ["garbage"]})


def test_own_means_the_callers_node_of_that_type() -> None:
    """Ids are unique only within a type: a caller who is teacher `x-1` (and student `stu-9`)
    does not read the personal fields of student `x-1`, only their own."""
    settings = Settings(**AUTH)
    both = Principal.of_claims(
        {"roles": ["student", "teacher"], "graph:teacher": "x-1", "graph:student": "stu-9"},
        settings,
    )
    for field in READS:
        assert not may_read(both, field, {"id": "x-1", "classes": {}})
        assert may_read(both, field, {"id": "stu-9", "classes": {}})


def test_the_dev_signer_is_the_embedded_backends_only(caplog: pytest.LogCaptureFixture) -> None:
    """A remote table never accepts the development tokens, whatever else is set; the
    embedded backend's banner says how to act as a role."""
    import logging

    from graph_api.graph.auth.tokens import DEV_SIGNER, Authenticator, hs256_signer
    from graph_api.http.hosting import announce

    assert hs256_signer(Settings(backend="embedded")) == DEV_SIGNER
    assert hs256_signer(Settings(backend="remote")) is None
    assert hs256_signer(Settings(backend="embedded", jwks_url="https://i.test/jwks")) is None
    configured = hs256_signer(Settings(backend="embedded", **AUTH))
    assert configured is not None and configured.secret == AUTH["jwt_secret"]
    assert not Authenticator(Settings(backend="remote")).dev
    with caplog.at_level(logging.INFO, logger="graph_api"):
        announce(Settings(backend="embedded"))
    assert any("graph-api token --role" in r.getMessage() for r in caplog.records)


def test_every_field_of_a_carried_type_names_what_it_reads() -> None:
    """A `Home` field left out of its table would make every read of students whole."""
    from graph_api.graph.schema import schema
    from graph_api.graph.types.nodes import NodeBase

    carried = {name: table for t in NodeBase.by_kind.values() for name, table in t.carried.items()}
    assert "Home" in carried
    for name, table in carried.items():
        fields = schema._schema.type_map[name].fields  # type: ignore[union-attr]
        assert set(table) == set(fields), name
