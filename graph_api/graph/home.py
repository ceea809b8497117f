"""Home: a student's address, listed by country → state → city in GSI1."""

from __future__ import annotations

import strawberry

from graph_api.graph.access import require_personal_data_reader
from graph_api.graph.context import Info
from graph_api.store.codec import Item


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
    def from_item(cls, item: Item) -> Home:
        return cls(
            country=item["country"],
            state=item["state"],
            city=item["city"],
            street_=item.get("street"),
        )
