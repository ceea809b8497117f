"""Every private attribute of a library that graph_api touches, each behind one accessor.

`tests/test_internals.py` pins each one: an upgrade that moves it fails there, not in a
request.

- Strawberry's `Info` is built from graphql-core's resolve info and the field (the executor's
  short path, graph/execution.py); `raw_info` and `graphql_schema` reach what Strawberry wraps.
"""

from __future__ import annotations

from typing import Any

from graphql import GraphQLResolveInfo, GraphQLSchema
from strawberry.schema.base import BaseSchema
from strawberry.types import Info
from strawberry.types.field import StrawberryField


def strawberry_info(raw: GraphQLResolveInfo[Any], field: StrawberryField) -> Info[Any, Any]:
    """Strawberry's `Info` for a resolver, built as its schema converter builds it."""
    return Info(_raw_info=raw, _field=field)


def raw_info(info: Info[Any, Any]) -> GraphQLResolveInfo[Any]:
    """graphql-core's resolve info under Strawberry's `Info`: the field nodes, fragments."""
    return info._raw_info


def graphql_schema(schema: BaseSchema) -> GraphQLSchema:
    """The graphql-core schema Strawberry built, which validation and pricing walk."""
    return schema._schema  # type: ignore[attr-defined,no-any-return]
