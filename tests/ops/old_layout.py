"""One school, written in either layout: the old one, frozen here because
the package no longer builds it, for `graph-api migrate` to rewrite; and the new one, built
by `graph_api.model.items` with the counters of catalogs and places, which is what migrate
must leave.

`random_school` draws the same school as the old `demo.generate` did for the same arguments
(same draws, same order), so an old-layout demo table can be seeded for timings.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from graph_api.model import items, keys
from graph_api.model.items import ENROLMENT, MEMBERSHIP, TEACHING, Place
from graph_api.ops import demo
from graph_api.store.codec import Item


@dataclass
class Pupil:
    id: str
    name: str
    email: str
    home: Place | None = None
    classes: list[str] = field(default_factory=list)
    sports: list[str] = field(default_factory=list)


@dataclass
class School:
    teachers: dict[str, str] = field(default_factory=dict)  # id -> name
    classes: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> subject, teacher
    sports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # id -> name, coach
    students: list[Pupil] = field(default_factory=list)


def random_school(students: int = 500, seed: int = 7) -> School:
    """The school of the old `demo.generate(students, seed)`."""
    rng = random.Random(seed)
    school = School()
    first, last = demo.FIRST_NAMES, demo.LAST_NAMES
    for i in range(1, max(2, round(students / 20)) + 1):
        school.teachers[f"tch-{i:03d}"] = f"{rng.choice(first)} {rng.choice(last)}"
    teacher_ids = list(school.teachers)
    for i in range(1, max(6, round(students * 0.12)) + 1):
        subject = f"{rng.choice(demo.SUBJECTS)} {i}"
        school.classes[f"cls-{i:03d}"] = (subject, teacher_ids[(i - 1) % len(teacher_ids)])
    for i, (name, coach) in enumerate(demo.SPORTS, 1):
        school.sports[f"spt-{i:02d}"] = (name, coach)
    class_ids, sport_ids = list(school.classes), list(school.sports)
    for i in range(1, students + 1):
        pupil = Pupil(
            f"stu-{i:04d}", f"{rng.choice(first)} {rng.choice(last)}", f"student{i}@school.example"
        )
        if rng.random() < 0.95:
            country = rng.choice(list(demo.PLACES))
            state = rng.choice(list(demo.PLACES[country]))
            city = rng.choice(demo.PLACES[country][state])
            street = (
                f"{rng.randint(1, 999)} {rng.choice(demo.STREETS)}" if rng.random() < 0.8 else None
            )
            pupil.home = Place(country, state, city, street)
        pupil.classes = rng.sample(class_ids, rng.randint(3, min(6, len(class_ids))))
        pupil.sports = rng.sample(sport_ids, rng.randint(0, 3))
        school.students.append(pupil)
    return school


# -- the new layout: graph_api.model.items ---------------------------------------------------


def new_items(school: School) -> list[Item]:
    teachers = {id_: items.teacher(id_, name) for id_, name in school.teachers.items()}
    classes = {
        id_: items.school_class(id_, subject, teachers[teacher_id])
        for id_, (subject, teacher_id) in school.classes.items()
    }
    for klass in classes.values():
        TEACHING.attach(teachers[klass["teacherId"]], klass)
    sports = {id_: items.sport(id_, name, coach) for id_, (name, coach) in school.sports.items()}
    out: list[Item] = []
    for pupil in school.students:
        student = items.student(pupil.id, pupil.name, pupil.email, pupil.home)
        out.append(items.email_guard(student))
        for class_id in pupil.classes:
            out.append(_edge(ENROLMENT.attach(student, classes[class_id])))
        for sport_id in pupil.sports:
            out.append(_edge(MEMBERSHIP.attach(student, sports[sport_id])))
        out.append(student)
    nodes = [*teachers.values(), *classes.values(), *sports.values(), *out]
    # The counters of catalogs and places, which migrate backfills, and the classes'
    # roster counters in shards, which migrate moves the counts on class items into.
    counters = [items.counter(key, n) for key, n in items.counters(nodes).items()]
    return nodes + counters + items.roster_shards(nodes)


def _edge(item: Item | None) -> Item:
    assert item is not None
    return item


# -- the old layout, frozen -------------------------------------------------------------------


def _node(kind: str, id_: str, **attributes: object) -> Item:
    ref = f"{kind}#{id_}"
    item: Item = {"PK": ref, "SK": ref, "type": kind.lower(), "id": id_, "version": 1}
    if kind != "STUDENT":
        item.update({"GSI1PK": f"CATALOG#{kind}", "GSI1SK": ref})
    item.update(attributes)
    return item


def _old_edge(owner: str, owner_id: str, target: str, target_id: str, type_: str) -> Item:
    owner_ref, target_ref = f"{owner}#{owner_id}", f"{target}#{target_id}"
    return {
        "PK": owner_ref,
        "SK": target_ref,
        "GSI1PK": target_ref,
        "GSI1SK": owner_ref,
        "type": type_,
        f"{owner.lower()}Id": owner_id,
        f"{target.lower()}Id": target_id,
    }


def old_items(school: School) -> list[Item]:
    out: list[Item] = []
    teachers = {
        id_: _node("TEACHER", id_, name=name, classCount=0) for id_, name in school.teachers.items()
    }
    classes: dict[str, Item] = {}
    for id_, (subject, teacher_id) in school.classes.items():
        teacher = teachers[teacher_id]
        klass = _node(
            "CLASS",
            id_,
            subject=subject,
            teacherId=teacher_id,
            teacherName=teacher["name"],
            studentCount=0,
        )
        classes[id_] = klass
        edge = _old_edge("TEACHER", teacher_id, "CLASS", id_, "teaching")
        edge.update(subject=subject, teacherName=teacher["name"])
        out.append(edge)
        teacher["classCount"] += 1
    sports = {
        id_: _node("SPORT", id_, name=name, coach=coach, studentCount=0)
        for id_, (name, coach) in school.sports.items()
    }
    for pupil in school.students:
        student = _node("STUDENT", pupil.id, name=pupil.name, email=pupil.email, edgeCount=0)
        out += [student, items.email_guard(student)]
        if pupil.home is not None:
            home = pupil.home
            location = keys.home_location(pupil.id, home.country, home.state, home.city)
            out.append(
                {
                    "PK": f"STUDENT#{pupil.id}",
                    "SK": "HOME",
                    "GSI1PK": keys.location(home.country).pk,  # no location shards then
                    "GSI1SK": location.sk,
                    "type": "home",
                    "studentId": pupil.id,
                    "studentName": pupil.name,
                    "country": home.country,
                    "state": home.state,
                    "city": home.city,
                    "street": home.street,
                }
            )
        for class_id in pupil.classes:
            klass = classes[class_id]
            edge = _old_edge("STUDENT", pupil.id, "CLASS", class_id, "enrolment")
            edge.update(
                studentName=pupil.name,
                subject=klass["subject"],
                teacherId=klass["teacherId"],
                teacherName=klass["teacherName"],
            )
            out.append(edge)
            klass["studentCount"] += 1
            student["edgeCount"] += 1
        for sport_id in pupil.sports:
            sport = sports[sport_id]
            edge = _old_edge("STUDENT", pupil.id, "SPORT", sport_id, "membership")
            edge.update(studentName=pupil.name, sportName=sport["name"])
            out.append(edge)
            sport["studentCount"] += 1
            student["edgeCount"] += 1
    return [*teachers.values(), *classes.values(), *sports.values(), *out]
