"""Deterministic demo data: a school of students, teachers, classes, sports and homes."""

from __future__ import annotations

import random

from graph_api.model import items
from graph_api.store.codec import Item

FIRST_NAMES = [
    "Ada",
    "Alan",
    "Amara",
    "Ana",
    "Ben",
    "Chen",
    "Chloé",
    "Dara",
    "Eli",
    "Emma",
    "Farah",
    "Felix",
    "Grace",
    "Hana",
    "Ian",
    "Inès",
    "Jonas",
    "Kai",
    "Lena",
    "Liam",
    "Maya",
    "Mei",
    "Noah",
    "Nora",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sam",
    "Sofia",
    "Tariq",
    "Uma",
    "Vera",
    "Wen",
    "Yara",
    "Zoe",
]
LAST_NAMES = [
    "Abe",
    "Bauer",
    "Costa",
    "Dubois",
    "Evans",
    "Fischer",
    "García",
    "Haddad",
    "Ito",
    "Jensen",
    "Kowalski",
    "Li",
    "Müller",
    "Nakamura",
    "Okafor",
    "Patel",
    "Quispe",
    "Rossi",
    "Santos",
    "Tanaka",
    "Ueda",
    "Varga",
    "Weber",
    "Xu",
    "Yilmaz",
    "Zhang",
]
SUBJECTS = [
    "Algebra",
    "Geometry",
    "Calculus",
    "Statistics",
    "Biology",
    "Chemistry",
    "Physics",
    "Astronomy",
    "History",
    "Geography",
    "Literature",
    "Poetry",
    "Latin",
    "Spanish",
    "French",
    "German",
    "Art",
    "Music",
    "Drama",
    "Economics",
]
SPORTS = (
    ("Football", "Coach Rivera"),
    ("Basketball", "Coach Okoye"),
    ("Swimming", None),
    ("Tennis", "Coach Lind"),
    ("Rowing", "Coach Hart"),
    ("Volleyball", None),
    ("Athletics", "Coach Sato"),
    ("Chess", "Ms. Kasparova"),
    ("Climbing", None),
    ("Fencing", "Coach Duval"),
    ("Badminton", "Coach Tan"),
    ("Cycling", None),
)
# Display spellings are kept; keys normalize them (keys.normalize_place).
PLACES = {
    "United States": {
        "California": ["San Francisco", "Los Angeles", "San Diego"],
        "New York": ["New York City", "Buffalo"],
        "Texas": ["Austin", "Houston"],
    },
    "Canada": {
        "Ontario": ["Toronto", "Ottawa"],
        "Québec": ["Montréal", "Québec City"],
        "British Columbia": ["Vancouver"],
    },
    "Germany": {"Bavaria": ["Munich", "Nuremberg"], "Berlin": ["Berlin"]},
    "Brazil": {"São Paulo": ["São Paulo", "Campinas"], "Rio de Janeiro": ["Rio de Janeiro"]},
}
STREETS = ("Main St", "Oak Ave", "Elm Road", "Harbour Way", "Station Rd", "Lindenstraße")


def generate(students: int = 500, seed: int = 7) -> list[Item]:
    """Every item of a demo school, node counts scaled from the number of students.

    The default (500 students) gives 25 teachers, 60 classes and 12 sports; each student is
    in 3-6 classes and 0-3 sports, and 19 of 20 have a home. The last items are the
    counters of the catalogs and of every place someone lives in.
    """
    rng = random.Random(seed)
    teachers = [
        items.teacher(f"tch-{i:03d}", f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}")
        for i in range(1, max(2, round(students / 20)) + 1)
    ]
    classes = [
        items.school_class(
            f"cls-{i:03d}", f"{rng.choice(SUBJECTS)} {i}", teachers[(i - 1) % len(teachers)]
        )
        for i in range(1, max(6, round(students * 0.12)) + 1)
    ]
    sports = [items.sport(f"spt-{i:02d}", name, coach) for i, (name, coach) in enumerate(SPORTS, 1)]

    out: list[Item] = [*teachers]
    by_id = {teacher["id"]: teacher for teacher in teachers}
    for klass in classes:
        items.TEACHING.attach(by_id[klass["teacherId"]], klass)
    for i in range(1, students + 1):
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        home = None
        if rng.random() < 0.95:
            country = rng.choice(list(PLACES))
            state = rng.choice(list(PLACES[country]))
            city = rng.choice(PLACES[country][state])
            street = f"{rng.randint(1, 999)} {rng.choice(STREETS)}" if rng.random() < 0.8 else None
            home = items.Place(country, state, city, street)
        student = items.student(
            f"stu-{i:04d}", f"{first} {last}", f"student{i}@school.example", home
        )
        out += [student, items.email_guard(student)]
        for klass in rng.sample(classes, rng.randint(3, min(6, len(classes)))):
            out.append(_edge(items.ENROLMENT.attach(student, klass)))
        for sport in rng.sample(sports, rng.randint(0, 3)):
            out.append(_edge(items.MEMBERSHIP.attach(student, sport)))
    out += classes + sports
    # The counter shards of the catalogs and places, as the writes that made the school would
    # hold them.
    counters = [items.counter(key, n) for key, n in items.counters(out).items()]
    return out + counters + items.roster_shards(out)


def _edge(item: Item | None) -> Item:
    assert item is not None  # enrolments and memberships have edge items
    return item
