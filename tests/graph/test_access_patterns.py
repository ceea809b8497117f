from __future__ import annotations

from typing import Any

import pytest
from mutation_steps import ids_of
from support import Gql, of_type, walk

from graph_api.store.codec import Item

NODE_FIELDS = {
    "student": "id name email version",
    "teacher": "id name version",
    "class": "id subject studentCount version teacher { id name }",
    "sport": "id name coach studentCount version",
}


def by_id(demo_items: list[Item], type_: str) -> dict[str, Item]:
    return {i["id"]: i for i in of_type(demo_items, type_)}


def homes(demo_items: list[Item], **where: str) -> list[dict[str, Any]]:
    """The students' homes (each student item's `home` map, absent without a home), each
    with its `studentId`, that match `where`."""
    return [
        {"studentId": s["id"], **s["home"]}
        for s in of_type(demo_items, "student")
        if s.get("home") and all(s["home"].get(k) == v for k, v in where.items())
    ]


def test_student_by_id_has_its_fields_and_home(gql: Gql, demo_items: list[Item]) -> None:
    housed = {h["studentId"]: h for h in homes(demo_items)}
    student = next(s for s in of_type(demo_items, "student") if s["id"] in housed)
    home = housed[student["id"]]
    result = gql(
        "query($id: ID!) { student(id: $id) { id name email version"
        " home { country state city street } } }",
        {"id": student["id"]},
    )
    assert result.errors == []
    assert result.data["student"] == {
        "id": student["id"],
        "name": student["name"],
        "email": student["email"],
        "version": student["version"],
        "home": {k: home[k] for k in ("country", "state", "city", "street")},
    }


def test_student_without_home_has_null_home(gql: Gql, demo_items: list[Item]) -> None:
    housed = {h["studentId"] for h in homes(demo_items)}
    homeless = [s for s in of_type(demo_items, "student") if s["id"] not in housed]
    assert homeless
    result = gql(
        "query($id: ID!) { student(id: $id) { id home { country } } }", {"id": homeless[0]["id"]}
    )
    assert result.errors == []
    assert result.data["student"] == {"id": homeless[0]["id"], "home": None}


def test_students_by_ids_keeps_order_nulls_unknown_and_answers_repeats(
    gql: Gql, demo_items: list[Item]
) -> None:
    students = by_id(demo_items, "student")
    known = sorted(students)
    asked = [known[5], "stu-9999", known[0], known[5], "nobody", known[-1]]
    result = gql("query($ids: [ID!]!) { students(ids: $ids) { id name } }", {"ids": asked})
    assert result.errors == []
    assert result.data["students"] == [
        {"id": i, "name": students[i]["name"]} if i in students else None for i in asked
    ]


def test_students_by_ids_empty_list_is_empty(gql: Gql) -> None:
    result = gql("{ students(ids: []) { id } }")
    assert result.errors == []
    assert result.data == {"students": []}


def paged_edges(gql: Gql, node: str, id_: str, edges: str, fields: str, first: int) -> list[Any]:
    """The nodes (their `fields`) of the `edges` connection of `node` `id_`, read `first` at a
    time to the last page."""
    query = (
        f"query($id: ID!, $first: Int, $after: String) {{ {node}(id: $id) {{"
        f" {edges}(first: $first, after: $after) {{ edges {{ node {{ {fields} }} }}"
        " pageInfo { hasNextPage endCursor } } } }"
    )
    return walk(gql, query, [node, edges], first=first, id=id_)


def test_teacher_by_id_and_its_classes(gql: Gql, demo_items: list[Item]) -> None:
    for teacher in of_type(demo_items, "teacher"):
        # A class's teacher is its `teacherId`.
        taught = sorted(c["id"] for c in of_type(demo_items, "class", teacherId=teacher["id"]))
        assert taught
        classes = by_id(demo_items, "class")
        nodes = walk(
            gql,
            "query($id: ID!, $first: Int, $after: String) { teacher(id: $id) { id name version"
            " classes(first: $first, after: $after) { edges { node { id subject"
            " teacher { id name } } } pageInfo { hasNextPage endCursor } } } }",
            ["teacher", "classes"],
            first=2,
            id=teacher["id"],
        )
        assert ids_of(nodes) == taught
        assert nodes == [
            {
                "id": c,
                "subject": classes[c]["subject"],
                "teacher": {"id": teacher["id"], "name": teacher["name"]},
            }
            for c in taught
        ]
        head = gql(
            "query($id: ID!) { teacher(id: $id) { id name version } }", {"id": teacher["id"]}
        )
        assert head.data["teacher"] == {k: teacher[k] for k in ("id", "name", "version")}


