"""Pins each private attribute of a library that `graph_api.internals` touches: an upgrade
that moves one fails here, not in a request."""

from __future__ import annotations

import asyncio

import strawberry
from graphql import GraphQLResolveInfo, GraphQLSchema
from strawberry.types import Info

from graph_api.internals import graphql_schema, raw_info, strawberry_info


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


def test_raw_info_is_graphql_cores_resolve_info_of_the_field() -> None:
    seen: list[GraphQLResolveInfo] = []

    @strawberry.type
    class Query:
        @strawberry.field
        def hello(self, info: Info) -> str:  # type: ignore[type-arg]
            seen.append(raw_info(info))
            return "hi"

    result = asyncio.run(strawberry.Schema(query=Query).execute("{ a: hello }"))
    assert result.errors is None
    (raw,) = seen
    assert raw.parent_type.name == "Query" and raw.path.key == "a"
    assert (raw.field_name, [n.alias.value for n in raw.field_nodes if n.alias]) == ("hello", ["a"])


def test_graphql_schema_is_the_schema_strawberry_built() -> None:
    @strawberry.type
    class Query:
        hello: str = "hi"

    schema = strawberry.Schema(query=Query)
    built = graphql_schema(schema)
    assert isinstance(built, GraphQLSchema)
    assert built.query_type is not None and "hello" in built.query_type.fields
