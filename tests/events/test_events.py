"""What a change to the table means to a subscriber (graph_api.events.derive), and how this
instance hands events to its subscriptions (graph_api.events.hub). No DynamoDB here: the
changes are the stream records a write produces; tests/events/test_subscriptions.py runs the
whole pipeline."""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from graph_api.errors import Unavailable
from graph_api.events.changes import Change, Event, Position
from graph_api.events.derive import derive
from graph_api.events.hub import Group, Hub
from graph_api.model import items
from graph_api.model.items import ENROLMENT, TEACHING

_sequence = 0


def change(old: dict[str, Any] | None, new: dict[str, Any] | None, shard: str = "s") -> Change:
    global _sequence
    _sequence += 1
    image = new if new is not None else old
    assert image is not None
    kind = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    keys = {"PK": image["PK"], "SK": image["SK"]}
    return Change(Position(shard, _sequence), kind, keys, old, new)  # type: ignore[arg-type]


def topics(changes: list[Change]) -> list[tuple[str, str, str | None]]:
    return [(e.topic, e.kind, e.student_id) for e in derive(changes)]


def school() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    teacher = items.teacher("t1", "Ada")
    classes = [items.school_class(f"c{n}", f"Subject {n}", teacher) for n in (1, 2, 3)]
    student = items.student("s1", "Sam", "sam@example.org")
    for klass in classes:
        TEACHING.attach(teacher, klass)
        ENROLMENT.attach(student, klass)
    return teacher, student, classes, classes[0]


def test_a_node_created_updated_and_deleted_is_one_event_each() -> None:
    _, student, _, _ = school()
    renamed = {**copy.deepcopy(student), "name": "Samantha", "version": 2}
    assert topics([change(None, student), change(student, renamed), change(renamed, None)]) == [
        ("Student:s1", "CREATED", None),
        ("Student:s1", "UPDATED", None),
        ("Student:s1", "DELETED", None),
    ]


def test_an_enrolment_is_joined_on_the_class_and_its_roster_and_updates_the_student() -> None:
    _, student, _, _ = school()
    klass = items.school_class("c9", "Art", items.teacher("t2", "Bo"))
    before = copy.deepcopy(student)
    edge = ENROLMENT.attach(student, klass)
    counted = {**klass}
    klass_before = {**klass, "studentCount": 0}
    assert edge is not None
    events = topics([change(before, student), change(klass_before, counted), change(None, edge)])
    # The class item's count moves with the edge and says nothing on its own.
    assert events == [
        ("Student:s1", "UPDATED", None),
        ("Class:c9", "JOINED", "s1"),
        ("Roster:c9", "JOINED", "s1"),
    ]
    assert topics([change(edge, None)]) == [
        ("Class:c9", "LEFT", "s1"),
        ("Roster:c9", "LEFT", "s1"),
    ]


def test_a_followed_teacher_rename_is_one_event_per_node_not_one_per_copy() -> None:
    teacher, student, classes, _ = school()
    renamed_teacher = {**teacher, "name": "Grace", "version": 2}
    changes = [change(teacher, renamed_teacher)]
    for klass in classes:  # each class's own copy of the teacher's name
        changes.append(change(klass, {**klass, "teacherName": "Grace"}))
    # The student's entries, one round each (propagation's followed mode).
    current = student
    for klass in classes:
        after = copy.deepcopy(current)
        after["classes"][klass["id"]]["teacherName"] = "Grace"
        changes.append(change(current, after))
        current = after
    assert topics(changes) == [
        ("Teacher:t1", "UPDATED", None),
        ("Class:c1", "UPDATED", None),
        ("Class:c2", "UPDATED", None),
        ("Class:c3", "UPDATED", None),
        ("Student:s1", "UPDATED", None),  # the round that left all three copies equal
    ]


def test_an_atomic_rename_of_the_same_copies_is_one_event_too() -> None:
    _, student, _, _ = school()
    after = copy.deepcopy(student)
    for entry in after["classes"].values():
        entry["teacherName"] = "Grace"
    assert topics([change(student, after)]) == [("Student:s1", "UPDATED", None)]


def test_a_students_rename_reaches_each_roster_once() -> None:
    _, student, classes, _ = school()
    edge = ENROLMENT.edge_item(student, classes[0])
    assert topics([change(edge, {**edge, "studentName": "Samantha"})]) == [
        ("Class:c1", "UPDATED", None)
    ]


def test_counters_claims_and_other_items_are_no_event() -> None:
    teacher, _, _, klass = school()
    claimed = {**teacher, items.CLAIM: "token"}
    guard = items.email_guard(items.student("s2", "Al", "al@example.org"))
    assert (
        topics(
            [
                change(teacher, claimed),  # a rename's claim
                change(claimed, teacher),  # and its release
                change(klass, {**klass, "studentCount": 7}),
                change(None, guard),
                change(None, {"PK": "LEASE#stream", "SK": "LEASE", "owner": "x"}),
            ]
        )
        == []
    )


