"""`totalCount` of the catalogs and of `studentsByLocation`: exact after any writes, read from
counter items (one GetItem in the level's BatchGetItem, nothing when not selected), checked
by `graph-api check` and backfilled by `graph-api migrate`."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from support import (
    USER_ERRORS,
    assert_clean,
    awaited,
    calls,
    create_class,
    create_sport,
    create_student,
    create_teacher,
    execute,
    get_item,
    ok,
    run,
    scan,
)

from graph_api.graph.engine.context import Services
from graph_api.model import items, keys
from graph_api.ops.check import check_table
from graph_api.ops.migrate import migrate_table
from graph_api.store import admin
from graph_api.store.codec import Item

# Spellings that name the same place once normalized, and places that differ.
PLACES = {
    "Canada": {
        "Québec": ["Montréal", "MONTRÉAL ", "Laval"],
        "québec": ["Laval"],
        "Ontario": ["Ottawa"],
    },
    "canada": {"Ontario": ["Toronto", "ottawa"]},
    "Brazil": {"São Paulo": ["Campinas", "São Paulo"]},
}
CATALOGS = ("teachers", "classes", "sports")
# The writes drawn ("-": a delete), students and their homes more often than the rest.
WRITES = ["teacher", "class", "sport", "student", "student", "home", "home", "clear"]
WRITES += ["-teacher", "-class", "-sport", "-student"]
LOCATION = """query($c: String!, $s: String, $t: String) {
  studentsByLocation(country: $c, state: $s, city: $t, first: 100) {
    totalCount edges { node { id } } pageInfo { hasNextPage } } }"""
SET_HOME = f"""mutation($id: ID!, $h: HomeInput) {{
  setHome(studentId: $id, home: $h) {{ student {{ id }} {USER_ERRORS} }} }}"""


def delete(services: Services, field: str, id_: str) -> list[str]:
    """Delete a node; the user errors' codes (a teacher with classes is CONFLICT)."""
    result = run(
        services, f"mutation($id: ID!) {{ {field}(id: $id) {{ {USER_ERRORS} }} }}", {"id": id_}
    )
    assert result.errors == [], result.errors
    return result.user_codes


def random_home(rng: random.Random) -> dict[str, Any]:
    country = rng.choice(list(PLACES))
    state = rng.choice(list(PLACES[country]))
    return {"country": country, "state": state, "city": rng.choice(PLACES[country][state])}


def levels(home: dict[str, Any]) -> list[tuple[str, ...]]:
    """The normalized places a home is counted in: its country, state and city."""
    place = tuple(keys.normalize_place(home[k]) for k in ("country", "state", "city"))
    return [place[:1], place[:2], place]


class School:
    """What the writes made, as the test keeps it: the counts every totalCount must say."""

    def __init__(self) -> None:
        self.teachers: dict[str, int] = {}  # id -> classes
        self.classes: dict[str, str] = {}  # id -> teacher id
        self.sports: set[str] = set()
        self.homes: dict[str, dict[str, Any] | None] = {}  # student id -> home
        self.spelled: dict[tuple[str, ...], dict[str, Any]] = {}  # a spelling of each place
        self.made = 0

    def new_id(self, prefix: str) -> str:
        self.made += 1
        return f"{prefix}-{self.made:03d}"

    def at(self, home: dict[str, Any] | None) -> None:
        if home is not None:
            names = [home["country"], home["state"], home["city"]]
            for place in levels(home):
                self.spelled.setdefault(place, dict(zip("cst", names[: len(place)], strict=False)))

    def located(self) -> Counter[tuple[str, ...]]:
        counts: Counter[tuple[str, ...]] = Counter({place: 0 for place in self.spelled})
        for home in self.homes.values():
            if home is not None:
                counts.update(levels(home))
        return counts


