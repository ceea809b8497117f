"""`orderBy` inputs: the orders a list's key holds, each read as one Query from either end.

One shape for all of them, `Order[F]`: a `field` (an enum of what the key orders by, one
value today) and a `direction`. Each list names its own input (`NameOrder`, `IdOrder`,
`PlaceOrder`) so that GraphiQL documents what it orders by; only that differs.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Generic, TypeVar

import strawberry

F = TypeVar("F", bound=Enum)


@strawberry.enum(description="Which way a list is ordered.")
class OrderDirection(Enum):
    ASC = strawberry.enum_value("ASC", description="Ascending: A to Z.")
    DESC = strawberry.enum_value(
        "DESC", description="Descending: Z to A (the same Query, read from its end)."
    )


@strawberry.input(description="An order a list's key holds, either way.")
class Order(Generic[F]):
    """Each list's input specializes this, giving `field` its type, default and description;
    the schema shows only the specializations."""

    field: F
    direction: OrderDirection = strawberry.field(
        default=OrderDirection.ASC, description="ASC (the default) or DESC."
    )

    @property
    def ascending(self) -> bool:
        return self.direction is OrderDirection.ASC


def ascending(order: Order[Any] | None) -> bool:
    """Whether a list is asked for in its key's order (the default) or against it."""
    return order is None or order.ascending


@strawberry.enum(description="What a search by name can be ordered by.")
class NameOrderField(Enum):
    NAME = strawberry.enum_value(
        "NAME",
        description="The name (a class: its subject) with case and accents ignored, blanks as"
        " one, then the id: the order of the search index's sort key.",
    )


@strawberry.input(
    description="The order of a search by name: only orders that the index's sort key"
    " holds, so a page is still one Query (no sort in memory)."
)
class NameOrder(Order[NameOrderField]):
    field: NameOrderField = strawberry.field(
        default=NameOrderField.NAME, description="What to order by: NAME."
    )


@strawberry.enum(description="What a catalog (teachers, classes, sports) can be ordered by.")
class IdOrderField(Enum):
    ID = strawberry.enum_value("ID", description="The id: the order of the catalog's sort key.")


@strawberry.input(description="The order of a catalog: by id, either way; still one Query a page.")
class IdOrder(Order[IdOrderField]):
    field: IdOrderField = strawberry.field(
        default=IdOrderField.ID, description="What to order by: ID."
    )


@strawberry.enum(description="What students by location can be ordered by.")
class PlaceOrderField(Enum):
    PLACE = strawberry.enum_value(
        "PLACE",
        description="State, then city (as matched: trimmed and case-folded), then the"
        " student's id: the order of the location key.",
    )


@strawberry.input(
    description="The order of students by location: by place, either way; the same Queries a"
    " page as the other way (the place's key read from its other end)."
)
class PlaceOrder(Order[PlaceOrderField]):
    field: PlaceOrderField = strawberry.field(
        default=PlaceOrderField.PLACE, description="What to order by: PLACE."
    )
