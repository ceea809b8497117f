"""botocore's DynamoDB response parsing, minus the walk over every attribute value.

botocore parses a JSON response in two passes: `json.loads`, then a walk of the operation's
output shape over the whole result, value by value, to turn blobs into bytes and timestamps
into datetimes. For DynamoDB almost all of a response is items, and items are maps of
`AttributeValue` (`{"S": ...}`, `{"M": {...}}`, `{"L": [...]}`): the walk visits every
attribute, nested maps and lists included, and hands back an equal dict. Measured, that walk
is nearly all of the CPU of parsing a BatchGetItem of 30 students (about 28 KB); our codec
(`codec.decode`) reads the wire form directly, so we only need it handed over as parsed.

`DynamoResponseParserFactory` is the botocore session's `response_parser_factory`
component, so boto3 keeps doing everything else (signing, credentials, endpoints, retries,
errors). Its parser differs from botocore's `JSONParser` in two ways only, on successful
responses (HTTP < 300):

- the body is decoded by orjson (stdlib `json` when orjson refuses it, as botocore would);
- a map of `AttributeValue` (an item, a key), and a list or map of those (a page's items,
  a BatchGetItem's items by table), is taken as decoded, not walked. The rest of
  the output shape (`ConsumedCapacity`, `UnprocessedKeys`, `ItemCollectionMetrics`, ...) is
  still walked by botocore's own code, so unknown members are still dropped.

That is exactly botocore's result as long as every attribute value carries one known,
non-null type tag, which is what DynamoDB sends, and no integer outside the attribute
values exceeds 64 bits (orjson makes it a float; counts and capacities never do). A body
with a binary attribute (`B`, `BS`: botocore decodes their base64 into bytes) is parsed by
botocore's parser, as are error responses (HTTP >= 300), so `ClientError` (codes,
`CancellationReasons`, modeled fields) is unchanged. tests/test_response_parser.py pins the
output against botocore's on real responses of every operation we use, on both backends.

It is also stricter than botocore's on a successful response: a body that is not a JSON
object (an HTML page from a proxy, an empty or cut body) raises `ResponseParserError`
instead of being read as an empty result (botocore makes `{"message": <body>}` of it, which
the shape walk then drops). Which members an operation's answer must hold is the client's
check (store/client.py), which knows what was asked.

The CRC32 of a DynamoDB response (`x-amz-crc32`) is not checked while parsing: botocore's
legacy retry handler checks it, and raises `ChecksumError` on the last attempt (client.py).

`AioDynamoResponseParserFactory` is the same for aiobotocore's session, whose endpoint awaits
`parser.parse` (`AioDynamoJSONParser`: the same parsing, awaitable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import orjson
from aiobotocore.parsers import AioResponseParserFactory
from botocore.model import ListShape, MapShape, Shape
from botocore.parsers import (
    JSONParser,
    ResponseParser,
    ResponseParserError,
    ResponseParserFactory,
)

from graph_api.internals import ParserHooks

# A binary attribute's type tag as a JSON key, with or without whitespace before the colon
# (moto writes `"B": `). A string that merely contains it only costs the slow path.
_BINARY_TAG = re.compile(rb'"BS?"\s*:')


def _may_hold_binary(body: bytes) -> bool:
    # The regex alone: a 29 KB BatchGetItem took 13 µs, `b'"B"' in body` (whose last byte,
    # '"', is everywhere in JSON) 18 µs for each of the two substrings it replaced.
    return _BINARY_TAG.search(body) is not None


def holds_attribute_values(shape: Shape) -> bool:
    """An attribute value, or maps and lists that hold only them: an item, a key, a page of
    items, a BatchGetItem's items by table. botocore's walk of such a value hands back an
    equal one (map keys are strings: attribute and table names)."""
    if isinstance(shape, MapShape):
        return holds_attribute_values(shape.value)
    if isinstance(shape, ListShape):
        return holds_attribute_values(shape.member)
    return shape.name == "AttributeValue"


def json_object(body: bytes) -> dict[str, Any]:
    """A successful response's body as DynamoDB writes it, a JSON object; else
    `ResponseParserError` (botocore's error for an answer it cannot read)."""
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:  # NaN, a lone surrogate: JSON that botocore's `json.loads` reads
            decoded = json.loads(body.decode("utf-8"))
        except ValueError:  # not UTF-8, not JSON, empty
            decoded = None
    if not isinstance(decoded, dict):
        raise ResponseParserError(f"not DynamoDB's JSON: {body[:80]!r}")
    return decoded


class _StrictJSONParser(ParserHooks):
    """botocore's JSON parser, refusing a successful body that is not a JSON object."""

    def decode_body(self, body: bytes) -> Any:
        return json_object(body)


class DynamoJSONParser(ParserHooks):
    """botocore's JSON parser, with attribute values taken as decoded (module docstring)."""

    def __init__(self, **defaults: Any) -> None:
        super().__init__(**defaults)
        self._botocore = JSONParser(**defaults)  # error responses
        self._binary = _StrictJSONParser(**defaults)  # successful ones holding bytes
        # Shapes live as long as the client's service model; remember the answer per name.
        self._attribute_maps: dict[str, bool] = {}

    def parse(self, response: Mapping[str, Any], shape: Shape) -> Any:
        body = response.get("body")
        if response["status_code"] >= 300:
            try:
                return self._botocore.parse(response, shape)
            # An error body that is not even text, or JSON that is not an object (a proxy's
            # `null`, `[1]`): botocore's error parsing fails on it with what it meets.
            except (UnicodeDecodeError, AttributeError, TypeError, ValueError) as error:
                raise ResponseParserError(f"not DynamoDB's error: {error!r}") from error
        try:
            if not isinstance(body, bytes) or _may_hold_binary(body):
                return self._binary.parse(response, shape)
            return super().parse(response, shape)
        except (AttributeError, TypeError, ValueError) as error:  # a JSON of another shape
            raise ResponseParserError(f"not the operation's answer: {error!r}") from error

    def decode_body(self, body: bytes) -> Any:
        return json_object(body)

    def walk(self, shape: Shape, node: Any) -> Any:
        attribute_map = self._attribute_maps.get(shape.name)
        if attribute_map is None:
            attribute_map = self._attribute_maps[shape.name] = holds_attribute_values(shape)
        if attribute_map:
            return node
        return super().walk(shape, node)


class _OneJSONParser:
    """A response parser factory's `create_parser` with `json_parser` for "json", the base
    factory's parsers for the rest: one parser per factory (parsers keep no state between
    responses), instead of a new one per response."""

    json_parser: type[DynamoJSONParser]

    def __init__(self) -> None:
        super().__init__()
        self._parser_defaults: dict[str, Any] = {}
        self._json: DynamoJSONParser | None = None

    def set_parser_defaults(self, **kwargs: Any) -> None:
        super().set_parser_defaults(**kwargs)  # type: ignore[misc]
        self._parser_defaults.update(kwargs)
        self._json = None

    def create_parser(self, protocol_name: str) -> ResponseParser:
        if protocol_name != "json":
            return super().create_parser(protocol_name)  # type: ignore[misc,no-any-return]
        if self._json is None:
            self._json = self.json_parser(**self._parser_defaults)
        return self._json


class DynamoResponseParserFactory(_OneJSONParser, ResponseParserFactory):
    """A botocore session's `response_parser_factory` (the command line's boto3 client)."""

    json_parser = DynamoJSONParser


class AioDynamoJSONParser(DynamoJSONParser):
    """`DynamoJSONParser` for aiobotocore, whose endpoint awaits `parse`: DynamoDB's JSON
    has no event streams, so nothing in parsing it waits."""

    async def parse(self, response: Mapping[str, Any], shape: Shape) -> Any:
        return DynamoJSONParser.parse(self, response, shape)


class AioDynamoResponseParserFactory(_OneJSONParser, AioResponseParserFactory):  # type: ignore[misc]
    """An aiobotocore session's `response_parser_factory` (the API's client)."""

    json_parser = AioDynamoJSONParser
