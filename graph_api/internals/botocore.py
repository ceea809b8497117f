"""botocore's private attributes that graph_api touches (`graph_api.internals` lists them).

- botocore's `JSONParser` has no public hook for the two steps of parsing a successful JSON
  answer that store/response_parser.py replaces (decoding the body, and walking the output
  shape over it): `ParserHooks` gives them public names.
"""

from __future__ import annotations

from typing import Any

from botocore.model import Shape
from botocore.parsers import JSONParser

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
