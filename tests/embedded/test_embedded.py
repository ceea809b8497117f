"""DynamoDB's behaviour that moto lacks and the embedded backend restores (graph_api/embedded/).

Each test states what DynamoDB does; it runs on both backends, so DynamoDB Local shows the
behaviour is DynamoDB's own and moto shows the embedded backend matches it. Tests that
pin how (no whole-table copies, no whole-table walks) run on moto only.
"""

from __future__ import annotations

import gc
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from embedded_client import Client
from support import (
    assert_clean,
    boto_client,
    create_class,
    create_student,
    create_teacher,
    drop_index,
    enroll,
    fresh_services,
    ok,
    scan,
    wire_key,
)

from graph_api.embedded import EmbeddedDynamoDB
from graph_api.graph.engine.context import Services
from graph_api.model import keys


@pytest.fixture
def db(empty_services: Services) -> tuple[Client, str]:
    return boto_client(empty_services.settings.endpoint_url), empty_services.settings.table


def _count(db: tuple[Client, str], pk: str) -> int:
    client, name = db
    item = client.get_item(TableName=name, Key=wire_key(pk), ConsistentRead=True).get("Item")
    return int(item["n"]["N"]) if item else 0


def _add_one(name: str, pk: str) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": name,
            "Key": wire_key(pk),
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }


def test_a_transaction_resent_with_its_token_applies_once(db: tuple[Client, str]) -> None:
    client, name = db
    token = uuid.uuid4().hex
    for _ in range(3):  # a client that never saw the answer sends it again
        client.transact_write_items(TransactItems=[_add_one(name, "c")], ClientRequestToken=token)
    assert _count(db, "c") == 1
    client.transact_write_items(TransactItems=[_add_one(name, "c")], ClientRequestToken="other")
    assert _count(db, "c") == 2


def test_a_token_reused_for_another_request_is_refused(db: tuple[Client, str]) -> None:
    client, name = db
    token = uuid.uuid4().hex
    client.transact_write_items(TransactItems=[_add_one(name, "a")], ClientRequestToken=token)
    with pytest.raises(ClientError) as refused:
        client.transact_write_items(TransactItems=[_add_one(name, "b")], ClientRequestToken=token)
    assert refused.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    assert (_count(db, "a"), _count(db, "b")) == (1, 0)


def test_a_cancelled_transaction_writes_nothing_and_can_be_resent(
    db: tuple[Client, str],
) -> None:
    client, name = db
    client.put_item(TableName=name, Item={**wire_key("kept"), "v": {"S": "before"}})
    actions = [
        {"Put": {"TableName": name, "Item": {**wire_key("new"), "v": {"S": "x"}}}},
        {
            "Update": {
                "TableName": name,
                "Key": wire_key("kept"),
                "UpdateExpression": "SET v = :v",
                "ExpressionAttributeValues": {":v": {"S": "after"}},
            }
        },
        {
            "ConditionCheck": {
                "TableName": name,
                "Key": wire_key("gate"),
                "ConditionExpression": "attribute_exists(PK)",
            }
        },
    ]
    before = client.scan(TableName=name, ConsistentRead=True)["Items"]
    token = uuid.uuid4().hex
    with pytest.raises(ClientError) as cancelled:
        client.transact_write_items(TransactItems=actions, ClientRequestToken=token)
    reasons = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
    assert reasons == ["None", "None", "ConditionalCheckFailed"]
    assert client.scan(TableName=name, ConsistentRead=True)["Items"] == before
    # A refused transaction is not remembered: once the gate exists, the resend applies.
    client.put_item(TableName=name, Item=wire_key("gate"))
    client.transact_write_items(TransactItems=actions, ClientRequestToken=token)
    assert client.get_item(TableName=name, Key=wire_key("kept"))["Item"]["v"] == {"S": "after"}


def test_a_transaction_failing_half_way_leaves_every_item_as_it_was(
    db: tuple[Client, str],
) -> None:
    client, name = db
    client.put_item(TableName=name, Item={**wire_key("text"), "n": {"S": "not a number"}})
    client.put_item(TableName=name, Item={**wire_key("old"), "v": {"S": "old"}})
    before = client.scan(TableName=name, ConsistentRead=True)["Items"]
    with pytest.raises(ClientError):
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": name, "Item": {**wire_key("old"), "v": {"S": "new"}}}},
                {"Put": {"TableName": name, "Item": wire_key("fresh")}},
                _add_one(name, "text"),  # ADD to a string: refused when applied
            ]
        )
    assert client.scan(TableName=name, ConsistentRead=True)["Items"] == before


