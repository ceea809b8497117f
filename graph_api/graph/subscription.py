"""The root Subscription: live events from the table's change stream (`graph_api.events`).

An event names what changed, never a copy of what the writer selected: each one resolves
the subscriber's own selection through fresh loaders, with the request-count rules of a
query (and strongly consistent reads, since the write it announces has committed).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence
from enum import Enum

import strawberry

from graph_api.errors import Unauthenticated
from graph_api.events import derive
from graph_api.events.changes import Event
from graph_api.graph.engine import prefetch
from graph_api.graph.engine.context import Info
from graph_api.graph.engine.throttle import spend_event
from graph_api.graph.query import NodeId
from graph_api.graph.types.school_class import Class
from graph_api.graph.types.sport import Sport
from graph_api.graph.types.student import Student
from graph_api.graph.types.teacher import Teacher
from graph_api.model import keys
from graph_api.model.keys import Kind


@strawberry.enum(description="What happened to a node.")
class NodeChangeKind(Enum):
    CREATED = strawberry.enum_value("CREATED", description="The node was created.")
    UPDATED = strawberry.enum_value(
        "UPDATED", description="The node, one of its relations or a copy it shows changed."
    )
    DELETED = strawberry.enum_value("DELETED", description="The node was deleted.")


@strawberry.enum(description="A student joined or left a class or a sport.")
class RosterChangeKind(Enum):
    JOINED = strawberry.enum_value("JOINED", description="The student joined.")
    LEFT = strawberry.enum_value("LEFT", description="The student left.")


async def _student(info: Info, id_: str) -> Student | None:
    item = await info.context.loaders.item.load(keys.node(Kind.STUDENT, id_))
    return Student.from_item(item, info.context.loaders) if item else None


@strawberry.type(
    description="A student created, updated (its fields, home, classes or sports,"
    " or a copy of a class's subject or teacher's name) or deleted."
)
class StudentChange:
    kind: NodeChangeKind = strawberry.field(description="What happened.")
    id: strawberry.ID = strawberry.field(description="The id of the node that changed.")

    @strawberry.field(description="The student as it is now; null once deleted.")
    async def student(self, info: Info) -> Student | None:
        return await _student(info, self.id)


@strawberry.type(description="A teacher created, updated (name, classes) or deleted.")
class TeacherChange:
    kind: NodeChangeKind = strawberry.field(description="What happened.")
    id: strawberry.ID = strawberry.field(description="The id of the node that changed.")

    @strawberry.field(description="The teacher as it is now; null once deleted.")
    async def teacher(self, info: Info) -> Teacher | None:
        item = await info.context.loaders.item.load(keys.node(Kind.TEACHER, self.id))
        return Teacher.from_item(item, info.context.loaders) if item else None


@strawberry.type(description="A student who joined or left a class.")
class EnrolmentChange:
    kind: RosterChangeKind = strawberry.field(description="Joined or left.")
    class_id: strawberry.ID = strawberry.field(description="The class's id.")
    student_id: strawberry.ID = strawberry.field(description="The student's id.")

    @strawberry.field(description="The student as it is now; null if deleted since.")
    async def student(self, info: Info) -> Student | None:
        return await _student(info, self.student_id)

    @strawberry.field(name="class", description="The class as it is now.")
    async def class_(self, info: Info) -> Class | None:
        item = await prefetch.node_with_roster(info, Kind.CLASS, self.class_id)
        return Class.from_item(item, info.context.loaders) if item else None


@strawberry.type(description="A student who joined or left a sport.")
class MembershipChange:
    kind: RosterChangeKind = strawberry.field(description="Joined or left.")
    sport_id: strawberry.ID = strawberry.field(description="The sport's id.")
    student_id: strawberry.ID = strawberry.field(description="The student's id.")

    @strawberry.field(description="The student as it is now; null if deleted since.")
    async def student(self, info: Info) -> Student | None:
        return await _student(info, self.student_id)


@strawberry.type(
    description="A class created, updated (its fields, its teacher's name, a student's name on"
    " its roster), deleted, or a student joining or leaving it (`enrolment`, kind UPDATED)."
)
class ClassChange:
    kind: NodeChangeKind = strawberry.field(description="What happened.")
    id: strawberry.ID = strawberry.field(description="The id of the node that changed.")
    enrolment: EnrolmentChange | None = strawberry.field(
        description="Who joined or left, when that is the change."
    )

    @strawberry.field(
        name="class", description="The class as it is now (its `studentCount` included)."
    )
    async def class_(self, info: Info) -> Class | None:
        item = await prefetch.node_with_roster(info, Kind.CLASS, self.id)
        return Class.from_item(item, info.context.loaders) if item else None


@strawberry.type(
    description="A sport created, updated, deleted, or a student joining or leaving it"
    " (`membership`, kind UPDATED)."
)
class SportChange:
    kind: NodeChangeKind = strawberry.field(description="What happened.")
    id: strawberry.ID = strawberry.field(description="The id of the node that changed.")
    membership: MembershipChange | None = strawberry.field(
        description="Who joined or left, when that is the change."
    )

    @strawberry.field(description="The sport as it is now.")
    async def sport(self, info: Info) -> Sport | None:
        item = await prefetch.node_with_roster(info, Kind.SPORT, self.id)
        return Sport.from_item(item, info.context.loaders) if item else None


async def _events(info: Info, topics: Sequence[str]) -> AsyncGenerator[Event, None]:
    """The subscription's events, each in a fresh scope of loaders, until the caller's
    token expires (then UNAUTHENTICATED: what comes after is not theirs to receive)."""
    context = info.context
    subscription = context.services.events.subscribe(
        topics, context.subscriptions, context.pace, context.holder
    )
    principal = context.auth.principal
    expiry = None
    if principal is not None and principal.expires is not None:
        expired = Unauthenticated("the token expired: subscribe again with a fresh one")
        delay = max(0.0, principal.expires - time.time())
        expiry = asyncio.get_running_loop().call_later(delay, subscription.drop, expired)
    try:
        async for event in subscription:
            info.context.renew(event)
            spend_event(context)  # RATE_LIMITED ends the subscription
            yield event
    finally:
        if expiry is not None:
            expiry.cancel()
        subscription.close()


def _node_kind(event: Event) -> NodeChangeKind:
    """A node's own kind of change; someone joining or leaving it updates it."""
    return NodeChangeKind.__members__.get(event.kind, NodeChangeKind.UPDATED)


