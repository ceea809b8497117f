"""Pins each private attribute of a library that `graph_api.internals` touches: an upgrade
that moves one fails here, not in a request."""

from __future__ import annotations

import asyncio

import strawberry
from strawberry.types import Info

from graph_api.internals import strawberry_info


def test_strawberry_info_is_the_info_strawberry_gives_a_resolver() -> None:
    seen: list[Info] = []  # type: ignore[type-arg]

    @strawberry.type
    class Query:
        @strawberry.field
        def hello(self, info: Info, name: str = "x") -> str:  # type: ignore[type-arg]
            seen.append(info)
            built = strawberry_info(info._raw_info, info._field)
            assert type(built) is type(info)
            assert (built.field_name, built.path, built.selected_fields) == (
                info.field_name,
                info.path,
                info.selected_fields,
            )
            assert built.python_name == info.python_name == "hello"
            return name

    result = asyncio.run(strawberry.Schema(query=Query).execute('{ hello(name: "y") }'))
    assert result.errors is None and result.data == {"hello": "y"}
    assert len(seen) == 1