def test_a_cancelled_transaction_leaves_nested_maps_as_they_were(db: tuple[Client, str]) -> None:
    """Entries of maps an update wrote (a rename's copies) before another action failed:
    the items keep every entry as it was, and a later write starts from them."""
    client, name = db
    entries = {"k1": {"M": {"f": {"S": "one"}}}, "k2": {"M": {"f": {"S": "two"}}}}
    client.put_item(TableName=name, Item={**wire_key("nested"), "m": {"M": entries}})
    client.put_item(TableName=name, Item={**wire_key("text"), "n": {"S": "not a number"}})
    before = client.scan(TableName=name, ConsistentRead=True)["Items"]

    def rename(entry: str, to: str) -> Any:
        return {
            "Update": {
                "TableName": name,
                "Key": wire_key("nested"),
                "UpdateExpression": "SET #m.#k.#f = :v, #m.#o.#f = :v",
                "ExpressionAttributeNames": {"#m": "m", "#k": entry, "#o": "k2", "#f": "f"},
                "ExpressionAttributeValues": {":v": {"S": to}},
            }
        }

    gate = {
        "ConditionCheck": {
            "TableName": name,
            "Key": wire_key("gate"),
            "ConditionExpression": "attribute_exists(PK)",
        }
    }
    with pytest.raises(ClientError):
        client.transact_write_items(TransactItems=[rename("k1", "new"), gate])
    with pytest.raises(ClientError):
        client.transact_write_items(TransactItems=[rename("k1", "new"), _add_one(name, "text")])
    counted = {  # not a plain SET: moto's own update, which changes an item in place
        "Update": {
            "TableName": name,
            "Key": wire_key("nested"),
            "UpdateExpression": "SET #m.#k.#f = :v, #c = if_not_exists(#c, :zero)",
            "ExpressionAttributeNames": {"#m": "m", "#k": "k1", "#f": "f", "#c": "c"},
            "ExpressionAttributeValues": {":v": {"S": "new"}, ":zero": {"N": "0"}},
        }
    }
    with pytest.raises(ClientError):
        client.transact_write_items(TransactItems=[counted, _add_one(name, "text")])
    assert client.scan(TableName=name, ConsistentRead=True)["Items"] == before
    client.transact_write_items(TransactItems=[rename("k1", "after")])
    item = client.get_item(TableName=name, Key=wire_key("nested"), ConsistentRead=True)["Item"]
    assert item["m"] == {
        "M": {"k1": {"M": {"f": {"S": "after"}}}, "k2": {"M": {"f": {"S": "after"}}}}
    }


def _guarded(name: str, pk: str, condition: str, names: dict[str, str], value: Any) -> Any:
    """An update of `pk` under `condition`: one text, each action its own names and value."""
    return {
        "Update": {
            "TableName": name,
            "Key": wire_key(pk),
            "UpdateExpression": "SET #done = :yes",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#done": "done", **names},
            "ExpressionAttributeValues": {":yes": {"BOOL": True}, ":v": value},
        }
    }


def _reasons(client: Client, actions: list[Any]) -> list[str]:
    try:
        client.transact_write_items(TransactItems=actions)
    except ClientError as error:
        return [r["Code"] for r in error.response["CancellationReasons"]]
    return []


