"""Subscriptions end to end: a write to the table, read from its change stream, reaches a
subscriber over graphql-transport-ws or SSE with the subscriber's own selection. Both
backends: DynamoDB Local's Streams, and the embedded backend's.

What fires when (README, "Live data"): every subscription field for each kind of change,
whoever wrote it (a mutation or plain boto3); nothing for a refused mutation; one event per
node for a rename whose copies follow in chunks. Absence is shown by order, never by a
wait: a later write's event is the next message. Limits, auth, idle and slow clients:
tests/test_subscription_limits.py; two instances: tests/test_subscription_instances.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from live_support import (
    SSE,
    boto_client,
    live,
    live_app,
    mutate,
    put,
    refused,
    school,
    subscriber,
    until,
)
from starlette.testclient import TestClient
from write_support import fresh_services

from graph_api import items, keys
from graph_api.items import ENROLMENT, TEACHING
from graph_api.keys import Kind
from graph_api.store.codec import Item, encode, encode_value
from graph_api.store.transactions import MAX_ACTIONS

# The writers select `id` only: what a subscriber gets is its own selection (issue 15; the
# peers' complaint: AppSync sends subscribers what the mutating client selected).
_ERRORS = "userErrors { code }"
CREATE_TEACHER = f"""mutation($id: ID!, $name: String!) {{
  createTeacher(input: {{id: $id, name: $name}}) {{ teacher {{ id }} {_ERRORS} }} }}"""
RENAME_TEACHER = f"""mutation($id: ID!, $name: String!) {{
  updateTeacher(id: $id, input: {{name: $name}}) {{ teacher {{ id }} {_ERRORS} }} }}"""
DELETE_TEACHER = f"mutation($id: ID!) {{ deleteTeacher(id: $id) {{ {_ERRORS} }} }}"
CREATE_CLASS = f"""mutation($id: ID!, $subject: String!, $teacher: ID!) {{
  createClass(input: {{id: $id, subject: $subject, teacherId: $teacher}})
  {{ class {{ id }} {_ERRORS} }} }}"""
UPDATE_CLASS = f"""mutation($id: ID!, $subject: String!, $version: Int) {{
  updateClass(id: $id, input: {{subject: $subject}}, expectedVersion: $version)
  {{ class {{ id }} {_ERRORS} }} }}"""
DELETE_CLASS = f"mutation($id: ID!) {{ deleteClass(id: $id) {{ {_ERRORS} }} }}"
CREATE_STUDENT = f"""mutation($id: ID!, $name: String!) {{
  createStudent(input: {{id: $id, name: $name, email: "{{}}@example.org",
    home: {{country: "France", state: "IDF", city: "Paris"}}}})
  {{ student {{ id }} {_ERRORS} }} }}"""
RENAME_STUDENT = f"""mutation($id: ID!, $name: String!) {{
  updateStudent(id: $id, input: {{name: $name}}) {{ student {{ id }} {_ERRORS} }} }}"""
DELETE_STUDENT = f"mutation($id: ID!) {{ deleteStudent(id: $id) {{ {_ERRORS} }} }}"
ENROLL = f"""mutation($s: ID!, $c: ID!) {{
  enrollStudent(studentId: $s, classId: $c) {{ student {{ id }} {_ERRORS} }} }}"""
UNENROLL = f"""mutation($s: ID!, $c: ID!) {{
  unenrollStudent(studentId: $s, classId: $c) {{ student {{ id }} {_ERRORS} }} }}"""
CREATE_SPORT = f"""mutation($id: ID!, $name: String!) {{
  createSport(input: {{id: $id, name: $name}}) {{ sport {{ id }} {_ERRORS} }} }}"""
RENAME_SPORT = f"""mutation($id: ID!, $name: String!) {{
  updateSport(id: $id, input: {{name: $name}}) {{ sport {{ id }} {_ERRORS} }} }}"""
DELETE_SPORT = f"mutation($id: ID!) {{ deleteSport(id: $id) {{ {_ERRORS} }} }}"
JOIN = f"""mutation($s: ID!, $p: ID!) {{
  joinSport(studentId: $s, sportId: $p) {{ student {{ id }} {_ERRORS} }} }}"""
LEAVE = f"""mutation($s: ID!, $p: ID!) {{
  leaveSport(studentId: $s, sportId: $p) {{ student {{ id }} {_ERRORS} }} }}"""


def teacher(client: TestClient, id_: str, name: str) -> None:
    mutate(client, CREATE_TEACHER, {"id": id_, "name": name})


def school_class(client: TestClient, id_: str, subject: str, teacher_id: str) -> None:
    mutate(client, CREATE_CLASS, {"id": id_, "subject": subject, "teacher": teacher_id})


def student(client: TestClient, id_: str, name: str) -> None:
    mutate(client, CREATE_STUDENT.replace("{}", id_), {"id": id_, "name": name})


def test_student_changed_on_create_update_enrolment_copy_and_delete(endpoint: str) -> None:
    with live(endpoint) as (client, services), subscriber(client, services) as sub:
        teacher(client, "t1", "Ada")
        school_class(client, "c1", "Maths", "t1")
        sub.subscribe(
            "s",
            'subscription { studentChanged(id: "s1") { kind id student { name'
            " classes { edges { node { id teacher { name } } } } } } }",
        )

        def heard() -> dict[str, Any]:
            return sub.event("s")["studentChanged"]  # type: ignore[no-any-return]

        student(client, "s1", "Sam")  # subscribed before it existed
        assert heard() == {
            "kind": "CREATED",
            "id": "s1",
            "student": {"name": "Sam", "classes": {"edges": []}},
        }
        mutate(client, RENAME_STUDENT, {"id": "s1", "name": "Samuel"})
        renamed = heard()
        assert (renamed["kind"], renamed["student"]["name"]) == ("UPDATED", "Samuel")
        mutate(client, ENROLL, {"s": "s1", "c": "c1"})
        joined = heard()
        assert joined["kind"] == "UPDATED"
        assert joined["student"]["classes"]["edges"] == [
            {"node": {"id": "c1", "teacher": {"name": "Ada"}}}
        ]
        mutate(client, RENAME_TEACHER, {"id": "t1", "name": "Ada L."})  # a copy it shows
        assert heard()["student"]["classes"]["edges"][0]["node"]["teacher"] == {"name": "Ada L."}
        mutate(client, UNENROLL, {"s": "s1", "c": "c1"})
        left = heard()
        assert (left["kind"], left["student"]["classes"]["edges"]) == ("UPDATED", [])
        mutate(client, DELETE_STUDENT, {"id": "s1"})
        assert heard() == {"kind": "DELETED", "id": "s1", "student": None}


def test_teacher_changed_on_create_rename_classes_and_delete(endpoint: str) -> None:
    with live(endpoint) as (client, services), subscriber(client, services) as sub:
        sub.subscribe(
            "t",
            'subscription { teacherChanged(id: "t1") { kind id'
            " teacher { name classes { edges { node { subject } } } } } }",
        )

        def heard() -> tuple[str, Any]:
            change = sub.event("t")["teacherChanged"]
            assert change["id"] == "t1"
            return change["kind"], change["teacher"]

        teacher(client, "t1", "Ada")
        assert heard() == ("CREATED", {"name": "Ada", "classes": {"edges": []}})
        mutate(client, RENAME_TEACHER, {"id": "t1", "name": "Ada L."})
        assert heard() == ("UPDATED", {"name": "Ada L.", "classes": {"edges": []}})
        school_class(client, "c1", "Maths", "t1")
        classes = {"edges": [{"node": {"subject": "Maths"}}]}
        assert heard() == ("UPDATED", {"name": "Ada L.", "classes": classes})
        mutate(client, DELETE_CLASS, {"id": "c1"})
        assert heard() == ("UPDATED", {"name": "Ada L.", "classes": {"edges": []}})
        mutate(client, DELETE_TEACHER, {"id": "t1"})
        assert heard() == ("DELETED", None)


def test_class_changed_on_create_update_enrolments_copies_and_delete(endpoint: str) -> None:
    with live(endpoint) as (client, services), subscriber(client, services) as sub:
        teacher(client, "t1", "Ada")
        student(client, "s1", "Sam")
        sub.subscribe(
            "c",
            'subscription { classChanged(id: "c1") { kind id'
            " enrolment { kind classId studentId student { name } }"
            " class { subject studentCount teacher { name } students { edges { node { name } } } }"
            " } }",
        )

        def heard() -> dict[str, Any]:
            change = sub.event("c")["classChanged"]
            assert change["id"] == "c1"
            return change  # type: ignore[no-any-return]

        def klass(subject: str, teacher: str, *students: str) -> dict[str, Any]:
            return {
                "subject": subject,
                "studentCount": len(students),
                "teacher": {"name": teacher},
                "students": {"edges": [{"node": {"name": name}} for name in students]},
            }

        school_class(client, "c1", "Maths", "t1")
        assert heard() == {
            "kind": "CREATED",
            "id": "c1",
            "enrolment": None,
            "class": klass("Maths", "Ada"),
        }
        mutate(client, UPDATE_CLASS, {"id": "c1", "subject": "Algebra"})
        assert heard() == {
            "kind": "UPDATED",
            "id": "c1",
            "enrolment": None,
            "class": klass("Algebra", "Ada"),
        }
        mutate(client, ENROLL, {"s": "s1", "c": "c1"})
        joined = heard()
        assert joined["kind"] == "UPDATED"
        assert joined["enrolment"] == {
            "kind": "JOINED",
            "classId": "c1",
            "studentId": "s1",
            "student": {"name": "Sam"},
        }
        assert joined["class"] == klass("Algebra", "Ada", "Sam")
        mutate(client, RENAME_STUDENT, {"id": "s1", "name": "Samuel"})  # its roster's copy
        renamed = heard()
        assert (renamed["enrolment"], renamed["class"]) == (None, klass("Algebra", "Ada", "Samuel"))
        mutate(client, RENAME_TEACHER, {"id": "t1", "name": "Ada L."})  # its teacher's name
        assert heard()["class"] == klass("Algebra", "Ada L.", "Samuel")
        mutate(client, UNENROLL, {"s": "s1", "c": "c1"})
        left = heard()
        assert left["enrolment"]["kind"] == "LEFT"
        assert left["class"] == klass("Algebra", "Ada L.")
        mutate(client, DELETE_CLASS, {"id": "c1"})
        assert heard() == {"kind": "DELETED", "id": "c1", "enrolment": None, "class": None}


def test_sport_changed_on_create_update_membership_copy_and_delete(endpoint: str) -> None:
    with live(endpoint) as (client, services), subscriber(client, services) as sub:
        student(client, "s1", "Sam")
        sub.subscribe(
            "p",
            'subscription { sportChanged(id: "p1") { kind id'
            " membership { kind sportId studentId student { name } }"
            " sport { name studentCount students { edges { node { name } } } } } }",
        )

        def heard() -> tuple[str, Any, Any]:
            change = sub.event("p")["sportChanged"]
            assert change["id"] == "p1"
            return change["kind"], change["membership"], change["sport"]

        def sport(name: str, *students: str) -> dict[str, Any]:
            edges = [{"node": {"name": s}} for s in students]
            return {"name": name, "studentCount": len(students), "students": {"edges": edges}}

        mutate(client, CREATE_SPORT, {"id": "p1", "name": "Rugby"})
        assert heard() == ("CREATED", None, sport("Rugby"))
        mutate(client, RENAME_SPORT, {"id": "p1", "name": "Rugby XV"})
        assert heard() == ("UPDATED", None, sport("Rugby XV"))
        mutate(client, JOIN, {"s": "s1", "p": "p1"})
        membership = {
            "kind": "JOINED",
            "sportId": "p1",
            "studentId": "s1",
            "student": {"name": "Sam"},
        }
        assert heard() == ("UPDATED", membership, sport("Rugby XV", "Sam"))
        mutate(client, RENAME_STUDENT, {"id": "s1", "name": "Samuel"})
        assert heard() == ("UPDATED", None, sport("Rugby XV", "Samuel"))
        mutate(client, LEAVE, {"s": "s1", "p": "p1"})
        left = {**membership, "kind": "LEFT", "student": {"name": "Samuel"}}
        assert heard() == ("UPDATED", left, sport("Rugby XV"))
        mutate(client, DELETE_SPORT, {"id": "p1"})
        assert heard() == ("DELETED", None, None)


def test_roster_changed_on_joins_and_leaves_only(endpoint: str) -> None:
    with live(endpoint) as (client, services), subscriber(client, services) as sub:
        teacher(client, "t1", "Ada")
        school_class(client, "c1", "Maths", "t1")
        student(client, "s1", "Sam")
        student(client, "s2", "Kim")
        sub.subscribe(
            "r",
            'subscription { rosterChanged(classId: "c1") { kind classId studentId'
            " student { name } class { studentCount } } }",
        )

        def heard() -> tuple[str, str, str, int]:
            change = sub.event("r")["rosterChanged"]
            assert change["classId"] == "c1"
            name, count = change["student"]["name"], change["class"]["studentCount"]
            return change["kind"], change["studentId"], name, count

        mutate(client, ENROLL, {"s": "s1", "c": "c1"})
        assert heard() == ("JOINED", "s1", "Sam", 1)
        mutate(client, ENROLL, {"s": "s2", "c": "c1"})
        assert heard() == ("JOINED", "s2", "Kim", 2)
        # Changes to the class or to a student on it are the class's events, not the roster's:
        # the next message is the next enrolment's.
        mutate(client, UPDATE_CLASS, {"id": "c1", "subject": "Algebra"})
        mutate(client, RENAME_STUDENT, {"id": "s1", "name": "Samuel"})
        mutate(client, UNENROLL, {"s": "s1", "c": "c1"})
        assert heard() == ("LEFT", "s1", "Samuel", 1)


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


def ada_maths_sam() -> list[Item]:
    """Teacher t1 teaching c1; student s1 (in no class), with a home in Paris."""
    ada = items.teacher("t1", "Ada")
    maths = items.school_class("c1", "Maths", ada)
    paris = items.Place("France", "IDF", "Paris")
    sam = items.student("s1", "Sam", "s1@example.org", paris)
    return school((TEACHING, ada, maths), nodes=[sam])


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

        enrol_again = (
            f'mutation {{ enrollStudent(studentId: "s1", classId: "c1") {{ {_ERRORS} }} }}'
        )
        assert refused(client, enrol_again) == ["ALREADY_EXISTS"]
        mutate(client, UPDATE_CLASS, {"id": "c1", "subject": "Algebra"})  # allowed: version+1
        after = sub.event("c")["classChanged"]  # the next message is this write's
        assert (after["enrolment"], after["class"]["subject"]) == (None, "Algebra")
        assert after["class"]["studentCount"] == 1

        stale = (
            'mutation { updateClass(id: "c1", input: {subject: "Geometry"},'
            f" expectedVersion: {version}) {{ class {{ id }} {_ERRORS} }} }}"
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


def test_each_subscriber_gets_its_own_selection_whatever_the_writer_selected(
    endpoint: str,
) -> None:
    seed = ada_maths_sam()
    with live(endpoint, seed) as (client, services), subscriber(client, services) as sub:
        sub.subscribe(
            "home",
            'subscription { studentChanged(id: "s1") { student { name home { city } } } }',
        )
        sub.subscribe(
            "classes",
            'subscription { studentChanged(id: "s1") { kind student { email'
            " classes { totalCount edges { node { subject teacher { name } } } } } } }",
        )
        stream = SSE(client, 'subscription { studentChanged(id: "s1") { student { id version } } }')
        hub = services.events.hub
        until(lambda: hub.size == 3, "the SSE subscription")
        mutate(client, ENROLL, {"s": "s1", "c": "c1"})  # selects { student { id } }
        got = dict(sub.events(2))
        assert got == {
            "home": {"studentChanged": {"student": {"name": "Sam", "home": {"city": "Paris"}}}},
            "classes": {
                "studentChanged": {
                    "kind": "UPDATED",
                    "student": {
                        "email": "s1@example.org",
                        "classes": {
                            "totalCount": 1,
                            "edges": [{"node": {"subject": "Maths", "teacher": {"name": "Ada"}}}],
                        },
                    },
                }
            },
        }
        until(lambda: stream.data != [], "the SSE event")
        # (an enrolment is no new version of the student: its version counts its own fields)
        assert stream.data[0]["data"] == {"studentChanged": {"student": {"id": "s1", "version": 1}}}
        client.portal.call(hub.end_all)
        stream.join()


def test_sse_delivers_an_event_then_completes_when_the_server_stops(endpoint: str) -> None:
    with live(endpoint) as (client, services):
        hub = services.events.hub
        stream = SSE(client, 'subscription { teacherChanged(id: "t9") { kind teacher { name } } }')
        until(lambda: hub.size == 1, "the SSE subscription")
        assert stream.status == 200
        teacher(client, "t9", "Bo")
        until(lambda: stream.data != [], "the event")
        client.portal.call(hub.end_all)  # as a server that stops
        stream.join()
        assert [event["data"] for event in stream.data] == [
            {"teacherChanged": {"kind": "CREATED", "teacher": {"name": "Bo"}}}
        ]
        assert stream.lines[-1] == "event: complete"


def test_the_pipeline_runs_again_when_the_app_starts_again(endpoint: str) -> None:
    """Its lifespan entered twice over the same services (each test's client over the
    session's services does it): the second run has its events too."""
    with fresh_services(endpoint) as services:
        for run, name in enumerate(("Ada", "Bo")):
            with live_app(services) as client, subscriber(client, services) as sub:
                sub.subscribe("t", f'subscription {{ teacherChanged(id: "t{run}") {{ kind }} }}')
                teacher(client, f"t{run}", name)
                assert sub.event("t") == {"teacherChanged": {"kind": "CREATED"}}


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
