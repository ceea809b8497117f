"""Sport: a node whose partition holds its members (membership edges)."""

from __future__ import annotations

from typing import Any

import strawberry

from graph_api import items, keys
from graph_api.graph import paging
from graph_api.graph.context import Info
from graph_api.graph.nodes import NodeBase
from graph_api.graph.paging import Connection
from graph_api.graph.student import Student
from graph_api.keys import Kind


@strawberry.type
class Sport(NodeBase):
    kind = Kind.SPORT
    id: strawberry.ID
    known: strawberry.Private[dict[str, Any]]

    @strawberry.field
    def name(self, info: Info) -> str:
        return self.get(info, "name")  # type: ignore[no-any-return]

    @strawberry.field
    def coach(self, info: Info) -> str | None:
        return self.get(info, "coach")  # type: ignore[no-any-return]

    @strawberry.field
    def student_count(self, info: Info) -> int:
        return self.get(info, "studentCount")  # type: ignore[no-any-return]

    @strawberry.field
    def version(self, info: Info) -> int:
        return self.get(info, "version")  # type: ignore[no-any-return]

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
            lambda edge: Student.from_view(items.MEMBERSHIP.owner_view(edge)),
        )
