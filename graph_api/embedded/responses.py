"""moto's responses that carry items, written as JSON directly.

moto 5.2 serializes every response by walking botocore's shape model over every attribute
value: two thirds of a Query's time. Items are already in DynamoDB's wire form, so
`GetItem`, `BatchGetItem`, `Query` and `Scan` answers are dumped as they are (pinned against
moto's own serializer by tests/embedded/test_embedded.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from moto.dynamodb.responses import DynamoResult

_ITEM_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})


def as_json(original: Callable[..., Any]) -> Callable[..., Any]:
    def execute_result(self: DynamoResult, context: Any) -> Any:
        if context.operation_model.name not in _ITEM_READS or not isinstance(self.result, dict):
            return original(self, context)
        return 200, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(self.result)

    return execute_result