def test_one_condition_text_is_evaluated_with_each_actions_own_names_and_values(
    db: tuple[Client, str],
) -> None:
    """A rename sends one condition text for a hundred items, each with its own names and
    values: each action is judged by its own, whatever the others carried."""
    client, name = db
    client.put_item(
        TableName=name, Item={**wire_key("a"), "n": {"N": "1"}, "m": {"M": {"k1": {"S": "x"}}}}
    )
    client.put_item(
        TableName=name, Item={**wire_key("b"), "n": {"N": "2"}, "m": {"M": {"k2": {"S": "y"}}}}
    )
    equal, exists = "#p = :v", "attribute_exists(#m.#k) AND #m.#k = :v"
    for _ in range(2):  # the second time, every text has been seen
        assert (
            _reasons(
                client,
                [
                    _guarded(name, "a", equal, {"#p": "n"}, {"N": "1"}),
                    _guarded(name, "b", equal, {"#p": "n"}, {"N": "2"}),
                ],
            )
            == []
        )
        assert _reasons(
            client,
            [
                _guarded(name, "a", equal, {"#p": "n"}, {"N": "1"}),
                _guarded(name, "b", equal, {"#p": "n"}, {"N": "3"}),  # another value
            ],
        ) == ["None", "ConditionalCheckFailed"]
        assert _reasons(
            client,
            [
                _guarded(name, "a", equal, {"#p": "n"}, {"S": "1"}),  # another type
                _guarded(name, "b", equal, {"#p": "n"}, {"N": "2"}),
            ],
        ) == ["ConditionalCheckFailed", "None"]
        assert (
            _reasons(
                client,
                [
                    _guarded(name, "a", exists, {"#m": "m", "#k": "k1"}, {"S": "x"}),
                    _guarded(name, "b", exists, {"#m": "m", "#k": "k2"}, {"S": "y"}),
                ],
            )
            == []
        )
        assert _reasons(
            client,
            [
                _guarded(name, "a", exists, {"#m": "m", "#k": "k1"}, {"S": "x"}),
                _guarded(name, "b", exists, {"#m": "m", "#k": "k1"}, {"S": "x"}),  # another name
            ],
        ) == ["None", "ConditionalCheckFailed"]
    # Single-item writes and a Query's filter keep to their own values too.
    for value, written in (({"N": "1"}, True), ({"N": "5"}, False)):
        try:
            client.update_item(
                TableName=name,
                Key=wire_key("a"),
                UpdateExpression="SET #p = #p",
                ConditionExpression="#p = :v",
                ExpressionAttributeNames={"#p": "n"},
                ExpressionAttributeValues={":v": value},
            )
            assert written
        except ClientError as error:
            assert not written
            assert error.response["Error"]["Code"] == "ConditionalCheckFailedException"
    for value, found in (({"N": "1"}, 1), ({"N": "5"}, 0)):
        page = client.query(
            TableName=name,
            KeyConditionExpression="PK = :pk",
            FilterExpression="#p = :v",
            ExpressionAttributeNames={"#p": "n"},
            ExpressionAttributeValues={":pk": {"S": "a"}, ":v": value},
        )
        assert page["Count"] == found


def test_one_condition_text_with_a_missing_placeholder_is_refused_every_time(
    db: tuple[Client, str],
) -> None:
    client, name = db
    client.put_item(TableName=name, Item={**wire_key("a"), "n": {"N": "1"}})
    fine = _guarded(name, "a", "#p = :v", {"#p": "n"}, {"N": "1"})
    client.transact_write_items(TransactItems=[fine])  # the text is known from now on
    # One attempt each: moto answers this refusal with a 500 (DynamoDB: a 400), which
    # botocore's legacy mode retries ten times, 25 s of backoff a call.
    once = boto_client(client.meta.endpoint_url, retries=False)
    codes = []
    for _ in range(2):
        with pytest.raises(ClientError) as refused:  # moto's code differs from DynamoDB's
            once.transact_write_items(
                TransactItems=[_guarded(name, "a", "#p = :v", {}, {"N": "1"})]
            )
        codes.append(refused.value.response["Error"]["Code"])
    assert codes[0] == codes[1]


def test_one_update_text_writes_each_actions_own_names_and_values(
    db: tuple[Client, str],
) -> None:
    """`#a = #a + :n` is moto's own update path: each action adds its own amount to its
    own attribute, as UpdateItem does."""
    client, name = db
    for pk in ("a", "b"):
        client.put_item(TableName=name, Item={**wire_key(pk), "x": {"N": "10"}, "y": {"N": "20"}})

    def add(pk: str, attribute: str, amount: str) -> Any:
        return {
            "Update": {
                "TableName": name,
                "Key": wire_key(pk),
                "UpdateExpression": "SET #a = #a + :n",
                "ExpressionAttributeNames": {"#a": attribute},
                "ExpressionAttributeValues": {":n": {"N": amount}},
            }
        }

    client.transact_write_items(TransactItems=[add("a", "x", "1"), add("b", "y", "2")])
    client.transact_write_items(TransactItems=[add("a", "y", "3"), add("b", "x", "4")])
    client.update_item(
        TableName=name,
        Key=wire_key("a"),
        UpdateExpression="SET #a = #a + :n",
        ExpressionAttributeNames={"#a": "x"},
        ExpressionAttributeValues={":n": {"N": "100"}},
    )
    got = {
        pk: {
            k: v["N"]
            for k, v in client.get_item(TableName=name, Key=wire_key(pk))["Item"].items()
            if "N" in v
        }
        for pk in ("a", "b")
    }
    assert got == {"a": {"x": "111", "y": "23"}, "b": {"x": "14", "y": "22"}}


