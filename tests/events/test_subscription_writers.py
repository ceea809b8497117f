"""Subscriptions and the writers of the table: a plain boto3 write is the same event as a
mutation, a refused write (by the API, or by DynamoDB) is no event, and a rename whose
copies follow in chunks is one event per node. Both backends.

Absence is shown by order, never by a wait: a subscription hears its events in order, so an
extra one would be heard in place of a later write's. A connection's subscriptions keep no
order between them: a marker is per subscription.
"""

from __future__ import annotations

import pytest
from subscription_writes import ENROLL, UPDATE_CLASS, put, refused
from support import (
    ERRORS,
    RENAME_TEACHER,
    ada_maths_sam,
    boto_client,
    live,
    mutate,
    school,
    subscriber,
    teacher,
)

from graph_api.model import items, keys
from graph_api.model.items import ENROLMENT, TEACHING
from graph_api.model.keys import Kind
from graph_api.store.codec import Item, encode, encode_value
from graph_api.store.transactions import MAX_ACTIONS


def test_plain_boto3_writes_are_the_same_events_as_mutations(endpoint: str) -> None:
    """Another service writing the table's items (items.py's shapes) with boto3, no API."""
    boto = boto_client(endpoint)
    with live(endpoint) as (client, services), subscriber(client, services) as sub:
        name = 'subscription { teacherChanged(id: "%s") { kind id teacher { name } } }'
        sub.subscribe("api", name % "t1")
        sub.subscribe("boto", name % "t2")
        sub.subscribe(
            "roster",
            'subscription { rosterChanged(classId: "c2") { kind studentId student { name } } }',
        )
        at = services.settings.table

        # Created: by the API, and by a PutItem of the same item shape.
        teacher(client, "t1", "Ada")
        put(boto, services, items.teacher("t2", "Ada"))
        # (two subscriptions: each resolves its events on its own, in no order between them)
        created = dict(sub.events(2))
        assert created == {
            "api": {"teacherChanged": {"kind": "CREATED", "id": "t1", "teacher": {"name": "Ada"}}},
            "boto": {"teacherChanged": {"kind": "CREATED", "id": "t2", "teacher": {"name": "Ada"}}},
        }

        # Renamed: by the API, and by an UpdateItem outside it.
        mutate(client, RENAME_TEACHER, {"id": "t1", "name": "Grace"})
        boto.update_item(
            TableName=at,
            Key=encode(keys.node(Kind.TEACHER, "t2").as_item()),
            UpdateExpression="SET #name = :name, #version = #version + :one",
            ExpressionAttributeNames={"#name": "name", "#version": "version"},
            ExpressionAttributeValues={":name": encode_value("Grace"), ":one": encode_value(1)},
        )
        renamed = dict(sub.events(2))
        assert renamed == {
            "api": {
                "teacherChanged": {"kind": "UPDATED", "id": "t1", "teacher": {"name": "Grace"}}
            },
            "boto": {
                "teacherChanged": {"kind": "UPDATED", "id": "t2", "teacher": {"name": "Grace"}}
            },
        }

        # An enrolment another service writes: the edge item, its student's entry, the
        # class's count, in one transaction as the API writes them.
        klass = items.school_class("c2", "Art", items.teacher("t2", "Grace"))
        pupil = items.student("s9", "Noor", "noor@example.org")
        put(boto, services, klass)
        put(boto, services, pupil)
        edge = ENROLMENT.edge_item(pupil, klass)
        entry = ENROLMENT.entry_of(klass)
        boto.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": at, "Item": encode(edge)}},
                {
                    "Update": {
                        "TableName": at,
                        "Key": encode(keys.node(Kind.STUDENT, "s9").as_item()),
                        "UpdateExpression": "SET classes.#c = :entry ADD edgeCount :one",
                        "ExpressionAttributeNames": {"#c": "c2"},
                        "ExpressionAttributeValues": {
                            ":entry": encode_value(entry),
                            ":one": encode_value(1),
                        },
                    }
                },
                {
                    "Update": {
                        "TableName": at,
                        "Key": encode(keys.node(Kind.CLASS, "c2").as_item()),
                        "UpdateExpression": "ADD studentCount :one",
                        "ExpressionAttributeValues": {":one": encode_value(1)},
                    }
                },
            ]
        )
        assert sub.event("roster") == {
            "rosterChanged": {"kind": "JOINED", "studentId": "s9", "student": {"name": "Noor"}}
        }

        # Deleted: a DeleteItem.
        boto.delete_item(TableName=at, Key=encode(keys.node(Kind.TEACHER, "t2").as_item()))
        assert sub.event("boto") == {
            "teacherChanged": {"kind": "DELETED", "id": "t2", "teacher": None}
        }


