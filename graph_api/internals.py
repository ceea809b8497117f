"""Every private attribute of a library that graph_api touches, each behind one accessor.

`tests/test_internals.py` pins each one: an upgrade that moves it fails there, not in a
request.

- botocore's `JSONParser` has no public hook for the two steps of parsing a successful JSON
  answer that store/response_parser.py replaces (decoding the body, and walking the output
  shape over it): `ParserHooks` gives them public names.
- Strawberry's `Info` is built from graphql-core's resolve info and the field (the executor's
  short path, graph/execution.py); `raw_info` and `graphql_schema` reach what Strawberry wraps.
"""

from __future__ import annotations

from typing import Any

from botocore.model import Shape
from botocore.parsers import JSONParser
from graphql import GraphQLResolveInfo, GraphQLSchema
from strawberry.schema.base import BaseSchema
from strawberry.types import Info
from strawberry.types.field import StrawberryField

_JSON: Any = JSONParser  # botocore-stubs declares only the public API


class ParserHooks(JSONParser):
    """botocore's JSON parser, its private steps under public names."""

    def _parse_body_as_json(self, body_contents: bytes) -> Any:
        return self.decode_body(body_contents)

    def _parse_shape(self, shape: Shape, node: Any) -> Any:
        return self.walk(shape, node)

    def decode_body(self, body: bytes) -> Any:
        """`JSONParser._parse_body_as_json`: a body's bytes to decoded JSON (botocore:
        `json.loads`, `{"message": <body>}` when that fails, `{}` when empty)."""
        return _JSON._parse_body_as_json(self, body)

    def walk(self, shape: Shape, node: Any) -> Any:
        """`JSONParser._parse_shape`: the output shape walked over decoded JSON, value by
        value (botocore calls it again for every member, through `self`)."""
        return _JSON._parse_shape(self, shape, node)


def strawberry_info(raw: GraphQLResolveInfo[Any], field: StrawberryField) -> Info[Any, Any]:
    """Strawberry's `Info` for a resolver, built as its schema converter builds it."""
    return Info(_raw_info=raw, _field=field)


def raw_info(info: Info[Any, Any]) -> GraphQLResolveInfo[Any]:
    """graphql-core's resolve info under Strawberry's `Info`: the field nodes, fragments."""
    return info._raw_info


def graphql_schema(schema: BaseSchema) -> GraphQLSchema:
    """The graphql-core schema Strawberry built, which validation and pricing walk."""
    return schema._schema  # type: ignore[attr-defined,no-any-return]
