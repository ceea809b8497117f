"""Student: a node whose item carries its home, its classes and its sports."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import strawberry

from graph_api.graph.auth.access import RULE_ATTRIBUTES, personal
from graph_api.graph.engine.context import Info
from graph_api.graph.types import paging
from graph_api.graph.types.home import Home
from graph_api.graph.types.nodes import (
    ID_DESCRIPTION,
    Attributes,
    FieldAttributes,
    Node,
    NodeBase,
    map_pages,
    node_fields,
    reads_of,
    then,
)
from graph_api.graph.types.paging import After, Before, Connection, First, Last
from graph_api.model import items
from graph_api.model.items import ENROLMENT, MEMBERSHIP, Relation
from graph_api.model.keys import Kind

if TYPE_CHECKING:
    from graph_api.graph.types.school_class import Class
    from graph_api.graph.types.sport import Sport


def _home(root: Student) -> Any:
    return then(root.get(items.HOME), lambda home: Home.from_map(home, root) if home else None)


def _pages(field: str, relation: Relation) -> Callable[..., Callable[[NodeBase], Any]]:
    """A map's connection field: its window and what the field reads, then the page of the
    student (`map_pages`)."""

    def prepare(
        info: Info, first: int | None, after: str | None, last: int | None, before: str | None
    ) -> Callable[[NodeBase], Any]:
        return map_pages(info, field, relation, paging.window(first, after, last, before))

    return prepare


_classes = _pages("Student.classes", ENROLMENT)
_sports = _pages("Student.sports", MEMBERSHIP)


def _email(root: Student, info: Info) -> str | None:
    return personal(  # type: ignore[no-any-return]
        info, "Student.email", root, lambda known: known.get("email"), ("email",)
    )


@node_fields
@strawberry.type(
    description="A student. Its item carries its home, classes and sports: read by id it is"
    " one BatchGetItem per level (100 students a call, shared with every node read there),"
    " and those fields cost nothing more. Reached through a roster it carries `id` and"
    " `name`; any other field loads its item, in that level's one BatchGetItem."
)
class Student(NodeBase, Node):
    kind = Kind.STUDENT
    attributes: ClassVar[Attributes] = {
        "name": "name",
        "version": "version",
        "home": _home,
    }
    field_attributes: ClassVar[FieldAttributes] = {
        "id": (),
        "nodeId": (),
        "name": ("name",),
        "email": ("email", *RULE_ATTRIBUTES),
        "version": ("version",),
        "home": (items.HOME,),
        "classes": (ENROLMENT.field,),
        "sports": (MEMBERSHIP.field,),
    }
    reads = reads_of(field_attributes, lazy=("email",))
    carried: ClassVar[Mapping[str, FieldAttributes]] = {"Home": Home.field_attributes}
    id: strawberry.ID = strawberry.field(description=ID_DESCRIPTION)
    known: strawberry.Private[dict[str, Any]]
    # Fields without a resolver: `attributes` says how their properties (`node_fields`) read.
    name: str = strawberry.field(
        description="The student's name (1-200 characters); copied on rosters, so free there."
    )
    email: str | None = strawberry.field(
        resolver=_email,
        description="Personal data: null (with an UNAUTHENTICATED or FORBIDDEN error) unless"
        " the caller may read it (staff; the student; a guardian of the student; a teacher of"
        " one of the student's classes) or the server makes it public.",
    )
    version: int = strawberry.field(
        description="Grows with each write of the student's own fields (name, email, home), not"
        " with its enrolments: send it as `expectedVersion` to update only what you read."
    )
    home: Home | None = strawberry.field(
        description="Where the student lives, or null: a map on the student item (no request"
        " of its own)."
    )

    @strawberry.field(
        description="The classes the student is enrolled in, ordered by id; from the student"
        " item itself (no request of its own). Null, with an error, for arguments it refuses."
    )
    def classes(
        self,
        info: Info,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
    ) -> Connection[Annotated[Class, strawberry.lazy("graph_api.graph.types.school_class")]] | None:
        return _classes(info, first, after, last, before)(self)  # type: ignore[no-any-return]

    @strawberry.field(
        description="The sports the student plays, ordered by id; from the student item itself"
        " (no request of its own). Null, with an error, for arguments it refuses."
    )
    def sports(
        self,
        info: Info,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
    ) -> Connection[Annotated[Sport, strawberry.lazy("graph_api.graph.types.sport")]] | None:
        return _sports(info, first, after, last, before)(self)  # type: ignore[no-any-return]