def _gsi(db: tuple[Client, str], partition: str) -> list[tuple[str, str]]:
    client, name = db
    items = client.query(
        TableName=name,
        IndexName="GSI1",
        KeyConditionExpression="GSI1PK = :p",
        ExpressionAttributeValues={":p": {"S": partition}},
    )["Items"]
    return [(i["PK"]["S"], i["GSI1SK"]["S"]) for i in items]


def test_index_queries_follow_every_kind_of_write(db: tuple[Client, str]) -> None:
    """Random puts, updates that move an item between index partitions, deletes, batches
    and cancelled transactions; after each, every index partition lists what it should."""
    client, name = db
    rng = random.Random(5)
    model: dict[str, tuple[str, str] | None] = {}  # PK -> (GSI1PK, GSI1SK), or unindexed
    partitions = ["g0", "g1", "g2"]

    def indexed(pk: str) -> dict[str, Any]:
        where = (rng.choice(partitions), f"s{rng.randrange(100):03d}")
        model[pk] = where
        return {**wire_key(pk), "GSI1PK": {"S": where[0]}, "GSI1SK": {"S": where[1]}}

    for step in range(60):
        pk = f"n{rng.randrange(12)}"
        kind = rng.choice(["put", "update", "unindex", "delete", "batch", "transact", "cancel"])
        if kind == "put":
            client.put_item(TableName=name, Item=indexed(pk))
        elif kind == "update":
            item = indexed(pk)
            client.update_item(
                TableName=name,
                Key=wire_key(pk),
                UpdateExpression="SET GSI1PK = :p, GSI1SK = :s",
                ExpressionAttributeValues={":p": item["GSI1PK"], ":s": item["GSI1SK"]},
            )
        elif kind == "unindex" and model.get(pk):
            client.update_item(TableName=name, Key=wire_key(pk), UpdateExpression="REMOVE GSI1PK")
            model[pk] = None
        elif kind == "delete":
            client.delete_item(TableName=name, Key=wire_key(pk))
            model.pop(pk, None)
        elif kind == "batch":
            client.batch_write_item(
                RequestItems={name: [{"PutRequest": {"Item": indexed(f"b{step}")}}]}
            )
        elif kind == "transact":
            client.transact_write_items(
                TransactItems=[{"Put": {"TableName": name, "Item": indexed(pk)}}]
            )
        elif kind == "cancel":
            saved = model.get(pk)
            moved = indexed(pk)
            model[pk] = saved
            if saved is None:
                model.pop(pk, None)
            with pytest.raises(ClientError):
                client.transact_write_items(
                    TransactItems=[
                        {"Put": {"TableName": name, "Item": moved}},
                        {
                            "ConditionCheck": {
                                "TableName": name,
                                "Key": wire_key("never"),
                                "ConditionExpression": "attribute_exists(PK)",
                            }
                        },
                    ]
                )
        for partition in partitions:
            listed = _gsi(db, partition)
            # In sort-key order; DynamoDB leaves the order of equal sort keys undefined.
            assert [sk for _, sk in listed] == sorted(sk for _, sk in listed)
            expected = {(k, v[1]) for k, v in model.items() if v and v[0] == partition}
            assert set(listed) == expected and len(listed) == len(expected), (step, kind)


# -- how: the embedded backend's work does not grow with the table (moto only) -------------


@pytest.fixture
def moto_only(backend: str) -> None:
    if backend != "moto":
        pytest.skip("pins how the embedded backend works")


@pytest.fixture
def inside(moto_only: None) -> Iterator[Services]:
    """Services over an embedded server running in this process, where a test can watch
    moto's classes (the server of `make run` runs in a process of its own)."""
    server = EmbeddedDynamoDB(in_process=True)
    with fresh_services(server.start()) as services:
        yield services
    server.stop()


@pytest.fixture
def no_table_walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from moto.dynamodb.models.table import Table

    walks: list[str] = []

    def refuse(self: Any, memo: Any = None) -> Any:
        walks.append("deepcopy")
        raise AssertionError("a whole table was copied")

    original = Table.all_items

    def counted(self: Any) -> Any:
        walks.append("all_items")
        return original(self)

    monkeypatch.setattr(Table, "__deepcopy__", refuse, raising=False)
    monkeypatch.setattr(Table, "all_items", counted)
    return walks