def write_at_random(services: Services, school: School, rng: random.Random) -> None:
    """One write of the kinds that change a catalog or a place, or that must not (refused)."""
    op = rng.choice(WRITES)
    if op == "teacher":
        school.teachers[create_teacher(services, school.new_id("tch"))["id"]] = 0
    elif op == "class" and school.teachers:
        teacher = rng.choice(sorted(school.teachers))
        school.classes[create_class(services, school.new_id("cls"), teacher)["id"]] = teacher
        school.teachers[teacher] += 1
    elif op == "sport":
        school.sports.add(create_sport(services, school.new_id("spt"))["id"])
    elif op == "student":
        home = random_home(rng) if rng.random() < 0.8 else None
        student = create_student(services, id=school.new_id("stu"), home=home)["id"]
        school.homes[student] = home
        school.at(home)
        if school.classes and rng.random() < 0.5:  # an edge its delete must shed too
            ok(
                services,
                f"""mutation($s: ID!, $c: ID!) {{ enrollStudent(studentId: $s, classId: $c) {{
                  {USER_ERRORS} }} }}""",
                {"s": student, "c": rng.choice(sorted(school.classes))},
            )
    elif op in ("home", "clear") and school.homes:
        student = rng.choice(sorted(school.homes))
        home = random_home(rng) if op == "home" else None
        ok(services, SET_HOME, {"id": student, "h": home})
        school.homes[student] = home
        school.at(home)
    elif op == "-teacher" and school.teachers:
        teacher = rng.choice(sorted(school.teachers))
        codes = delete(services, "deleteTeacher", teacher)
        assert codes == (["CONFLICT"] if school.teachers[teacher] else [])
        if not codes:
            del school.teachers[teacher]
    elif op == "-class" and school.classes:
        klass = rng.choice(sorted(school.classes))
        if not delete(services, "deleteClass", klass):  # CONFLICT while it has students
            school.teachers[school.classes.pop(klass)] -= 1
    elif op == "-sport" and school.sports:
        sport = rng.choice(sorted(school.sports))
        assert delete(services, "deleteSport", sport) == []
        school.sports.discard(sport)
    elif op == "-student" and school.homes:
        student = rng.choice(sorted(school.homes))
        assert delete(services, "deleteStudent", student) == []
        del school.homes[student]


def assert_counts(services: Services, school: School) -> None:
    """Every totalCount equals the school's count and the number of items its pages hold."""
    data = ok(
        services,
        "{ "
        + " ".join(f"{f}(first: 100) {{ totalCount edges {{ node {{ id }} }} }}" for f in CATALOGS)
        + " }",
    )
    expected = {"teachers": school.teachers, "classes": school.classes, "sports": school.sports}
    for field in CATALOGS:
        walked = sorted(e["node"]["id"] for e in data[field]["edges"])
        assert walked == sorted(expected[field])
        assert data[field]["totalCount"] == len(walked), field
    for place, count in school.located().items():
        page = ok(services, LOCATION, school.spelled[place])["studentsByLocation"]
        assert page["pageInfo"]["hasNextPage"] is False
        assert page["totalCount"] == len(page["edges"]) == count, place


@pytest.mark.parametrize("seed", [1, 2])
def test_total_counts_equal_the_walked_counts_after_random_writes(svc: Services, seed: int) -> None:
    rng = random.Random(seed)
    school = School()
    assert_counts(svc, school)  # an empty table: every count is 0, no counter item yet
    for step in range(1, 61):
        write_at_random(svc, school, rng)
        if step % 20 == 0:
            assert_counts(svc, school)
    assert school.teachers and school.homes  # the draws wrote something
    assert_clean(svc)


def test_a_move_within_a_city_leaves_its_counters_as_they_were(svc: Services) -> None:
    """Spellings of one place are one counter: a move between them is one update of the
    student (a transaction touches an item once), and no count changes."""
    home = {"country": "Canada", "state": "Québec", "city": "Montréal"}
    create_student(svc, id="stu-1", home=home)
    before = {
        shard: get_item(svc, *shard)
        for key in keys.home_counters("Canada", "Québec", "Montréal")
        for shard in keys.counter_shards(key)
    }
    result = execute(svc, SET_HOME, {"id": "stu-1", "h": {**home, "city": " MONTRÉAL"}})
    assert result.user_errors == []
    assert [c for c in calls(result) if c == "TransactWriteItems"] == ["TransactWriteItems"]
    assert {key: get_item(svc, *key) for key in before} == before
    assert [item[items.COUNT] for item in before.values() if item] == [1, 1, 1]


# -- what a read costs --------------------------------------------------------------------


def test_total_count_costs_nothing_unless_selected(gql: Any) -> None:
    for field in CATALOGS:
        assert calls(gql(f"{{ {field}(first: 3) {{ edges {{ node {{ id }} }} }} }}")) == ["Query"]
    result = gql('{ studentsByLocation(country: "Canada", first: 3) { edges { node { id } } } }')
    assert calls(result) == ["Query"] * keys.LOCATION_SHARDS  # a country's page: its shards'
    result = gql(
        '{ studentsByLocation(country: "Canada", state: "Ontario") { edges { node { id } } } }'
    )
    assert calls(result) == ["Query"]


def test_the_catalogs_totals_alone_are_one_batched_get(gql: Any, demo_items: list[Item]) -> None:
    result = gql("{ " + " ".join(f"{f}(first: 2) {{ totalCount }}" for f in CATALOGS) + " }")
    assert calls(result) == ["BatchGetItem"]  # no page is selected: no Query
    of_type = Counter(i["type"] for i in demo_items)
    assert result.data == {
        "teachers": {"totalCount": of_type["teacher"]},
        "classes": {"totalCount": of_type["class"]},
        "sports": {"totalCount": of_type["sport"]},
    }


