"""Home: a student's address, a map on the student item (indexed by place in GSI1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import strawberry

from graph_api.graph.access import require_personal_data_reader
from graph_api.graph.context import Info


@strawberry.type
class Home:
    country: str
    state: str
    city: str
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