def test_writes_and_queries_never_walk_the_whole_table(
    inside: Services, no_table_walks: list[str]
) -> None:
    svc = inside
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1", subject="Chemistry")
    for n in range(5):
        create_student(svc, f"S{n}", f"s{n}@ex.org", id=f"s{n}", home=_home())
        assert enroll(svc, f"s{n}", "c1").problems == []
    data = ok(
        svc,
        """{ class(id: "c1") { students(first: 3) { edges { node { id } } } }
             studentsByLocation(country: "Chile", first: 2) { edges { node { id } } } }""",
    )
    assert len(data["class"]["students"]["edges"]) == 3
    assert len(data["studentsByLocation"]["edges"]) == 2
    assert no_table_walks == []
    # The same calls with moto's own methods do walk it: the watch sees what it watches.
    boto_client(svc.settings.endpoint_url).scan(TableName=svc.settings.table)
    assert no_table_walks == ["all_items"]


def _home() -> dict[str, str]:
    return {"country": "Chile", "state": "Maule", "city": "Talca"}


# -- end to end: a write whose answer was lost is reported as what happened -----------------


def _lose_the_next_answer(services: Services, operation: str) -> list[int]:
    """After DynamoDB applied the next `operation`, the client sees a read timeout."""
    lost: list[int] = []

    def handler(**_: Any) -> None:
        if not lost:
            lost.append(1)
            raise ReadTimeoutError(endpoint_url="http://lost-answer")

    services.dynamo.register(f"after-call.dynamodb.{operation}", handler)
    return lost


def test_writes_whose_answers_were_lost_report_what_happened(empty_services: Services) -> None:
    svc = empty_services
    lost = _lose_the_next_answer(svc, "TransactWriteItems")
    created = create_student(svc, "Ada", "ada@ex.org", id="ada")  # asserts no error
    assert lost == [1] and created["id"] == "ada"
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1", subject="Chemistry")

    lost.clear()
    result = enroll(svc, "ada", "c1")
    assert lost == [1]
    assert result.errors == []
    students = [i for i in scan(svc) if i["type"] == "student"]
    assert [s["id"] for s in students] == ["ada"]
    data = ok(svc, '{ class(id: "c1") { studentCount } }')
    assert data["class"]["studentCount"] == 1  # counted once, not twice
    assert_clean(svc)  # every invariant holds: one enrolment, counted once


UPDATES: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    ("SET #a = :s, #b = :n", {"#a": "a", "#b": "b"}, {":s": {"S": "x"}, ":n": {"N": "7"}}),
    ("SET #a = :m REMOVE #b", {"#a": "a", "#b": "b"}, {":m": {"M": {"k": {"L": [{"N": "1"}]}}}}),
    ("ADD #c :one SET #a = :s", {"#c": "c", "#a": "a"}, {":one": {"N": "1"}, ":s": {"S": "y"}}),
    ("ADD #c :minus", {"#c": "c"}, {":minus": {"N": "-3"}}),
    ("ADD #t :set", {"#t": "t"}, {":set": {"SS": ["p", "q"]}}),
    (
        "SET #a = :s, #d = #c + :one",
        {"#a": "a", "#c": "c", "#d": "d"},
        {":s": {"S": "z"}, ":one": {"N": "1"}},
    ),
    ("REMOVE #a, #c", {"#a": "a", "#c": "c"}, {}),
    # Entries of maps carried on an item (a student's classes), by document path.
    ("SET #m.#k.#f = :s", {"#m": "m", "#k": "k1", "#f": "f"}, {":s": {"S": "new"}}),
    (
        "SET #m.#k = :e ADD #c :one",
        {"#m": "m", "#k": "k2", "#c": "c"},
        {":e": {"M": {"f": {"S": "e"}}}, ":one": {"N": "1"}},
    ),
    ("REMOVE #m.#k", {"#m": "m", "#k": "k1"}, {}),
    ("REMOVE #m.#k", {"#m": "m", "#k": "absent"}, {}),
    ("SET #x.#k = :s", {"#x": "x", "#k": "k1"}, {":s": {"S": "v"}}),  # no map x: refused
    ("SET #a.#k = :s", {"#a": "a", "#k": "k1"}, {":s": {"S": "v"}}),  # a is a string
]


