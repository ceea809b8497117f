"""Home: a student's address, a map on the student item (indexed by place in GSI1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import strawberry

from graph_api.graph.access import require_personal_data_reader
from graph_api.graph.context import Info


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

    @strawberry.field(
        description="Personal data: null (with an UNAUTHENTICATED or FORBIDDEN error) unless"
        " the request carries a valid bearer token or the server makes it public; null"
        " without an error when the home has no street."
    )
    def street(self, info: Info) -> str | None:
        require_personal_data_reader(info, "Home.street")
        return self.street_

    @classmethod
    def from_map(cls, home: Mapping[str, Any]) -> Home:
        return cls(
            country=home["country"],
            state=home["state"],
            city=home["city"],
            street_=home.get("street"),
        )
