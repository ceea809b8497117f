"""`extensions.dynamodb` on every response: what the operation cost in DynamoDB."""

from __future__ import annotations

from typing import Any

from strawberry.extensions import SchemaExtension

from graph_api.graph.context import Context


class DynamoDBAccounting(SchemaExtension):
    def get_results(self) -> dict[str, Any]:
        context = self.execution_context.context
        if not isinstance(context, Context) or not context.services.settings.accounting:
            return {}
        return {"dynamodb": context.ledger.summary()}
