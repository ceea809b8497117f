"""Home: a student's address, a map on the student item (indexed by place in GSI1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import strawberry

from graph_api.graph.auth.access import RULE_ATTRIBUTES, personal
from graph_api.graph.engine.context import Info
from graph_api.graph.types.nodes import FieldAttributes, NodeBase
from graph_api.model.items import HOME


@strawberry.type(
    description="A student's address: a map on the student item, so it costs no request."
    " Places are spelled as written; `studentsByLocation` matches them trimmed and"
    " case-folded."
)
class Home:
    country: str = strawberry.field(description="The country (1-100 characters).")
    state: str = strawberry.field(description="The state, region or province (1-100 characters).")
    city: str = strawberry.field(description="The city (1-100 characters).")
    street_: strawberry.Private[str | None]
    # The student whose home it is: who may read the street is decided on its item.
    student: strawberry.Private[NodeBase]
    # What each field reads of the student item that carries the home (`NodeBase.carried`).
    field_attributes: ClassVar[FieldAttributes] = {
        "country": (HOME,),
        "state": (HOME,),
        "city": (HOME,),
        "street": (HOME, *RULE_ATTRIBUTES),
    }

    @strawberry.field(
        description="Personal data: null (with an UNAUTHENTICATED or FORBIDDEN error) unless"
        " the caller may read it (as `Student.email`) or the server makes it public; null"
        " without an error when the home has no street."
    )
    def street(self, info: Info) -> str | None:
        street = personal(info, "Home.street", self.student, lambda _: self.street_)
        return street  # type: ignore[no-any-return]  # or an awaitable of it

    @classmethod
    def from_map(cls, home: Mapping[str, Any], student: NodeBase) -> Home:
        return cls(
            country=home["country"],
            state=home["state"],
            city=home["city"],
            street_=home.get("street"),
            student=student,
        )
