"""Our queries, the PostGraphile peer's logical queries in our schema, and their checks.

The peer (`queries.py` in its folder) answers each one with one SQL statement; these are the
same questions asked of `schema/schema.graphql`, with the targets the peer picks
(`dataset.pick_targets`). Each check compares an answer with the dataset (plain dicts from
the peer's `dataset.generate()`): where a list is cut (`first: N`) our order need not be the
peer's, so a check accepts any N right members and says whether they are the peer's N.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Q1 = """query Q1($ids: [ID!]!) {
  students(ids: $ids) {
    id
    name
    classes { edges { node { subject teacher { name } } } }
    sports { edges { node { name } } }
  }
}"""

Q2 = """query Q2($id: ID!) {
  class(id: $id) {
    subject
    teacher { name }
    students(first: 50) { edges { node { id name } } }
  }
}"""

Q3 = """query Q3($id: ID!) {
  teacher(id: $id) {
    name
    classes(first: 10) {
      edges {
        node {
          id
          subject
          studentCount
          students(first: 10) { edges { node { id name } } }
        }
      }
    }
  }
}"""

Q4 = """query Q4($id: ID!) {
  sport(id: $id) {
    name
    students(first: 20) {
      edges {
        node {
          id
          name
          home { city }
          sports(first: 5) { edges { node { name } } }
        }
      }
    }
  }
}"""

Q5 = """query Q5($country: String!, $state: String!) {
  studentsByLocation(country: $country, state: $state, first: 25) {
    edges { node { id name classes { edges { node { subject } } } } }
  }
}"""


# The search by name: students whose name starts with a prefix, 10 of them with their classes.
# The peer's equivalent (`peer_specs`) is a `LIKE 'prefix%'` on an indexed column.
Q6 = """query Q6($prefix: String!) {
  studentsByName(prefix: $prefix, first: 10) {
    edges { node { id name classes { edges { node { subject } } } } }
  }
}"""
Q6_FIRST = 10


class CheckError(AssertionError):
    pass


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckError(message)


def _nodes(connection: dict[str, Any]) -> list[dict[str, Any]]:
    return [edge["node"] for edge in connection["edges"]]


class School:
    """The dataset's relations, for the expected answers."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.student = {s["id"]: s for s in data["students"]}
        self.home = {h["student_id"]: h for h in data["homes"]}
        self.teacher = {t["id"]: t for t in data["teachers"]}
        self.klass = {c["id"]: c for c in data["classes"]}
        self.sport = {s["id"]: s for s in data["sports"]}
        self.classes_of: dict[str, list[str]] = defaultdict(list)
        self.roster: dict[str, list[str]] = defaultdict(list)
        for e in data["enrollments"]:
            self.classes_of[e["student_id"]].append(e["class_id"])
            self.roster[e["class_id"]].append(e["student_id"])
        self.sports_of: dict[str, list[str]] = defaultdict(list)
        self.members: dict[str, list[str]] = defaultdict(list)
        for x in data["student_sports"]:
            self.sports_of[x["student_id"]].append(x["sport_id"])
            self.members[x["sport_id"]].append(x["student_id"])
        self.classes_of_teacher: dict[str, list[str]] = defaultdict(list)
        for c in data["classes"]:
            self.classes_of_teacher[c["teacher_id"]].append(c["id"])
        for lists in (
            self.classes_of,
            self.roster,
            self.sports_of,
            self.members,
            self.classes_of_teacher,
        ):
            for ids in lists.values():
                ids.sort()

        self.prefix = search_prefix(data)

    def named(self, prefix: str) -> list[str]:
        """The ids of the students whose name starts with `prefix` (the dataset's names are
        ASCII: case alone is folded), by name then id: both sides' order."""
        found = [s for s in self.student.values() if s["name"].lower().startswith(prefix.lower())]
        return [s["id"] for s in sorted(found, key=lambda s: (s["name"].lower(), s["id"]))]

    def subjects(self, student_id: str) -> list[str]:
        return sorted(self.klass[c]["subject"] for c in self.classes_of[student_id])


def _some_of(got: list[str], allowed: list[str], first: int, what: str) -> bool:
    """`got` is `first` distinct members of `allowed` (or all of them); True if they are the
    peer's choice, the first ones by id."""
    _expect(len(set(got)) == len(got), f"{what}: an id comes twice")
    _expect(set(got) <= set(allowed), f"{what}: {sorted(set(got) - set(allowed))} do not belong")
    _expect(len(got) == min(first, len(allowed)), f"{what}: {len(got)} of {len(allowed)}")
    return sorted(got) == allowed[:first]


def _same(peers: bool) -> str:
    return "same as the peer's" if peers else "not the peer's: our order differs"


