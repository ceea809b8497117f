"""Sport: a node whose partition holds its members (membership edges)."""

from __future__ import annotations

from typing import Any, ClassVar

import strawberry

from graph_api.graph.engine.context import Info
from graph_api.graph.types import paging
from graph_api.graph.types.nodes import (
    ID_DESCRIPTION,
    Attributes,
    FieldAttributes,
    Node,
    NodeBase,
    node_fields,
    reads_of,
)
from graph_api.graph.types.paging import After, Before, Connection, First, Last
from graph_api.graph.types.student import Student
from graph_api.model import items
from graph_api.model.keys import Kind


@node_fields
@strawberry.type(
    description="A sport, with its members. Read by id it is one BatchGetItem per level (100"
    " nodes a call, shared with every node read there). Reached through a student's sports"
    " it carries `id` and `name`; any other field loads its item, in that level's one"
    " BatchGetItem."
)
class Sport(NodeBase, Node):
    kind = Kind.SPORT
    attributes: ClassVar[Attributes] = {
        "name": "name",
        "coach": "coach",
        "student_count": lambda root: root.roster_count(items.MEMBERSHIP),
        "version": "version",
    }
    field_attributes: ClassVar[FieldAttributes] = {
        "id": (),
        "nodeId": (),
        "name": ("name",),
        "coach": ("coach",),
        "studentCount": ("studentCount",),
        "version": ("version",),
        "students": ("studentCount",),  # its totalCount
    }
    reads = reads_of(field_attributes, lazy=("students",))
    id: strawberry.ID = strawberry.field(description=ID_DESCRIPTION)
    known: strawberry.Private[dict[str, Any]]

    # Fields without a resolver: `attributes` says how their properties (`node_fields`) read.
    name: str = strawberry.field(
        description="The sport's name (1-200 characters); copied on its members' entries."
    )
    coach: str | None = strawberry.field(
        description="Who coaches the sport (1-200 characters), or null if no one does."
    )
    student_count: int = strawberry.field(
        description="How many students play the sport: the sum of the sport's 8 counter shards"
        " (read with its roster, or in its level's one BatchGetItem), exact (the same as"
        " `students { totalCount }`)."
    )
    version: int = strawberry.field(
        description="Grows with each write of the sport's own fields (name, coach), not"
        " with memberships: send it as `expectedVersion` to update only what you read."
    )

    @strawberry.field(
        description="The students who play the sport, ordered by id: one Query of its"
        " partition a page (none of its own for a forward first page under `sport(id:)`)."
        " Null, with an error, for arguments it refuses."
    )
    async def students(
        self,
        info: Info,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
    ) -> Connection[Student] | None:
        page = paging.window(first, after, last, before)
        return await self.roster_page(
            info, "Sport.students", items.MEMBERSHIP, page, Student.from_view
        )
