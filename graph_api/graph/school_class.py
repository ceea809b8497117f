"""Class: a node taught by one teacher; its partition holds its roster (enrolment edges)."""

from __future__ import annotations

from typing import Any

import strawberry

from graph_api import items, keys
from graph_api.graph import paging
from graph_api.graph.context import Info
from graph_api.graph.nodes import NodeBase, then
from graph_api.graph.paging import Connection
from graph_api.graph.student import Student
from graph_api.graph.teacher import Teacher
from graph_api.keys import Kind


@strawberry.type
class Class(NodeBase):
    kind = Kind.CLASS
    id: strawberry.ID
    known: strawberry.Private[dict[str, Any]]

    @strawberry.field
    def subject(self, info: Info) -> str:
        return self.get(info, "subject")  # type: ignore[no-any-return]

    @strawberry.field
    def teacher(self, info: Info) -> Teacher:
        # The class (and every edge to it) copies the teacher's name: no read for `name`.
        known = {"name": self.known["teacherName"]} if "teacherName" in self.known else {}
        return then(  # type: ignore[no-any-return]
            self.get(info, "teacherId"),
            lambda teacher_id: Teacher(id=strawberry.ID(teacher_id), known=known),
        )

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
        rng = keys.roster(Kind.CLASS, self.id, Kind.STUDENT)
        return await paging.from_range(
            info,
            "Class.students",
            rng,
            first,
            after,
            lambda edge: Student.from_view(items.ENROLMENT.owner_view(edge)),
        )