def check_q1(data: dict[str, Any], school: School, targets: dict[str, Any]) -> str:
    ids = targets["q1_student_ids"]
    got = data["students"]
    _expect([s and s["id"] for s in got] == ids, "Q1: not the 30 students, in order")
    classes = sports = 0
    for s in got:
        sid = s["id"]
        _expect(s["name"] == school.student[sid]["name"], f"Q1: name of {sid}")
        pairs = sorted((n["subject"], n["teacher"]["name"]) for n in _nodes(s["classes"]))
        want = sorted(
            (school.klass[c]["subject"], school.teacher[school.klass[c]["teacher_id"]]["name"])
            for c in school.classes_of[sid]
        )
        _expect(pairs == want, f"Q1: classes of {sid}")
        names = sorted(n["name"] for n in _nodes(s["sports"]))
        _expect(names == sorted(school.sport[x]["name"] for x in school.sports_of[sid]), sid)
        classes, sports = classes + len(pairs), sports + len(names)
    return f"30 students, {classes} classes, {sports} sports"


def check_q2(data: dict[str, Any], school: School, targets: dict[str, Any]) -> str:
    cid = targets["q2_class_id"]
    c = data["class"]
    _expect(c is not None, f"Q2: class {cid} not found")
    _expect(c["subject"] == school.klass[cid]["subject"], "Q2: subject")
    teacher = school.teacher[school.klass[cid]["teacher_id"]]["name"]
    _expect(c["teacher"]["name"] == teacher, "Q2: teacher")
    students = _nodes(c["students"])
    for s in students:
        _expect(s["name"] == school.student[s["id"]]["name"], f"Q2: name of {s['id']}")
    peers = _some_of([s["id"] for s in students], school.roster[cid], 50, "Q2 students")
    return f"class {cid}, {len(students)} of {len(school.roster[cid])} students ({_same(peers)})"


def check_q3(data: dict[str, Any], school: School, targets: dict[str, Any]) -> str:
    tid = targets["q3_teacher_id"]
    t = data["teacher"]
    _expect(t is not None, f"Q3: teacher {tid} not found")
    _expect(t["name"] == school.teacher[tid]["name"], "Q3: teacher name")
    classes = _nodes(t["classes"])
    peers = _some_of([c["id"] for c in classes], school.classes_of_teacher[tid], 10, "Q3 classes")
    for c in classes:
        cid = c["id"]
        _expect(c["subject"] == school.klass[cid]["subject"], f"Q3: subject of {cid}")
        _expect(c["studentCount"] == len(school.roster[cid]), f"Q3: studentCount of {cid}")
        students = _nodes(c["students"])
        for s in students:
            _expect(s["name"] == school.student[s["id"]]["name"], f"Q3: name of {s['id']}")
        ids = [s["id"] for s in students]
        peers = _some_of(ids, school.roster[cid], 10, f"Q3 students of {cid}") and peers
    counts = [c["studentCount"] for c in classes]
    return f"teacher {tid}, {len(classes)} classes, counts {counts} ({_same(peers)})"


def check_q4(data: dict[str, Any], school: School, targets: dict[str, Any]) -> str:
    spid = targets["q4_sport_id"]
    sp = data["sport"]
    _expect(sp is not None, f"Q4: sport {spid} not found")
    _expect(sp["name"] == school.sport[spid]["name"], "Q4: sport name")
    students = _nodes(sp["students"])
    for s in students:
        sid = s["id"]
        _expect(s["name"] == school.student[sid]["name"], f"Q4: name of {sid}")
        _expect(s["home"]["city"] == school.home[sid]["city"], f"Q4: city of {sid}")
        names = sorted(n["name"] for n in _nodes(s["sports"]))
        mine = school.sports_of[sid]
        want = sorted(school.sport[x]["name"] for x in mine)
        _expect(len(names) == min(5, len(mine)) and set(names) <= set(want), f"Q4: sports of {sid}")
    peers = _some_of([s["id"] for s in students], school.members[spid], 20, "Q4 students")
    return f"sport {spid}, {len(students)} of {len(school.members[spid])} students ({_same(peers)})"


def check_q5(data: dict[str, Any], school: School, targets: dict[str, Any]) -> str:
    state = targets["q5_state"]
    residents = sorted(sid for sid, h in school.home.items() if h["state"] == state)
    students = _nodes(data["studentsByLocation"])
    subjects = 0
    for s in students:
        sid = s["id"]
        _expect(s["name"] == school.student[sid]["name"], f"Q5: name of {sid}")
        got = sorted(n["subject"] for n in _nodes(s["classes"]))
        _expect(got == school.subjects(sid), f"Q5: subjects of {sid}")
        subjects += len(got)
    peers = _some_of([s["id"] for s in students], residents, 25, "Q5 residents")
    return (
        f"state {state}, {len(students)} of {len(residents)} residents, {subjects} subjects"
        f" ({_same(peers)})"
    )


