"""The Strawberry schema: root types plus the extensions every request runs through."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import ParserCache
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api.graph.access import RequireAuth
from graph_api.graph.accounting import DynamoDBAccounting
from graph_api.graph.errors import format_error, log_unexpected, request_id_of
from graph_api.graph.limits import limit_extensions, requested_operation
from graph_api.graph.mutation import Mutation
from graph_api.graph.query import Query
from graph_api.settings import Settings

DEFAULTS = Settings(cursor_secret=b"")
CACHE_SIZE = 256


class GraphSchema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # Client errors are the client's business; only surprises are logged, with the
        # request id that the masked message gives the client.
        log_unexpected(errors, execution_context)

    async def execute(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        # Strawberry falls back to the first operation's name; validation needs to know
        # whether the client named one (graph.limits.operation_name_errors).
        token = requested_operation.set(operation_name)
        try:
            result = await super().execute(
                query,
                variable_values=variable_values,
                context_value=context_value,
                root_value=root_value,
                operation_name=operation_name,
                allowed_operation_types=allowed_operation_types,
                operation_extensions=operation_extensions,
            )
        finally:
            requested_operation.reset(token)
        if result.errors:
            request_id = request_id_of(context_value)
            result.errors = [format_error(error, request_id) for error in result.errors]
        return result


@cache
def build_schema(settings: Settings = DEFAULTS) -> GraphSchema:
    """The schema with the limits `settings` ask for; one per distinct settings."""
    return GraphSchema(
        query=Query,
        mutation=Mutation,
        # Classes and factories, not instances: each request gets its own extension objects
        # (ParserCache shares its LRU cache at module level; limits' validation results are
        # cached per schema).
        extensions=[
            RequireAuth,
            *limit_extensions(settings, CACHE_SIZE),
            lambda: ParserCache(maxsize=CACHE_SIZE),
            DynamoDBAccounting,
        ],
    )


schema = build_schema()  # the default limits: for export-schema and tools
