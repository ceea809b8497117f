"""Class: a node taught by one teacher; its partition holds its roster (enrolment edges)."""

from __future__ import annotations

from typing import Any, ClassVar

import strawberry

from graph_api import items, keys
from graph_api.graph import paging
from graph_api.graph.context import Info
from graph_api.graph.nodes import Attributes, NodeBase, then
from graph_api.graph.paging import Connection
from graph_api.graph.student import Student
from graph_api.graph.teacher import Teacher
from graph_api.keys import Kind


def _teacher(root: Class) -> Teacher:
    # The class (and every edge to it) copies the teacher's name: no read for `name`.
    known = root.known
    teacher_known = {"name": known["teacherName"]} if "teacherName" in known else {}
    return then(  # type: ignore[no-any-return]
        root.get("teacherId"),
        lambda teacher_id: Teacher.of(teacher_id, teacher_known, root.loaders),
    )


@strawberry.type
class Class(NodeBase):
    kind = Kind.CLASS
    attributes: ClassVar[Attributes] = {
        "subject": "subject",
        "teacher": _teacher,
        "student_count": "studentCount",
        "version": "version",
    }
    id: strawberry.ID
    known: strawberry.Private[dict[str, Any]]

    # Fields without a resolver: `attributes` says how NodeBase.__getattr__ answers them.
    subject: str
    teacher: Teacher
    student_count: int
    version: int

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
            lambda edge, loaders: Student.from_view(items.ENROLMENT.owner_view(edge), loaders),
        )