@pytest.mark.parametrize("expression,names,values", UPDATES)
def test_updates_in_a_transaction_match_single_item_updates(
    db: tuple[Client, str], expression: str, names: dict[str, str], values: dict[str, Any]
) -> None:
    """The same update expression, as UpdateItem and inside TransactWriteItems, on twin
    items (and on an absent item, which an update creates): the same items result."""
    client, name = db
    start = {
        "a": {"S": "old"},
        "b": {"N": "1"},
        "c": {"N": "10"},
        "t": {"SS": ["p"]},
        "m": {"M": {"k1": {"M": {"f": {"S": "v"}}}}},
    }
    extra: dict[str, Any] = {"ExpressionAttributeNames": names}
    if values:
        extra["ExpressionAttributeValues"] = values
    for suffix, existing in (("", True), ("-new", False)):
        if existing:
            for pk in ("single", "transact"):
                client.put_item(TableName=name, Item={**wire_key(pk), **start})
        try:
            client.update_item(
                TableName=name,
                Key=wire_key("single" + suffix),
                UpdateExpression=expression,
                **extra,
            )
            refused = False
        except ClientError:  # e.g. `#c + :one` where c is absent: refused both ways
            refused = True
        transaction = {
            "Update": {
                "TableName": name,
                "Key": wire_key("transact" + suffix),
                "UpdateExpression": expression,
                **extra,
            }
        }
        if refused:
            with pytest.raises(ClientError):
                client.transact_write_items(TransactItems=[transaction])
        else:
            client.transact_write_items(TransactItems=[transaction])
        single = client.get_item(TableName=name, Key=wire_key("single" + suffix)).get("Item", {})
        transacted = client.get_item(TableName=name, Key=wire_key("transact" + suffix)).get(
            "Item", {}
        )
        single.pop("PK", None), transacted.pop("PK", None)
        assert transacted == single


def _ada_in_chemistry(svc: Services) -> tuple[Client, str, dict[str, Any]]:
    """Student s1 (Ada, with a home) enrolled in class c1 of teacher t1: the client, the
    table's name and the student's key."""
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1", subject="Chemistry")
    create_student(svc, "Ada", "ada@ex.org", id="s1", home=_home())
    assert enroll(svc, "s1", "c1").problems == []
    return (
        boto_client(svc.settings.endpoint_url),
        svc.settings.table,
        {"PK": {"S": "STUDENT#s1"}, "SK": {"S": "STUDENT#s1"}},
    )


