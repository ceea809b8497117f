"""Class: a node taught by one teacher; its partition holds its roster (enrolment edges)."""

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
    then,
)
from graph_api.graph.types.paging import After, Before, Connection, First, Last
from graph_api.graph.types.student import Student
from graph_api.graph.types.teacher import Teacher
from graph_api.model import items
from graph_api.model.keys import Kind


def _teacher(root: Class) -> Teacher:
    # The class (and every edge to it) copies the teacher's name: no read for `name`.
    known = root.known
    # Without a copy (a part knows it as None, a whole item lacks it), `name` reads the
    # teacher's own item.
    name = known.get("teacherName")
    teacher_known = {"name": name} if name is not None else {}
    if "teacherId" in known:  # a class's item and its copies carry it: no `then` to build
        return Teacher.of(known["teacherId"], teacher_known, root.loaders)
    return then(  # type: ignore[no-any-return]
        root.get("teacherId"),
        lambda teacher_id: Teacher.of(teacher_id, teacher_known, root.loaders),
    )


@node_fields
@strawberry.type(
    description="A class: a subject taught by one teacher, with its roster of students. Read"
    " by id it is one BatchGetItem per level (100 nodes a call, shared with every node read"
    " there). Reached through a student's or teacher's classes it carries `id`, `subject`"
    " and `teacher { id name }`; any other field loads its item, in that level's one"
    " BatchGetItem."
)
class Class(NodeBase, Node):
    kind = Kind.CLASS
    attributes: ClassVar[Attributes] = {
        "subject": "subject",
        "teacher": _teacher,
        "student_count": lambda root: root.roster_count(items.ENROLMENT),
        "version": "version",
    }
    field_attributes: ClassVar[FieldAttributes] = {
        "id": (),
        "nodeId": (),
        "subject": ("subject",),
        "teacher": ("teacherId", "teacherName"),  # the name: Teacher { name } without a read
        "studentCount": ("studentCount",),
        "version": ("version",),
        "students": ("studentCount",),  # its totalCount
    }
    reads = reads_of(field_attributes, lazy=("students",))
    id: strawberry.ID = strawberry.field(description=ID_DESCRIPTION)
    known: strawberry.Private[dict[str, Any]]

    # Fields without a resolver: `attributes` says how their properties (`node_fields`) read.
    subject: str = strawberry.field(
        description="What the class teaches (1-200 characters); copied on students' and"
        " teachers' class entries."
    )
    teacher: Teacher = strawberry.field(
        description="Who teaches the class. Its `id` and `name` are copied on the class (and"
        " its entries): free; any other field loads the teacher, in its level's one"
        " BatchGetItem."
    )
    student_count: int = strawberry.field(
        description="How many students are enrolled: the sum of the class's 8 counter shards"
        " (read with its roster, or in its level's one BatchGetItem), exact (the same as"
        " `students { totalCount }`)."
    )
    version: int = strawberry.field(
        description="Grows with each write of the class's own fields (subject, teacher), not"
        " with enrolments: send it as `expectedVersion` to update only what you read."
    )

    @strawberry.field(
        description="The students enrolled in the class, ordered by id: one Query of its"
        " partition a page (none of its own for a forward first page under `class(id:)`)."
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
            info, "Class.students", items.ENROLMENT, page, Student.from_view
        )
