"""What Relay clients expect beyond pagination: `Node` with `node(id:)`/`nodes(ids:)`, and
`totalCount` on the connections whose size the table keeps."""

from __future__ import annotations

import pytest
from connection_pages import CONNECTIONS, expected_ids, node_ids
from support import Gql, calls, roster_size

from graph_api.store.codec import Item

NODE = """
  __typename id nodeId
  ... on Student { name }
  ... on Teacher { name }
  ... on Class { subject }
  ... on Sport { name }
"""


def test_node_ids_name_the_type_and_the_id(gql: Gql) -> None:
    result = gql(
        '{ student(id: "stu-0001") { id nodeId } teacher(id: "tch-001") { nodeId }'
        ' class(id: "cls-001") { nodeId } sport(id: "spt-07") { nodeId } }'
    )
    assert result.errors == []
    assert result.data == {
        "student": {"id": "stu-0001", "nodeId": "Student:stu-0001"},
        "teacher": {"nodeId": "Teacher:tch-001"},
        "class": {"nodeId": "Class:cls-001"},
        "sport": {"nodeId": "Sport:spt-07"},
    }


def test_nodes_of_mixed_types_are_one_batch_get_in_order_with_null_for_unknown(
    gql: Gql,
) -> None:
    ids = [
        "Sport:spt-07",
        "Student:stu-0001",
        "Class:cls-001",
        "Teacher:tch-001",
        "Student:stu-9999",  # well formed, no such student
        "Teacher:stu-0001",  # a student's id under another type: no such teacher
        "Student:stu-0001",  # again
    ]
    result = gql(f"query($ids: [ID!]!) {{ nodes(ids: $ids) {{ {NODE} }} }}", {"ids": ids})
    assert result.errors == []
    assert calls(result) == ["BatchGetItem"]
    found = result.data["nodes"]
    assert [n and n["nodeId"] for n in found] == [
        "Sport:spt-07",
        "Student:stu-0001",
        "Class:cls-001",
        "Teacher:tch-001",
        None,
        None,
        "Student:stu-0001",
    ]
    assert [n and n["__typename"] for n in found][:4] == ["Sport", "Student", "Class", "Teacher"]
    assert found[0]["name"] and found[2]["subject"] and found[3]["name"]


def test_node_refetches_what_node_id_names(gql: Gql) -> None:
    """Relay's refetch: whatever nodeId an object gave, node(id:) answers the same object."""
    listed = gql("{ classes(first: 3) { edges { node { nodeId subject } } } }")
    for edge in listed.data["classes"]["edges"]:
        again = gql(
            "query($id: ID!) { node(id: $id) { nodeId ... on Class { subject } } }",
            {"id": edge["node"]["nodeId"]},
        )
        assert again.errors == []
        assert again.data["node"] == edge["node"]
        assert calls(again) == ["BatchGetItem"]
    missing = gql('{ node(id: "Sport:nope") { id } }')
    assert missing.errors == [] and missing.data == {"node": None}


def test_student_by_id_still_takes_the_plain_id(gql: Gql) -> None:
    result = gql('{ student(id: "stu-0001") { id } students(ids: ["stu-0002"]) { id } }')
    assert result.errors == []
    assert result.data == {"student": {"id": "stu-0001"}, "students": [{"id": "stu-0002"}]}


# -- totalCount ---------------------------------------------------------------------------

COUNTED = ["Class.students", "Sport.students", "Student.classes", "Teacher.classes"]


@pytest.mark.parametrize("name", COUNTED)
def test_total_count_equals_the_edges_walked_and_costs_no_request(
    gql: Gql, demo_items: list[Item], name: str
) -> None:
    conn = CONNECTIONS[name]
    walked = node_ids(conn.walk(gql, 7))
    assert walked == expected_ids(name, demo_items)
    plain = conn.page(gql, 2)
    counted = gql(conn.query.replace("pageInfo {", "totalCount pageInfo {"), conn.variables)
    assert counted.errors == []
    assert conn.connection(counted)["totalCount"] == len(walked)
    assert calls(counted) == calls(plain)  # the same requests as without totalCount


def test_student_sports_total_count_is_its_map_size(gql: Gql, demo_items: list[Item]) -> None:
    for student in [i for i in demo_items if i["type"] == "student"][:10]:
        result = gql(
            "query($id: ID!) { student(id: $id) { sports(first: 1) { totalCount } } }",
            {"id": student["id"]},
        )
        assert result.data["student"]["sports"]["totalCount"] == len(student.get("sports", {}))
        assert calls(result) == ["BatchGetItem"]


def test_total_count_of_a_roster_reached_through_a_copy_loads_the_parent_in_one_batch(
    gql: Gql, demo_items: list[Item]
) -> None:
    """A student's class entries copy no studentCount: the classes are read, all of them in
    one BatchGetItem, and the counts are theirs."""
    student = next(i for i in demo_items if i["type"] == "student" and len(i["classes"]) > 1)
    result = gql(
        "query($id: ID!) { student(id: $id) { classes { edges { node { id"
        " students(first: 1) { totalCount } } } } } }",
        {"id": student["id"]},
    )
    assert result.errors == []
    counts = {i["id"]: roster_size(demo_items, i) for i in demo_items if i["type"] == "class"}
    for edge in result.data["student"]["classes"]["edges"]:
        assert edge["node"]["students"]["totalCount"] == counts[edge["node"]["id"]]
    ops = calls(result)
    assert ops.count("BatchGetItem") == 2  # the student, then every class at once
    assert ops.count("Query") == len(student["classes"])  # the rosters' pages


def test_last_costs_like_first_and_nodes_count_their_ids(gql: Gql) -> None:
    """The static cost prices `last` as it prices `first` (a costly backward page is refused
    the same way), and `nodes` by its ids."""
    backward = gql("{ classes(last: 3) { edges { node { students(last: 4) { totalCount } } } } }")
    forward = gql("{ classes(first: 3) { edges { node { students(first: 4) { totalCount } } } } }")
    assert backward.errors == [] and forward.errors == []
    assert backward.extensions["cost"] == forward.extensions["cost"]
    assert backward.extensions["cost"]["requested"] == 3 + 3 * 4
    ids = ["Class:cls-001", "Class:cls-002"]
    priced = gql(
        "query($ids: [ID!]!) { nodes(ids: $ids) {"
        " ... on Class { students(last: 5) { totalCount } } } }",
        {"ids": ids},
    )
    assert priced.errors == []
    assert priced.extensions["cost"]["requested"] == 2 + 2 * 5
