"""Subscriptions end to end: a write to the table, read from its change stream, reaches a
subscriber over graphql-transport-ws or SSE with the subscriber's own selection. Both
backends: DynamoDB Local's Streams, and the embedded backend's.

What fires when (README, "Live data"): every subscription field for each kind of change,
each subscriber with its own selection. Absence is shown by order, never by a wait: a later
write's event is the next message. Other writers, refused writes and chunked renames:
test_subscription_writers.py; limits, auth, idle and slow clients:
test_subscription_limits.py; two instances: test_subscription_instances.py.
"""

from __future__ import annotations

from typing import Any

from subscription_writes import (
    CREATE_SPORT,
    DELETE_CLASS,
    DELETE_SPORT,
    DELETE_STUDENT,
    DELETE_TEACHER,
    ENROLL,
    JOIN,
    LEAVE,
    RENAME_SPORT,
    RENAME_STUDENT,
    SSE,
    UNENROLL,
    UPDATE_CLASS,
    put,
    school_class,
    student,
)
from support import (
    RENAME_TEACHER,
    ada_maths_sam,
    boto_client,
    fresh_services,
    live,
    live_app,
    mutate,
    subscriber,
    teacher,
    until,
)

from graph_api.model import items


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


def test_subscribers_of_one_event_share_its_reads(endpoint: str) -> None:
    with live(endpoint) as (client, services), subscriber(client, services) as ws:
        for n in range(3):
            ws.subscribe(
                str(n), 'subscription { classChanged(id: "c1") { kind class { subject } } }'
            )
        sent: list[str] = []

        def count(**kwargs: Any) -> None:
            sent.append(kwargs["event_name"].rsplit(".", 1)[-1])

        api = services.dynamo  # the API's own clients: the reader has clients of its own
        api.register("before-send.dynamodb", count)
        try:
            # Another writer, not the API: nothing of ours reads before the event does.
            klass = items.school_class("c1", "Maths", items.teacher("t1", "Ada"))
            put(boto_client(endpoint), services, klass)
            got = ws.events(3)
        finally:
            api.unregister("before-send.dynamodb", count)
    assert sorted(id_ for id_, _ in got) == ["0", "1", "2"]
    assert {repr(data) for _, data in got} == {
        repr({"classChanged": {"kind": "CREATED", "class": {"subject": "Maths"}}})
    }
    # Three subscribers, one event: the class is read once, not three times.
    assert [name for name in sent if name in ("BatchGetItem", "Query", "GetItem")] == [
        "BatchGetItem"
    ], sent


def test_a_subscription_as_a_plain_request_is_refused_saying_where_it_runs(endpoint: str) -> None:
    query = 'subscription { teacherChanged(id: "t1") { kind } }'
    with live(endpoint) as (client, _):
        for response in (
            client.get("/graphql", params={"query": query}, headers={"accept": "*/*"}),
            client.post("/graphql", json={"query": query}),
        ):
            assert response.status_code == 400
            (error,) = response.json()["errors"]
            assert error["extensions"]["code"] == "BAD_REQUEST"
            assert "websocket" in error["message"] and "text/event-stream" in error["message"]