def search_prefix(data: dict[str, Any]) -> str:
    """Q6's prefix: the two letters most students' names start with (ties: the first)."""
    starts = Counter(s["name"][:2] for s in data["students"])
    return sorted(starts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def _q6_rows(school: School, students: list[dict[str, Any]], what: str) -> str:
    """Both sides' Q6 check: the first 10 students by name, each with its subjects."""
    want = school.named(school.prefix)
    got = [s["id"] for s in students]
    _expect(got == want[:Q6_FIRST], f"{what}: {got} are not the first {Q6_FIRST} of {want}")
    subjects = 0
    for s in students:
        _expect(s["name"] == school.student[s["id"]]["name"], f"{what}: name of {s['id']}")
        _expect(sorted(s["subjects"]) == school.subjects(s["id"]), f"{what}: subjects")
        subjects += len(s["subjects"])
    return f"prefix {school.prefix!r}, {len(got)} of {len(want)} students, {subjects} subjects"


def check_q6(data: dict[str, Any], school: School, targets: dict[str, Any]) -> str:
    students = [
        {"id": n["id"], "name": n["name"], "subjects": [c["subject"] for c in _nodes(n["classes"])]}
        for n in _nodes(data["studentsByName"])
    ]
    return _q6_rows(school, students, "Q6")


PEER_Q6 = """query Q6($prefix: String!) {
  students(filter: { name: { startsWith: $prefix } }, orderBy: [NAME_ASC, PRIMARY_KEY_ASC],
    first: 10) {
    nodes { rowId name enrollments { nodes { class { subject } } } }
  }
}"""
# The peer's schema has no index on students.name: `LIKE 'prefix%'` (connection-filter's
# `startsWith`) uses this one, made after the peer's load (`bench/peer.py`, `running`).
PEER_INDEXES = "create index students_name_prefix_idx on students (name text_pattern_ops);"


def peer_specs(queries: Any, data: dict[str, Any]) -> list[Any]:
    """Queries of ours the peer's `queries.py` does not ask, as its `Spec`s (its module's
    class, so its bench and ours treat them as its own): Q6."""
    school = School(data)

    def check(resp: dict[str, Any], data: dict[str, Any], targets: dict[str, Any]) -> str:
        students = [
            {
                "id": n["rowId"],
                "name": n["name"],
                "subjects": [e["class"]["subject"] for e in n["enrollments"]["nodes"]],
            }
            for n in resp["students"]["nodes"]
        ]
        return _q6_rows(school, students, "Q6 (peer)")

    title = "10 students whose name starts with a prefix + subjects [LIKE 'prefix%']"
    return [queries.Spec("Q6", title, PEER_Q6, {"prefix": school.prefix}, check)]


Check = Callable[[dict[str, Any], School, dict[str, Any]], str]


@dataclass(frozen=True)
class Ours:
    name: str
    title: str
    query: str
    variables: dict[str, Any] = field(default_factory=dict)
    check: Check = check_q1
    since_base: bool = False  # new since `make bench BASE=`'s commits: not asked of the base


def country_of(data: dict[str, Any], state: str) -> str:
    return str(next(h["country"] for h in data["homes"] if h["state"] == state))


def build(data: dict[str, Any], targets: dict[str, Any]) -> list[Ours]:
    """The five queries with the peer's targets, in the peer's order (Q1..Q5), then Q6
    (the search by name, which the peer's `queries.py` does not ask: `peer_specs`)."""
    state = targets["q5_state"]
    return [
        Ours(
            "Q1",
            "30 students by id + classes (subject, teacher name) + sports",
            Q1,
            {"ids": targets["q1_student_ids"]},
            check_q1,
        ),
        Ours(
            "Q2",
            "a class + teacher name + 50 student names",
            Q2,
            {"id": targets["q2_class_id"]},
            check_q2,
        ),
        Ours(
            "Q3",
            "a teacher + classes (subject, studentCount, 10 names each)",
            Q3,
            {"id": targets["q3_teacher_id"]},
            check_q3,
        ),
        Ours(
            "Q4",
            "a sport + 20 students (name, city, 5 sports each)",
            Q4,
            {"id": targets["q4_sport_id"]},
            check_q4,
        ),
        Ours(
            "Q5",
            "25 students in a state + their class subjects",
            Q5,
            {"country": country_of(data, state), "state": state},
            check_q5,
        ),
        Ours(
            "Q6",
            "10 students whose name starts with a prefix + their class subjects",
            Q6,
            {"prefix": search_prefix(data)},
            check_q6,
            since_base=True,
        ),
    ]