def test_a_total_beside_its_page_in_a_fragment_reads_both(gql: Any) -> None:
    result = gql(
        """{ teachers(first: 2) { ...T } }
        fragment T on TeacherCatalogConnection { totalCount edges { node { id } } }"""
    )
    assert sorted(calls(result)) == ["BatchGetItem", "Query"]
    assert len(result.data["teachers"]["edges"]) == 2
    bad = gql('{ teachers(after: "not-a-cursor") { totalCount } }')  # checked, page or not
    assert bad.codes == ["BAD_USER_INPUT"] and calls(bad) == []


def test_a_total_joins_the_batch_of_the_items_read_below_its_page(gql: Any) -> None:
    """Classes' teachers must be read for their class maps: the catalog's counter rides in
    the same BatchGetItem."""
    result = gql(
        """{ classes(first: 5) { totalCount edges { node { id
             teacher { id classes(first: 1) { totalCount } } } } } }"""
    )
    assert result.errors == []
    assert calls(result) == ["Query", "BatchGetItem"]


def test_a_places_total_is_every_student_who_lives_there(gql: Any, demo_items: list[Item]) -> None:
    homes = [i["home"] for i in demo_items if i["type"] == "student" and "home" in i]
    home = homes[0]
    names = {"c": home["country"], "s": home["state"], "t": home["city"]}
    for place in levels(home):
        at = dict(list(names.items())[: len(place)])
        result = gql(
            """query($c: String!, $s: String, $t: String) {
              studentsByLocation(country: $c, state: $s, city: $t, first: 1) {
                totalCount edges { node { id } } } }""",
            at,
        )
        # A country's page Queries its shards, a state's or a city's its state's shard.
        queries = keys.LOCATION_SHARDS if len(place) == 1 else 1
        assert sorted(calls(result)) == ["BatchGetItem"] + ["Query"] * queries
        expected = sum(place in levels(h) for h in homes)
        assert result.data["studentsByLocation"]["totalCount"] == expected
    nowhere = gql(
        '{ studentsByLocation(country: "Atlantis") { totalCount edges { node { id } } } }'
    )
    assert nowhere.data == {"studentsByLocation": {"totalCount": 0, "edges": []}}
    alone = gql('{ studentsByLocation(country: "Atlantis") { __typename totalCount } }')
    assert calls(alone) == ["BatchGetItem"]


# -- check and migrate ----------------------------------------------------------------------


def test_check_reports_a_wrong_counter_and_migrate_sets_it_once(svc: Services) -> None:
    from graph_api.ops import demo

    school = demo.generate(8, 1)

    def of_list(item: Item) -> bool:  # a catalog's or a place's counter: not a class's roster
        key = keys.Key(item["PK"], item["SK"])
        return item["type"] == items.COUNTER_TYPE and keys.roster_counted(key) is None

    counters = [i for i in school if of_list(i)]
    nodes = [i for i in school if not of_list(i)]
    awaited(
        admin.batch_write(svc.dynamo, svc.settings.table, nodes)
    )  # a table from before counters
    wrong = {**counters[0], items.COUNT: counters[0][items.COUNT] + 5}
    awaited(admin.batch_write(svc.dynamo, svc.settings.table, [wrong]))
    findings = awaited(check_table(svc.dynamo, svc.settings.table))
    assert {f.kind for f in findings} == {"counter"}
    totals = items.totals({keys.Key(i["PK"], i["SK"]): i[items.COUNT] for i in counters})
    assert len(findings) == len(totals)
    walked = totals[keys.counter_of(keys.Key(wrong["PK"], wrong["SK"]))]
    held = wrong[items.COUNT]  # the counter's only shard in the table
    assert f"counts {held}, the list holds {walked} (`graph-api migrate` sets it)" in {
        f.message for f in findings
    }

    report = awaited(migrate_table(svc.dynamo, svc.settings.table))
    assert report.complete and report.counters == len(totals)
    assert_clean(svc)
    assert [i for i in scan(svc) if of_list(i)] == sorted(
        counters, key=lambda i: (i["PK"], i["SK"])
    )
    again = awaited(migrate_table(svc.dynamo, svc.settings.table))
    assert again.complete and again.transactions == 0


def test_counter_keys_name_normalized_places_and_cannot_forge_a_level() -> None:
    assert keys.catalog_counter(keys.Kind.CLASS) == ("COUNT#CATALOG#CLASS", "COUNT")
    assert keys.location_counter(" CANADA", "Que\u0301bec", "Montréal") == (
        "COUNT#COUNTRY#canada#STATE#québec#CITY#montréal",
        "COUNT",
    )
    forged = keys.location_counter("x#STATE#y")  # a country, not a state of country x
    assert forged != keys.location_counter("x", "y") and forged.pk == "COUNT#COUNTRY#x%23state%23y"
