"""Home: a student's address, listed by country → state → city in GSI1."""

from __future__ import annotations

import strawberry

from graph_api.store.codec import Item


@strawberry.type
class Home:
    country: str
    state: str
    city: str
    street: str | None

    @classmethod
    def from_item(cls, item: Item) -> Home:
        return cls(
            country=item["country"],
            state=item["state"],
            city=item["city"],
            street=item.get("street"),
        )
