"""Sport: a node whose partition holds its members (membership edges)."""

from __future__ import annotations

from typing import Any, ClassVar

import strawberry

from graph_api import items, keys
from graph_api.graph import paging
from graph_api.graph.context import Info
from graph_api.graph.nodes import Attributes, NodeBase
from graph_api.graph.paging import Connection
from graph_api.graph.student import Student
from graph_api.keys import Kind


@strawberry.type
class Sport(NodeBase):
    kind = Kind.SPORT
    attributes: ClassVar[Attributes] = {
        "name": "name",
        "coach": "coach",
        "student_count": "studentCount",
        "version": "version",
    }
    id: strawberry.ID
    known: strawberry.Private[dict[str, Any]]

    # Fields without a resolver: `attributes` says how NodeBase.__getattr__ answers them.
    name: str
    coach: str | None
    student_count: int
    version: int

    @strawberry.field
    async def students(
        self, info: Info, first: int | None = 20, after: str | None = None
    ) -> Connection[Student]:
        rng = keys.roster(Kind.SPORT, self.id, Kind.STUDENT)
        return await paging.from_range(
            info,
            "Sport.students",
            rng,
            first,
            after,
            lambda edge, loaders: Student.from_view(items.MEMBERSHIP.owner_view(edge), loaders),
        )