def test_class_by_id_has_subject_teacher_and_count_of_enrolments(
    gql: Gql, demo_items: list[Item]
) -> None:
    teachers = by_id(demo_items, "teacher")
    for klass in of_type(demo_items, "class"):
        result = gql(
            f"query($id: ID!) {{ class(id: $id) {{ {NODE_FIELDS['class']} }} }}",
            {"id": klass["id"]},
        )
        assert result.errors == []
        teacher = teachers[klass["teacherId"]]
        assert result.data["class"] == {
            "id": klass["id"],
            "subject": klass["subject"],
            "studentCount": len(of_type(demo_items, "enrolment", classId=klass["id"])),
            "version": klass["version"],
            "teacher": {"id": teacher["id"], "name": teacher["name"]},
        }


def test_class_students_paged_to_the_end_are_the_enrolled_students(
    gql: Gql, demo_items: list[Item]
) -> None:
    students = by_id(demo_items, "student")
    for klass in of_type(demo_items, "class"):
        enrolled = {e["studentId"] for e in of_type(demo_items, "enrolment", classId=klass["id"])}
        nodes = paged_edges(gql, "class", klass["id"], "students", "id name", first=15)
        assert len(ids_of(nodes)) == len(set(ids_of(nodes)))
        assert set(ids_of(nodes)) == enrolled
        assert all(n["name"] == students[n["id"]]["name"] for n in nodes)


def test_sport_by_id_has_name_nullable_coach_and_count(gql: Gql, demo_items: list[Item]) -> None:
    sports = of_type(demo_items, "sport")
    assert {s["coach"] is None for s in sports} == {True, False}
    for sport in sports:
        result = gql(
            f"query($id: ID!) {{ sport(id: $id) {{ {NODE_FIELDS['sport']} }} }}",
            {"id": sport["id"]},
        )
        assert result.errors == []
        assert result.data["sport"] == {
            "id": sport["id"],
            "name": sport["name"],
            "coach": sport["coach"],
            "studentCount": len(of_type(demo_items, "membership", sportId=sport["id"])),
            "version": sport["version"],
        }


def test_sport_students_paged_to_the_end_are_the_members(gql: Gql, demo_items: list[Item]) -> None:
    for sport in of_type(demo_items, "sport"):
        members = {e["studentId"] for e in of_type(demo_items, "membership", sportId=sport["id"])}
        nodes = paged_edges(gql, "sport", sport["id"], "students", "id", first=4)
        assert len(ids_of(nodes)) == len(set(ids_of(nodes)))
        assert set(ids_of(nodes)) == members


def test_student_classes_and_sports_are_its_edges(gql: Gql, demo_items: list[Item]) -> None:
    classes, sports = by_id(demo_items, "class"), by_id(demo_items, "sport")
    students = sorted(by_id(demo_items, "student"))[:20]
    result = gql(
        "query($ids: [ID!]!) { students(ids: $ids) { id"
        " classes(first: 100) { edges { node { id subject teacher { id } } } }"
        " sports(first: 100) { edges { node { id name coach } } } } }",
        {"ids": students},
    )
    assert result.errors == []
    for student in result.data["students"]:
        sid = student["id"]
        want_classes = sorted(e["classId"] for e in of_type(demo_items, "enrolment", studentId=sid))
        want_sports = sorted(e["sportId"] for e in of_type(demo_items, "membership", studentId=sid))
        assert [e["node"] for e in student["classes"]["edges"]] == [
            {
                "id": c,
                "subject": classes[c]["subject"],
                "teacher": {"id": classes[c]["teacherId"]},
            }
            for c in want_classes
        ]
        assert [e["node"] for e in student["sports"]["edges"]] == [
            {"id": s, "name": sports[s]["name"], "coach": sports[s]["coach"]} for s in want_sports
        ]


def test_student_classes_paged_with_after_cover_all_edges(gql: Gql, demo_items: list[Item]) -> None:
    student = "stu-0001"
    want = sorted(e["classId"] for e in of_type(demo_items, "enrolment", studentId=student))
    nodes = paged_edges(gql, "student", student, "classes", "id", first=2)
    assert ids_of(nodes) == want


@pytest.mark.parametrize(
    ("field", "type_"), [("teachers", "teacher"), ("classes", "class"), ("sports", "sport")]
)
def test_catalog_paged_to_the_end_is_every_node_in_id_order(
    gql: Gql, demo_items: list[Item], field: str, type_: str
) -> None:
    nodes = walk(
        gql,
        f"query($first: Int, $after: String) {{ {field}(first: $first, after: $after) {{"
        f" edges {{ node {{ {NODE_FIELDS[type_]} }} }} pageInfo {{ hasNextPage endCursor }} }} }}",
        [field],
        first=2,
    )
    assert ids_of(nodes) == sorted(by_id(demo_items, type_))
    one = gql(
        f"query($id: ID!) {{ {type_}(id: $id) {{ {NODE_FIELDS[type_]} }} }}", {"id": nodes[0]["id"]}
    )
    assert one.data[type_] == nodes[0]


LOCATION_QUERY = (
    "query($country: String!, $state: String, $city: String, $first: Int, $after: String) {"
    " studentsByLocation(country: $country, state: $state, city: $city, first: $first,"
    " after: $after) { edges { node { id name home { country state city } } }"
    " pageInfo { hasNextPage endCursor } } }"
)


