"""Teacher: a node whose item carries the classes it teaches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import strawberry

from graph_api import keys
from graph_api.graph import paging
from graph_api.graph.context import Info
from graph_api.graph.nodes import NodeBase
from graph_api.graph.paging import Connection
from graph_api.items import TEACHING
from graph_api.keys import Kind

if TYPE_CHECKING:
    from graph_api.graph.school_class import Class


@strawberry.type
class Teacher(NodeBase):
    kind = Kind.TEACHER
    id: strawberry.ID
    known: strawberry.Private[dict[str, Any]]

    @strawberry.field
    def name(self, info: Info) -> str:
        return self.get(info, "name")  # type: ignore[no-any-return]

    @strawberry.field
    def version(self, info: Info) -> int:
        return self.get(info, "version")  # type: ignore[no-any-return]

    @strawberry.field
    async def classes(
        self, info: Info, first: int | None = 20, after: str | None = None
    ) -> Connection[Annotated[Class, strawberry.lazy("graph_api.graph.school_class")]]:
        from graph_api.graph.school_class import Class

        # Entries copy the subject; the class's teacher is this teacher, by definition.
        name = self.known.get("name")
        ours = {"teacherId": self.id} | ({"teacherName": name} if name is not None else {})
        return await paging.from_map(
            info,
            "Teacher.classes",
            keys.entries(Kind.TEACHER, self.id, Kind.CLASS),
            first,
            after,
            await self.read(info, TEACHING.field) or {},
            lambda id_, entry: Class.from_entry(id_, {**entry, **ours}),
        )
