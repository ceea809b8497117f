"""Teacher: a node whose item carries the classes it teaches."""

from __future__ import annotations

from types import CoroutineType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import strawberry

from graph_api.graph.engine import prefetch
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
from graph_api.model.items import TEACHING
from graph_api.model.keys import Kind
from graph_api.store.ledger import sent

if TYPE_CHECKING:
    from graph_api.graph.types.school_class import Class


@node_fields
@strawberry.type(
    description="A teacher. Its item carries the classes it teaches: read by id it is one"
    " BatchGetItem per level (100 nodes a call, shared with every node read there), and"
    " `classes` costs nothing more. Reached as a class's `teacher` it carries `id` and"
    " `name`; any other field loads its item, in that level's one BatchGetItem."
)
class Teacher(NodeBase, Node):
    kind = Kind.TEACHER
    attributes: ClassVar[Attributes] = {"name": "name", "version": "version"}
    field_attributes: ClassVar[FieldAttributes] = {
        "id": (),
        "nodeId": (),
        "name": ("name",),
        "version": ("version",),
        "classes": (TEACHING.field, "name"),  # the name: its classes' Teacher { name }
    }
    reads = reads_of(field_attributes)
    id: strawberry.ID = strawberry.field(description=ID_DESCRIPTION)
    known: strawberry.Private[dict[str, Any]]

    # Fields without a resolver: `attributes` says how their properties (`node_fields`) read.
    name: str = strawberry.field(
        description="The teacher's name (1-200 characters); copied on its classes, so free"
        " under `Class.teacher`."
    )
    version: int = strawberry.field(
        description="Grows with each write of the teacher's own field (name), not with its classes:"
        " send it as `expectedVersion` to update only what you read."
    )

    @strawberry.field(
        description="The classes the teacher teaches, ordered by id; from the teacher item"
        " itself (no request of its own). When the classes' `students` are selected, each"
        " class's item and first page of students come in one Query of its partition. Null,"
        " with an error, for arguments it refuses."
    )
    def classes(
        self,
        info: Info,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
    ) -> Connection[Annotated[Class, strawberry.lazy("graph_api.graph.types.school_class")]] | None:
        new_class = NodeBase.by_kind[Kind.CLASS].from_entry
        page = paging.window(first, after, last, before)
        # Entries copy the subject; the class's teacher is this teacher, by definition.
        name = self.known.get("name")
        ours = {"teacherId": self.id} | ({"teacherName": name} if name is not None else {})
        first = prefetch.first_page_size(info, under=prefetch.NODES)
        connection = self.map_page(
            info,
            "Teacher.classes",
            TEACHING,
            page,
            lambda id_, entry, loaders: new_class(id_, {**entry, **ours}, loaders),
            whole=first is None,
        )
        if first is None:
            return connection  # type: ignore[no-any-return]

        async def with_rosters() -> Connection[Class]:
            found = await connection if isinstance(connection, CoroutineType) else connection
            # Returned once the classes' Queries have left; how their fields wait for them is
            # `prefetch.start_partitions`'s to say.
            context = info.context
            ids = [edge.node.id for edge in found.edges]
            asked = prefetch.start_partitions(context.loaders, Kind.CLASS, ids, first)
            await sent(context.ledger, asked)
            return found  # type: ignore[no-any-return]

        return with_rosters()  # type: ignore[return-value]