def _roster_kind(event: Event) -> RosterChangeKind | None:
    return RosterChangeKind.__members__.get(event.kind)


@strawberry.type(
    description="Live events, read from the table's change stream: any writer's changes"
    " (mutations, scripts, other services), each resolving your own selection when it"
    " happens. Subscribing to an id that does not exist yet is allowed: its CREATED event"
    " comes when it does."
)
class Subscription:
    @strawberry.subscription(description="The student's changes.")
    async def student_changed(self, info: Info, id: NodeId) -> AsyncGenerator[StudentChange, None]:
        topic = derive.topic(Kind.STUDENT, keys.check_id(id))
        async for event in _events(info, [topic]):
            yield StudentChange(kind=_node_kind(event), id=strawberry.ID(event.node_id))

    @strawberry.subscription(description="The teacher's changes.")
    async def teacher_changed(self, info: Info, id: NodeId) -> AsyncGenerator[TeacherChange, None]:
        topic = derive.topic(Kind.TEACHER, keys.check_id(id))
        async for event in _events(info, [topic]):
            yield TeacherChange(kind=_node_kind(event), id=strawberry.ID(event.node_id))

    @strawberry.subscription(
        description="The class's changes: its fields, its `studentCount`, students joining"
        " and leaving."
    )
    async def class_changed(self, info: Info, id: NodeId) -> AsyncGenerator[ClassChange, None]:
        topic = derive.topic(Kind.CLASS, keys.check_id(id))
        async for event in _events(info, [topic]):
            kind = _roster_kind(event)
            enrolment = (
                EnrolmentChange(
                    kind=kind,
                    class_id=strawberry.ID(event.node_id),
                    student_id=strawberry.ID(event.student_id),
                )
                if kind is not None and event.student_id is not None
                else None
            )
            yield ClassChange(
                kind=_node_kind(event), id=strawberry.ID(event.node_id), enrolment=enrolment
            )

    @strawberry.subscription(
        description="The sport's changes: its fields, students joining and leaving."
    )
    async def sport_changed(self, info: Info, id: NodeId) -> AsyncGenerator[SportChange, None]:
        topic = derive.topic(Kind.SPORT, keys.check_id(id))
        async for event in _events(info, [topic]):
            kind = _roster_kind(event)
            membership = (
                MembershipChange(
                    kind=kind,
                    sport_id=strawberry.ID(event.node_id),
                    student_id=strawberry.ID(event.student_id),
                )
                if kind is not None and event.student_id is not None
                else None
            )
            yield SportChange(
                kind=_node_kind(event), id=strawberry.ID(event.node_id), membership=membership
            )

    @strawberry.subscription(
        description="Students joining or leaving the class (one event per enrolment)."
    )
    async def roster_changed(
        self, info: Info, class_id: NodeId
    ) -> AsyncGenerator[EnrolmentChange, None]:
        topic = derive.roster_topic(keys.check_id(class_id, field="classId"))
        async for event in _events(info, [topic]):
            kind = _roster_kind(event)
            if kind is not None and event.student_id is not None:
                yield EnrolmentChange(
                    kind=kind,
                    class_id=strawberry.ID(event.node_id),
                    student_id=strawberry.ID(event.student_id),
                )
