"""Pins the private attributes graph_api touches (graph_api/internals.py) to the behaviour
it relies on: an upgrade of botocore that renames or bypasses them fails here first."""

from __future__ import annotations

from typing import Any

import botocore.session
from botocore.model import Shape
from botocore.parsers import JSONParser

from graph_api.internals import ParserHooks

QUERY = b'{"Items": [{"PK": {"S": "a"}}], "Count": 1, "ScannedCount": 1}'


class Watched(ParserHooks):
    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[bytes] = []
        self.walked: list[str] = []

    def decode_body(self, body: bytes) -> Any:
        self.bodies.append(body)
        return super().decode_body(body)

    def walk(self, shape: Shape, node: Any) -> Any:
        self.walked.append(shape.name)
        return super().walk(shape, node)


def test_botocores_json_parse_goes_through_both_hooks() -> None:
    model = botocore.session.get_session().get_service_model("dynamodb")
    shape = model.operation_model("Query").output_shape
    response = {"status_code": 200, "headers": {}, "body": QUERY}
    watched = Watched()
    assert watched.parse(dict(response), shape) == JSONParser().parse(dict(response), shape)
    assert watched.bodies == [QUERY]
    # The output, then every member under it, each through the hook.
    assert watched.walked[0] == "QueryOutput"
    assert "AttributeValue" in watched.walked
