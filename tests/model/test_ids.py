"""Ids: what a valid one is (`[A-Za-z0-9_-]{1,64}`), and that a malformed one, wherever it
is sent (a node field, a list of ids, a Relay global id, a subscription's argument), is
BAD_USER_INPUT naming its field, refused before any read; and how many ids one list may
hold."""

from __future__ import annotations

import pytest
from support import Gql, calls, dynamodb_requests, live, refusal, subscriber

from graph_api.errors import BadUserInput
from graph_api.model import keys
from graph_api.model.keys import Kind

# -- the rule (keys.check_id), and keys built from valid ids only ---------------------------


@pytest.mark.parametrize("value", ["a", "a" * 64, "stu-0001", "A_b-9"])
def test_check_id_accepts_valid_ids(value: str) -> None:
    assert keys.check_id(value) == value


@pytest.mark.parametrize("value", ["", "a" * 65, "a#b", "a/b", "é", "a b", "a\n", "a.b"])
def test_check_id_rejects_invalid_ids_naming_the_field(value: str) -> None:
    with pytest.raises(BadUserInput) as raised:
        keys.check_id(value, field="ids")
    assert raised.value.extensions == {"field": "ids"}
    assert raised.value.code == "BAD_USER_INPUT"


def test_check_id_rejects_non_strings() -> None:
    with pytest.raises(BadUserInput):
        keys.check_id(7)  # type: ignore[arg-type]


def test_keys_are_never_built_from_invalid_ids() -> None:
    for build in (
        lambda: keys.node(Kind.STUDENT, "a#b"),
        lambda: keys.entries(Kind.STUDENT, "", Kind.CLASS),
        lambda: keys.roster(Kind.CLASS, "x" * 65, Kind.STUDENT),
        lambda: keys.home_location("a/b", "A", "B", "C"),
        lambda: keys.entries(Kind.STUDENT, "s", Kind.CLASS).at("c#d"),
        lambda: keys.node(Kind.STUDENT, ["a"]),  # type: ignore[arg-type]  # unhashable
        lambda: keys.node(Kind.STUDENT, 7),  # type: ignore[arg-type]
    ):
        with pytest.raises(BadUserInput):
            build()


def test_an_id_refused_once_is_refused_again() -> None:
    """References are cached (`keys._ref`): a refusal is not, and a valid id still builds."""
    for _ in range(2):
        with pytest.raises(BadUserInput):
            keys.node(Kind.STUDENT, "a#b")
        assert keys.node(Kind.STUDENT, "a-b") == keys.Key("STUDENT#a-b", "STUDENT#a-b")


# -- through the schema: a node's id, a list of ids -----------------------------------------


BAD_IDS = {
    "hash": "stu#0001",
    "forged key": "STUDENT#stu-0001",
    "slash": "stu/0001",
    "unicode": "stü-0001",
    "space": "stu 0001",
    "newline": "stu-0001\n",
    "empty": "",
    "65 chars": "a" * 65,
}
NODE_FIELDS = ["student", "teacher", "class", "sport"]


@pytest.mark.parametrize("bad", list(BAD_IDS.values()), ids=list(BAD_IDS))
@pytest.mark.parametrize("field", NODE_FIELDS)
def test_malformed_id_is_bad_user_input_before_any_read(gql: Gql, field: str, bad: str) -> None:
    result = gql(f"query($id: ID!) {{ {field}(id: $id) {{ id }} }}", {"id": bad})
    assert result.data == {field: None}
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["extensions"]["field"] == "id"
    assert dynamodb_requests(result) == 0


@pytest.mark.parametrize("bad", list(BAD_IDS.values()), ids=list(BAD_IDS))
def test_malformed_id_among_ids_is_bad_user_input_before_any_read(gql: Gql, bad: str) -> None:
    result = gql("query($ids: [ID!]!) { students(ids: $ids) { id } }", {"ids": ["stu-0001", bad]})
    assert result.data is None
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["extensions"]["field"] == "ids"
    assert dynamodb_requests(result) == 0


@pytest.mark.parametrize("field", NODE_FIELDS)
def test_id_of_64_characters_is_valid(gql: Gql, field: str) -> None:
    result = gql(f"query($id: ID!) {{ {field}(id: $id) {{ id }} }}", {"id": "a" * 64})
    assert result.errors == []
    assert result.data == {field: None}


def test_101_ids_are_bad_user_input_before_any_read(gql: Gql) -> None:
    ids = [f"stu-{i:04d}" for i in range(1, 102)]
    result = gql("query($ids: [ID!]!) { students(ids: $ids) { id } }", {"ids": ids})
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["extensions"]["field"] == "ids"
    assert dynamodb_requests(result) == 0


def test_100_ids_are_answered(gql: Gql) -> None:
    ids = [f"stu-{i:04d}" for i in range(1, 101)]
    result = gql("query($ids: [ID!]!) { students(ids: $ids) { id } }", {"ids": ids})
    assert result.errors == []
    assert len(result.data["students"]) == 100


# -- Relay's global ids ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", ["stu-0001", "Pupil:stu-0001", "student:stu-0001", "Student:", "Student:a#b", ""]
)
def test_a_malformed_global_id_is_bad_user_input_without_reads(gql: Gql, bad: str) -> None:
    result = gql("query($id: ID!) { node(id: $id) { id } }", {"id": bad})
    assert result.codes == ["BAD_USER_INPUT"]
    assert result.errors[0]["extensions"]["field"] == "id"
    assert calls(result) == []
    many = gql("query($ids: [ID!]!) { nodes(ids: $ids) { id } }", {"ids": ["Class:cls-001", bad]})
    assert many.codes == ["BAD_USER_INPUT"]
    assert calls(many) == []


def test_nodes_takes_at_most_100_ids(gql: Gql) -> None:
    ids = [f"Student:stu-{n:04d}" for n in range(101)]
    result = gql("query($ids: [ID!]!) { nodes(ids: $ids) { id } }", {"ids": ids})
    assert result.codes == ["BAD_USER_INPUT"]
    assert calls(result) == []
    full = gql("query($ids: [ID!]!) { nodes(ids: $ids) { id } }", {"ids": ids[:100]})
    assert full.errors == [] and len(full.data["nodes"]) == 100
    assert calls(full) == ["BatchGetItem"]


# -- a subscription's argument --------------------------------------------------------------


def test_a_bad_id_is_bad_user_input(endpoint: str) -> None:
    with live(endpoint) as (client, services), subscriber(client, services) as sub:
        sub.send("bad", 'subscription { studentChanged(id: "no spaces!") { kind } }')
        _, error = refusal(sub, "bad")
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "id"}
        sub.send("bad-class", 'subscription { rosterChanged(classId: "") { kind } }')
        _, error = refusal(sub, "bad-class")
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "classId"}
        assert services.events.hub.size == 0