def located(gql: Gql, first: int = 100, **where: str | None) -> list[dict[str, Any]]:
    return walk(gql, LOCATION_QUERY, ["studentsByLocation"], first=first, **where)


def homes_at(demo_items: list[Item], **where: str) -> set[str]:
    return {h["studentId"] for h in homes(demo_items, **where)}


def test_students_by_country_are_the_homes_in_that_country(
    gql: Gql, demo_items: list[Item]
) -> None:
    students = by_id(demo_items, "student")
    countries = sorted({h["country"] for h in homes(demo_items)})
    assert countries
    for country in countries:
        nodes = located(gql, first=7, country=country)
        assert len(ids_of(nodes)) == len(set(ids_of(nodes)))
        assert set(ids_of(nodes)) == homes_at(demo_items, country=country)
        assert all(n["home"]["country"] == country for n in nodes)
        assert all(n["name"] == students[n["id"]]["name"] for n in nodes)


def test_students_by_state_are_the_homes_in_that_state(gql: Gql, demo_items: list[Item]) -> None:
    places = sorted({(h["country"], h["state"]) for h in homes(demo_items)})
    assert places
    for country, state in places:
        nodes = located(gql, country=country, state=state)
        assert len(ids_of(nodes)) == len(set(ids_of(nodes)))
        assert set(ids_of(nodes)) == homes_at(demo_items, country=country, state=state)


def test_students_by_city_are_the_homes_in_that_city(gql: Gql, demo_items: list[Item]) -> None:
    places = sorted({(h["country"], h["state"], h["city"]) for h in homes(demo_items)})
    assert places
    for country, state, city in places:
        nodes = located(gql, country=country, state=state, city=city)
        assert set(ids_of(nodes)) == homes_at(demo_items, country=country, state=state, city=city)
        assert all(n["home"]["city"] == city for n in nodes)


def test_state_prefix_does_not_match_a_longer_state(gql: Gql, demo_items: list[Item]) -> None:
    # "New York" is a state and a prefix of the city "New York City": levels must not blur.
    assert located(gql, country="United States", state="New") == []
    nodes = located(gql, country="United States", state="New York", city="New York")
    assert nodes == []
    assert homes_at(demo_items, country="United States", state="New York", city="New York City")


def test_location_matching_ignores_case_and_collapses_blanks(
    gql: Gql, demo_items: list[Item]
) -> None:
    us = homes_at(demo_items, country="United States")
    assert us
    assert set(ids_of(located(gql, country="  united   STATES "))) == us
    assert set(ids_of(located(gql, country="United\tStates\n"))) == us
    buffalo = homes_at(demo_items, country="United States", state="New York", city="Buffalo")
    assert buffalo
    nodes = located(gql, country="UNITED STATES", state=" new  york", city="buffalo ")
    assert set(ids_of(nodes)) == buffalo


def test_location_display_keeps_original_spelling(gql: Gql, demo_items: list[Item]) -> None:
    quebec = homes_at(demo_items, country="Canada", state="Québec")
    assert quebec
    nodes = located(gql, country="CANADA", state="  QUÉBEC ")
    assert set(ids_of(nodes)) == quebec
    assert {n["home"]["state"] for n in nodes} == {"Québec"}
    assert {n["home"]["country"] for n in nodes} == {"Canada"}


def test_location_matching_ignores_unicode_composition(gql: Gql, demo_items: list[Item]) -> None:
    nodes = located(gql, country="Canada", state="Que\u0301bec")
    assert set(ids_of(nodes)) == homes_at(demo_items, country="Canada", state="Québec")


def test_location_city_without_state_is_bad_user_input(gql: Gql) -> None:
    result = gql('{ studentsByLocation(country: "Canada", city: "Toronto") { edges { cursor } } }')
    assert result.data == {"studentsByLocation": None}
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.extensions["dynamodb"]["requests"] == 0


@pytest.mark.parametrize("country", ["", "   ", "x" * 101])
def test_location_blank_or_long_place_is_bad_user_input(gql: Gql, country: str) -> None:
    result = gql(
        "query($c: String!) { studentsByLocation(country: $c) { edges { cursor } } }",
        {"c": country},
    )
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["extensions"]["field"] == "country"
    assert result.extensions["dynamodb"]["requests"] == 0


def test_unknown_location_is_an_empty_connection(gql: Gql) -> None:
    result = gql(
        '{ studentsByLocation(country: "Atlantis") { edges { cursor }'
        " pageInfo { hasNextPage endCursor } } }"
    )
    assert result.errors == []
    assert result.data["studentsByLocation"] == {
        "edges": [],
        "pageInfo": {"hasNextPage": False, "endCursor": None},
    }


@pytest.mark.parametrize("field", ["student", "teacher", "class", "sport"])
def test_unknown_id_is_null_not_an_error(gql: Gql, field: str) -> None:
    result = gql(f'{{ {field}(id: "no-such-id") {{ id }} }}')
    assert result.errors == []
    assert result.data == {field: None}