def event(topic: str, sequence: int, shard: str = "s") -> Event:
    return Event(topic, "UPDATED", topic.split(":")[1], None, Position(shard, sequence))


def in_loop(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an async test on a fresh event loop (the hub's queues need one)."""

    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


async def drain(subscription: Any, count: int) -> list[Event]:
    return [await asyncio.wait_for(anext(subscription), 30) for _ in range(count)]


@in_loop
async def test_the_hub_gives_each_subscriber_its_topics_in_order() -> None:
    hub = Hub(max_subscriptions=10, queue_limit=10)
    one, two = hub.subscribe(["Student:a"]), hub.subscribe(["Student:a", "Class:b"])
    hub.deliver([event("Student:a", 1), event("Class:b", 2), event("Student:z", 3)])
    assert [e.topic for e in await drain(one, 1)] == ["Student:a"]
    assert [e.topic for e in await drain(two, 2)] == ["Student:a", "Class:b"]


@in_loop
async def test_a_record_read_again_after_a_takeover_is_not_delivered_twice() -> None:
    hub = Hub(max_subscriptions=10, queue_limit=10)
    subscription = hub.subscribe(["Student:a"])
    hub.deliver([event("Student:a", 5), event("Student:a", 6)])
    hub.deliver([event("Student:a", 6), event("Student:a", 7)])  # the new reader starts at 6
    hub.deliver([event("Student:a", 1, shard="other")])  # another shard keeps its own order
    got = await drain(subscription, 4)
    assert [(e.position.shard, e.position.sequence) for e in got] == [
        ("s", 5),
        ("s", 6),
        ("s", 7),
        ("other", 1),
    ]


@in_loop
async def test_a_subscriber_that_does_not_read_is_ended_not_grown() -> None:
    hub = Hub(max_subscriptions=10, queue_limit=3)
    subscription = hub.subscribe(["Student:a"])
    hub.deliver([event("Student:a", n) for n in range(1, 10)])
    # What waited is dropped: the subscriber must read the current state anyway, and the
    # error reaches it without first sending what it could not keep up with.
    with pytest.raises(Unavailable, match="fell 3 events behind"):
        await anext(subscription)
    assert hub.size == 0


@in_loop
async def test_one_subscription_of_a_group_falling_behind_ends_the_group_once() -> None:
    hub = Hub(max_subscriptions=10, queue_limit=2)
    overflows: list[None] = []
    group = Group(lambda: overflows.append(None))
    slow, other = hub.subscribe(["Student:a"], group), hub.subscribe(["Student:b"], group)
    alone = hub.subscribe(["Student:b"])  # another connection's: not ended with the group
    hub.deliver([event("Student:b", 1)] + [event("Student:a", n) for n in range(2, 9)])
    assert overflows == [None]  # the connection is told once
    with pytest.raises(Unavailable, match="fell 2 events behind"):
        await anext(slow)
    with pytest.raises(Unavailable, match="another subscription of this connection"):
        await anext(other)
    assert group.members == set()
    assert hub.size == 1
    assert [e.topic for e in await drain(alone, 1)] == ["Student:b"]


@in_loop
async def test_the_process_limit_refuses_one_more_subscription() -> None:
    hub = Hub(max_subscriptions=2, queue_limit=3)
    first = hub.subscribe(["Student:a"])
    hub.subscribe(["Student:b"])
    with pytest.raises(Unavailable, match="limit of 2 subscriptions"):
        hub.subscribe(["Student:c"])
    first.close()
    hub.subscribe(["Student:c"])  # a subscriber that left frees its place
    assert hub.size == 2


@in_loop
async def test_a_gap_ends_every_subscription_with_a_clear_error() -> None:
    hub = Hub(max_subscriptions=10, queue_limit=10)
    subscription = hub.subscribe(["Student:a"])
    hub.deliver([event("Student:a", 1)])
    hub.gap()
    assert len(await drain(subscription, 1)) == 1  # what arrived before the gap still comes
    with pytest.raises(Unavailable, match="missed"):
        await anext(subscription)


@in_loop
async def test_a_records_events_split_across_deliveries_all_arrive() -> None:
    hub = Hub(max_subscriptions=10, queue_limit=10)
    klass, roster = hub.subscribe(["Class:c"]), hub.subscribe(["Roster:c"])
    at = Position("s", 9)  # one enrolment edge: an event on the class and on its roster
    hub.deliver([Event("Class:c", "JOINED", "c", "s1", at)])
    hub.deliver([Event("Roster:c", "JOINED", "c", "s1", at)])  # a large batch, split
    hub.deliver([Event("Class:c", "JOINED", "c", "s1", at)])  # read again after a takeover
    assert [e.topic for e in await drain(klass, 1)] == ["Class:c"]
    assert [e.topic for e in await drain(roster, 1)] == ["Roster:c"]
    hub.end_all()
    assert [e async for e in klass] == []  # the repeat never reached the class's queue