def test_item_reads_written_as_json_match_motos_own_serializer(
    inside: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph_api.embedded import responses

    client, name, student = _ada_in_chemistry(inside)
    # The class's partition holds the class and its roster (the enrolment edge); GSI1 holds
    # the edge inverted, under its student.
    calls: list[tuple[str, dict[str, Any]]] = [
        (
            "query",
            {
                "KeyConditionExpression": "PK = :p",
                "Limit": 2,
                "ExpressionAttributeValues": {":p": {"S": "CLASS#c1"}},
            },
        ),
        (
            "query",
            {
                "IndexName": "GSI1",
                "KeyConditionExpression": "GSI1PK = :p",
                "ExpressionAttributeValues": {":p": {"S": "STUDENT#s1"}},
            },
        ),
        ("get_item", {"Key": student}),
        ("get_item", {"Key": {"PK": {"S": "nope"}, "SK": {"S": "nope"}}}),
        ("scan", {"Limit": 3}),
    ]

    def answers() -> list[dict[str, Any]]:
        found = [
            getattr(client, op)(TableName=name, ReturnConsumedCapacity="TOTAL", **kw)
            for op, kw in calls
        ]
        found.append(
            client.batch_get_item(
                RequestItems={name: {"Keys": [student, {"PK": {"S": "x"}, "SK": {"S": "y"}}]}}
            )
        )
        for answer in found:
            answer.pop("ResponseMetadata")
        return found

    ours = answers()
    monkeypatch.setattr(responses, "_ITEM_READS", frozenset())  # moto's serializer again
    assert answers() == ours
    assert len(ours[0]["Items"]) == 2 and ours[1]["Items"] and ours[2]["Item"]


def test_projected_reads_answer_what_motos_own_projection_answers(
    inside: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.models.dynamo_type import Item

    client, name, student = _ada_in_chemistry(inside)
    # Top-level attributes (what the API asks), one missing, a map, a nested path and a list
    # element (moto's own code), names through placeholders.
    projections: list[tuple[str, dict[str, str]]] = [
        ("PK, SK, #n, email", {"#n": "name"}),
        ("home, classes, nothing", {}),
        ("#h.city, #n", {"#h": "home", "#n": "name"}),
        ("version, studentId, studentName", {}),
        ("tags[0], PK", {}),
    ]

    def answers() -> list[Any]:
        found: list[Any] = []
        for expression, names in projections:
            asked: dict[str, Any] = {"ProjectionExpression": expression}
            if names:
                asked["ExpressionAttributeNames"] = names
            found.append(client.get_item(TableName=name, Key=student, **asked)["Item"])
            batch = client.batch_get_item(RequestItems={name: {"Keys": [student], **asked}})
            found.append(batch["Responses"][name])
            roster = client.query(
                TableName=name,
                KeyConditionExpression="PK = :p",
                ExpressionAttributeValues={":p": {"S": "CLASS#c1"}},
                **asked,
            )
            found.append(roster["Items"])
        return found

    ours = answers()
    assert ours[0] == {
        "PK": student["PK"],
        "SK": student["SK"],
        "name": {"S": "Ada"},
        "email": {"S": "ada@ex.org"},
    }
    assert set(ours[3]) == {"home", "classes"} and "c1" in ours[3]["classes"]["M"]
    assert ours[6] == {"home": {"M": {"city": {"S": _home()["city"]}}}, "name": {"S": "Ada"}}
    # The class's partition: the class item (its version), its roster shards (none of
    # these attributes: an item projected to nothing is still answered), then its edge.
    shards: list[set[str]] = [set()] * keys.ROSTER_SHARDS
    assert [set(item) for item in ours[11]] == [{"version"}, *shards, {"studentId", "studentName"}]
    assert ours[11][-1] == {"studentId": {"S": "s1"}, "studentName": {"S": "Ada"}}
    monkeypatch.setattr(Item, "project", Item.project.__wrapped__)  # moto's own
    assert answers() == ours


def test_the_server_keeps_nothing_of_what_it_answered(inside: Services) -> None:
    """moto's models keep every instance they make; the embedded server's must not, or its
    memory grows with every query (each answer is made of copies of the items)."""
    from moto.dynamodb.models.dynamo_type import Item

    svc = inside
    create_student(svc, "Ada", "ada@ex.org", id="s1", home=_home())
    for _ in range(20):
        ok(svc, '{ studentsByLocation(country: "Chile", first: 5) { edges { node { id } } } }')
    assert len(Item.instances_tracked) == 0  # type: ignore[attr-defined]


# -- the server's heap: the table's items out of the collector's full passes (moto only) ----

_HEAP = """
import gc, time, weakref
from graph_api.embedded import heap


class Cycle:
    pass


def wait(done, seconds=10):
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    return done()


heap.freeze_old()  # what the interpreter made so far: out of the way, whatever its size
start = gc.get_freeze_count()
heap.keep(poll=0.01)
dead = Cycle()
dead.me = dead  # a request's objects: a cycle, old by now, garbage before the freeze
gone = weakref.ref(dead)
gc.collect(1)
del dead
heap.state.serving.add(0)  # a request in flight: nothing is frozen below FORCED
kept = [[n] for n in range(heap.OLD + 5_000)]  # a table's items
gc.collect(1)  # the young pass that makes them old
heap.state.serving.discard(0)  # at rest: frozen now
assert wait(lambda: gc.get_freeze_count() >= start + len(kept)), gc.get_freeze_count()
assert gone() is None  # collected first, not frozen

# While a request is served, old objects wait for the server to rest, up to FORCED.
frozen, freezes = gc.get_freeze_count(), heap.state.freezes
heap.state.serving.add(0)
more = [[n] for n in range(heap.OLD + 5_000)]
gc.collect(1)
time.sleep(0.3)
assert gc.get_freeze_count() < frozen + len(more) and heap.state.freezes == freezes
most = [[n] for n in range(heap.FORCED)]
gc.collect(1)
assert wait(lambda: heap.state.freezes > freezes)
assert gc.get_freeze_count() >= frozen + len(more)
heap.state.serving.discard(0)
assert kept[-1] == [heap.OLD + 4_999] and len(most) == heap.FORCED  # what is in use stays
print("ok")
"""


def test_the_heap_freezes_what_stays_and_collects_what_does_not(moto_only: None) -> None:
    """The embedded server's process (`heap.keep()`): once there are enough old objects, they
    are frozen, so the collector's full passes never walk the table's items; garbage among
    them is collected first; while requests are served, only once there are many."""
    done = subprocess.run(
        [sys.executable, "-c", _HEAP], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_request_lists_no_handler_methods_and_makes_no_class(
    inside: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per request, moto's dispatch listed its handler's methods (`inspect.getmembers`) and
    Flask's debug mode made a class for the form data: CPU, and cyclic garbage."""
    import inspect

    client, name = boto_client(inside.settings.endpoint_url), inside.settings.table
    client.get_item(TableName=name, Key=wire_key("warm"))
    listed: list[object] = []
    getmembers = inspect.getmembers

    def counted(*args: Any, **kwargs: Any) -> Any:
        listed.append(args[0])
        return getmembers(*args, **kwargs)

    monkeypatch.setattr(inspect, "getmembers", counted)
    gc.disable()  # the classes are garbage at once: count them before a collection can
    try:
        before = sum(issubclass(type(o), type) for o in gc.get_objects())
        for _ in range(20):
            client.get_item(TableName=name, Key=wire_key("absent"))
        made = sum(issubclass(type(o), type) for o in gc.get_objects()) - before
    finally:
        gc.enable()
    assert listed == []
    assert made < 20


def test_the_server_keeps_a_clients_connection_for_its_next_request(
    moto_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One TCP connection serves a client's requests one after another (werkzeug closed
    each after its answer), without delayed ACKs; a client that asks to close, closes."""
    import http.client
    import json
    import socket
    from urllib.parse import urlsplit

    from graph_api.embedded.wsgi import KeepAlive

    delays: list[int] = []
    setup = KeepAlive.setup

    def watched(self: KeepAlive) -> None:
        setup(self)
        delays.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(KeepAlive, "setup", watched)
    server = EmbeddedDynamoDB(in_process=True)
    where = urlsplit(server.start())
    try:
        conn = http.client.HTTPConnection(where.hostname or "", where.port)

        def list_tables(**headers: str) -> http.client.HTTPResponse:
            conn.request(
                "POST",
                "/",
                body=json.dumps({"Limit": 1}),
                headers={"X-Amz-Target": "DynamoDB_20120810.ListTables", **headers},
            )
            answer = conn.getresponse()
            assert answer.status == 200 and "TableNames" in json.loads(answer.read())
            return answer

        first = [list_tables().getheader("Connection") for _ in range(3)]
        assert first == [None, None, None] and len(delays) == 1 and delays[0] != 0
        assert list_tables(Connection="close").getheader("Connection") == "close"
        list_tables()  # http.client opens a new connection: the server closed the first
        assert len(delays) == 2
        conn.close()
    finally:
        server.stop()


def test_index_pages_stay_in_order_across_writes_between_them(db: tuple[Client, str]) -> None:
    """A GSI partition is read in pages of `Limit` from its kept order; writes between the
    pages (a new item before the cursor, one after it, one moved away) are seen as DynamoDB
    shows them: what sorts after the cursor is read, nothing is read twice."""
    client, name = db
    for n in range(0, 40, 2):
        client.put_item(
            TableName=name,
            Item={**wire_key(f"p{n}"), "GSI1PK": {"S": "big"}, "GSI1SK": {"S": f"s{n:03d}"}},
        )
    read: list[str] = []
    start: dict[str, Any] | None = None
    for page in range(8):
        asked: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
        answer = client.query(
            TableName=name,
            IndexName="GSI1",
            KeyConditionExpression="GSI1PK = :p",
            ExpressionAttributeValues={":p": {"S": "big"}},
            Limit=5,
            **asked,
        )
        read += [i["GSI1SK"]["S"] for i in answer["Items"]]
        start = answer.get("LastEvaluatedKey")
        if page == 1:  # between pages: one before the cursor, one after, one moved away
            for pk, sk in (("p1", "s001"), ("p35", "s035")):
                item = {**wire_key(pk), "GSI1PK": {"S": "big"}, "GSI1SK": {"S": sk}}
                client.put_item(TableName=name, Item=item)
            client.update_item(
                TableName=name,
                Key=wire_key("p30"),
                UpdateExpression="SET GSI1PK = :q",
                ExpressionAttributeValues={":q": {"S": "elsewhere"}},
            )
        if start is None:
            break
    expected = sorted({f"s{n:03d}" for n in range(0, 40, 2)} - {"s030"} | {"s035"})
    assert read == expected


def test_a_read_of_an_index_the_table_lacks_is_refused_as_dynamodb_refuses_it(
    empty_services: Services,
) -> None:
    """moto answers ResourceNotFoundException (DynamoDB's word for a missing table); the
    embedded backend answers DynamoDB's ValidationException, which the API maps to
    UNAVAILABLE (tests/graph/test_search.py)."""
    client, name = boto_client(empty_services.settings.endpoint_url), empty_services.settings.table
    drop_index(empty_services.dynamo, name, "GSI2")
    with pytest.raises(ClientError) as refused:
        client.query(
            TableName=name,
            IndexName="GSI2",
            KeyConditionExpression="GSI2PK = :pk",
            ExpressionAttributeValues={":pk": {"S": "NAME#TEACHER#a"}},
        )
    assert refused.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "The table does not have the specified index: GSI2",
    }
