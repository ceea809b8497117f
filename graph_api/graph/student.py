"""Student: a node whose item carries its home, its classes and its sports."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import strawberry

from graph_api import items, keys
from graph_api.graph import paging
from graph_api.graph.access import require_personal_data_reader
from graph_api.graph.context import Info
from graph_api.graph.home import Home
from graph_api.graph.nodes import NodeBase
from graph_api.graph.paging import Connection
from graph_api.items import ENROLMENT, MEMBERSHIP
from graph_api.keys import Kind

if TYPE_CHECKING:
    from graph_api.graph.school_class import Class
    from graph_api.graph.sport import Sport


@strawberry.type
class Student(NodeBase):
    kind = Kind.STUDENT
    id: strawberry.ID
    known: strawberry.Private[dict[str, Any]]

    @strawberry.field
    def name(self, info: Info) -> str:
        return self.get(info, "name")  # type: ignore[no-any-return]

    @strawberry.field(
        description="Personal data: null (with an UNAUTHENTICATED or FORBIDDEN error) unless"
        " the request carries a valid bearer token or the server makes it public."
    )
    def email(self, info: Info) -> str | None:
        require_personal_data_reader(info, "Student.email")
        return self.get(info, "email")  # type: ignore[no-any-return]

    @strawberry.field
    def version(self, info: Info) -> int:
        return self.get(info, "version")  # type: ignore[no-any-return]

    @strawberry.field
    async def home(self, info: Info) -> Home | None:
        home = await self.read(info, items.HOME)
        return Home.from_map(home) if home else None

    @strawberry.field
    async def classes(
        self, info: Info, first: int | None = 20, after: str | None = None
    ) -> Connection[Annotated[Class, strawberry.lazy("graph_api.graph.school_class")]]:
        from graph_api.graph.school_class import Class

        return await paging.from_map(
            info,
            "Student.classes",
            keys.entries(Kind.STUDENT, self.id, Kind.CLASS),
            first,
            after,
            await self.read(info, ENROLMENT.field) or {},
            Class.from_entry,
        )

    @strawberry.field
    async def sports(
        self, info: Info, first: int | None = 20, after: str | None = None
    ) -> Connection[Annotated[Sport, strawberry.lazy("graph_api.graph.sport")]]:
        from graph_api.graph.sport import Sport

        return await paging.from_map(
            info,
            "Student.sports",
            keys.entries(Kind.STUDENT, self.id, Kind.SPORT),
            first,
            after,
            await self.read(info, MEMBERSHIP.field) or {},
            Sport.from_entry,
        )
