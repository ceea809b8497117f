"""botocore's DynamoDB request serializing, minus the walk over every attribute value.

botocore builds a JSON request by walking the operation's input shape over the parameters,
value by value, into new dicts, then `json.dumps`. For DynamoDB most of a request is
attribute values (`{"S": ...}`, `{"M": {...}}`, `{"L": [...]}`: keys, items, expression
values), which our codec (`codec.encode`) already writes in their wire form: for them the
walk rebuilds an equal dict. A BatchGetItem of 30 keys took 150 µs to serialize; without
the walk, 45 µs (nearly all of it `json.dumps`).

`DynamoJSONSerializer` walks the rest of the input shape with botocore's own code and takes
an attribute value, a map of them or a list of such maps as given, so the body is the same
`json.dumps` of an equal dict: the same bytes. A binary value (`B`, `BS`: bytes that
botocore writes as base64) is not JSON as given; a request holding one is serialized by
botocore's walk, whole. What is taken as given is not checked either: a value it would
refuse (an unknown tag) or convert (a `B` given as text) goes out as it is; the codec writes
neither, and keys read back from DynamoDB hold bytes where they hold binary.
tests/test_request_serializer.py compares the two on every operation we send.

botocore has no component for its serializer (as it has `response_parser_factory` for its
parser): `install` sets the client's, when it is botocore's plain `JSONSerializer` (without
parameter validation, as our client is made).
"""

from __future__ import annotations

from typing import Any

from botocore.model import ListShape, OperationModel, Shape
from botocore.serialize import JSONSerializer

from graph_api.store.response_parser import holds_attribute_values

# botocore's private method that we extend (botocore-stubs declares only the public API).
_JSON: Any = JSONSerializer


class DynamoJSONSerializer(JSONSerializer):
    """botocore's JSON serializer, with attribute values taken as given (module docstring)."""

    def __init__(self, botocore: JSONSerializer) -> None:
        super().__init__(botocore._timestamp_precision)  # type: ignore[attr-defined]
        self._botocore = botocore  # the client's own, for a request holding bytes
        # Shapes live as long as the client's service model; remember the answer per name.
        self._attribute_maps: dict[str, bool] = {}

    def serialize_to_request(
        self, parameters: Any, operation_model: OperationModel
    ) -> dict[str, Any]:
        try:
            return super().serialize_to_request(parameters, operation_model)
        except TypeError:  # bytes in an attribute value: not JSON until botocore's walk
            return self._botocore.serialize_to_request(parameters, operation_model)

    def _serialize(
        self, serialized: dict[str, Any], value: Any, shape: Shape, key: str | None = None
    ) -> None:
        attribute_map = self._attribute_maps.get(shape.name)
        if attribute_map is None:
            attribute_map = self._attribute_maps[shape.name] = _as_given(shape)
        if attribute_map and key is not None:
            serialized[key] = value
            return
        _JSON._serialize(self, serialized, value, shape, key)


def _as_given(shape: Shape) -> bool:
    """An attribute value, a map of them (an item, a key) or a list of such maps (keys)."""
    if isinstance(shape, ListShape):
        return holds_attribute_values(shape.member)
    return holds_attribute_values(shape)


def install(client: Any) -> None:
    """Serialize `client`'s requests with `DynamoJSONSerializer`, if it has botocore's own."""
    if type(client._serializer) is JSONSerializer:
        client._serializer = DynamoJSONSerializer(client._serializer)