def test_a_refused_mutation_is_no_event(endpoint: str) -> None:
    seed = ada_maths_sam()
    with live(endpoint, seed) as (client, services), subscriber(client, services) as sub:
        sub.subscribe(
            "c",
            'subscription { classChanged(id: "c1") { kind enrolment { kind studentId }'
            " class { subject studentCount version } } }",
        )
        mutate(client, ENROLL, {"s": "s1", "c": "c1"})
        joined = sub.event("c")["classChanged"]
        assert joined["enrolment"] == {"kind": "JOINED", "studentId": "s1"}
        version = joined["class"]["version"]

        enrol_again = f'mutation {{ enrollStudent(studentId: "s1", classId: "c1") {{ {ERRORS} }} }}'
        assert refused(client, enrol_again) == ["ALREADY_EXISTS"]
        mutate(client, UPDATE_CLASS, {"id": "c1", "subject": "Algebra"})  # allowed: version+1
        after = sub.event("c")["classChanged"]  # the next message is this write's
        assert (after["enrolment"], after["class"]["subject"]) == (None, "Algebra")
        assert after["class"]["studentCount"] == 1

        stale = (
            'mutation { updateClass(id: "c1", input: {subject: "Geometry"},'
            f" expectedVersion: {version}) {{ class {{ id }} {ERRORS} }} }}"
        )
        assert refused(client, stale) == ["CONFLICT"]
        mutate(client, UPDATE_CLASS, {"id": "c1", "subject": "Calculus"})
        assert sub.event("c")["classChanged"]["class"]["subject"] == "Calculus"

        # A transaction DynamoDB itself refuses (another writer's, plain boto3): its update
        # of the class is no event either (moto's own stream recorded such writes).
        boto, at = boto_client(endpoint), services.settings.table
        with pytest.raises(boto.exceptions.TransactionCanceledException):
            boto.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": at,
                            "Key": encode(keys.node(Kind.CLASS, "c1").as_item()),
                            "UpdateExpression": "SET subject = :s",
                            "ExpressionAttributeValues": {":s": encode_value("Refused")},
                        }
                    },
                    {
                        "ConditionCheck": {
                            "TableName": at,
                            "Key": encode(keys.node(Kind.TEACHER, "t1").as_item()),
                            "ConditionExpression": "attribute_not_exists(PK)",  # it exists
                        }
                    },
                ]
            )
        # Each allowed write's event is read before the next write: an extra event would be
        # read in place of a later write's, and show an earlier subject.
        for subject in ("Geometry", "Topology"):
            mutate(client, UPDATE_CLASS, {"id": "c1", "subject": subject})
            assert sub.event("c")["classChanged"]["class"]["subject"] == subject


# -- a rename whose copies follow in chunks ---------------------------------------------------

CLASSES = ("c1", "c2")
STUDENTS = 100  # each in both classes


def teacher_school() -> tuple[list[Item], list[str]]:
    """Teacher t1 ("Grace") teaching two classes, each with the same 100 students: a rename
    writes 1 teacher + 2 classes + 100 student items, more than one transaction holds, so
    the copies follow (`propagation._teacher_copies`): each student's two entries in two
    rounds, each round in chunks, the same students in both. The items and student ids."""
    grace = items.teacher("t1", "Grace")
    classes = [items.school_class(c, f"Subject {c}", grace) for c in CLASSES]
    students = [items.student(f"s{n:02d}", f"S{n}", f"s{n}@example.org") for n in range(STUDENTS)]
    links = [(TEACHING, grace, k) for k in classes]
    links += [(ENROLMENT, s, k) for k in classes for s in students]
    assert 1 + len(classes) + len(students) > MAX_ACTIONS  # the rename cannot be one transaction
    return school(*links), [s["id"] for s in students]


def test_a_chunked_rename_is_one_event_per_node(endpoint: str) -> None:
    # 103 subscriptions on one connection, and a rename that takes a few seconds on moto.
    settings = {"max_subscriptions_per_connection": 200, "deadline_seconds": 60.0}
    seed, students = teacher_school()
    nodes = {"t1": ("teacherChanged", Kind.TEACHER)}
    nodes |= {c: ("classChanged", Kind.CLASS) for c in CLASSES}
    nodes |= {s: ("studentChanged", Kind.STUDENT) for s in students}
    with live(endpoint, seed, **settings) as (client, services):
        with subscriber(client, services) as sub:
            for id_, (field, _) in nodes.items():
                sub.subscribe(id_, f'subscription {{ {field}(id: "{id_}") {{ kind }} }}')
            mutate(client, RENAME_TEACHER, {"id": "t1", "name": "Grace Hopper"})
            # Then every node deleted, after the rename in the stream: each subscription's
            # DELETED is its marker. Its own events come in order (subscriptions do not
            # keep an order between them), so whatever the rename made it hear is before.
            boto = boto_client(endpoint)
            deletes = [
                {"DeleteRequest": {"Key": encode(keys.node(kind, id_).as_item())}}
                for id_, (_, kind) in nodes.items()
            ]
            for n in range(0, len(deletes), 25):
                batch = {services.settings.table: deletes[n : n + 25]}
                while batch:
                    batch = boto.batch_write_item(RequestItems=batch)["UnprocessedItems"]

            heard: dict[str, list[str]] = {id_: [] for id_ in nodes}
            while any(kinds[-1:] != ["DELETED"] for kinds in heard.values()):
                message = sub.next()
                assert message["type"] == "next" and "errors" not in message["payload"], message
                (change,) = message["payload"]["data"].values()
                heard[message["id"]].append(change["kind"])
        assert heard == {id_: ["UPDATED", "DELETED"] for id_ in nodes}
