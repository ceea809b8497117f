"""The Strawberry schema: root types plus the extensions every request runs through."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Iterable
from functools import cache
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import ParserCache
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api import telemetry
from graph_api.events.hub import Pace
from graph_api.graph.auth.access import RequireAuth
from graph_api.graph.engine.accounting import CopiesPending, DynamoDBAccounting, Observed
from graph_api.graph.engine.context import Context
from graph_api.graph.engine.document import DOCUMENTS
from graph_api.graph.engine.execution import ExecutionContext as ShortPathExecutionContext
from graph_api.graph.engine.limits import limit_extensions, requested_operation
from graph_api.graph.masking import format_error, log_unexpected, request_id_of
from graph_api.graph.mutation import Mutation
from graph_api.graph.query import Query
from graph_api.graph.subscription import Subscription
from graph_api.internals.strawberry import PreExecutionError, cached_parse, get_operation_type
from graph_api.settings import Settings

DEFAULTS = Settings(cursor_secret=b"")
CACHE_SIZE = DOCUMENTS


class GraphSchema(strawberry.Schema):
    settings: Settings = DEFAULTS  # the limits its extensions enforce (`build_schema`)

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
        # A subscription runs only as a stream (websocket, SSE): asked over plain HTTP it is
        # refused before it runs, with a message that says where it does run.
        if allowed_operation_types is not None:
            allowed_operation_types = set(allowed_operation_types) - {OperationType.SUBSCRIPTION}
        # Strawberry falls back to the first operation's name; validation needs to know
        # whether the client named one (graph.engine.limits.operation_name_errors).
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
        return _formatted(result, context_value)

    async def stream(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        operation_extensions: dict[str, Any] | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
    ) -> AsyncGenerator[Any, None]:
        # A websocket's operations share the connection's context: each gets its own
        # loaders and deadline (its events renew them again, graph.subscription).
        if isinstance(context_value, Context):
            context_value = context_value.for_operation()
        source = await super().stream(
            query,
            variable_values=variable_values,
            context_value=context_value,
            root_value=root_value,
            operation_name=operation_name,
            operation_extensions=operation_extensions,
            allowed_operation_types=allowed_operation_types,
        )
        return self._stream_formatted(source, operation_name, context_value)

    @staticmethod
    async def _stream_formatted(
        source: AsyncGenerator[Any, None], operation_name: str | None, context_value: Any
    ) -> AsyncGenerator[Any, None]:
        # The stream validates lazily, inside its first step: the operation name must be
        # set while it runs.
        token = requested_operation.set(operation_name)
        # While a result is out of our hands, the transport is sending it (a websocket's
        # send, an SSE chunk's): time that a client that reads slowly makes long.
        pace = context_value.pace if isinstance(context_value, Context) else Pace()
        try:
            async with contextlib.aclosing(source):
                async for result in source:
                    if isinstance(result, ExecutionResult | PreExecutionError):
                        result = _formatted(result, context_value)
                    with pace.sending():
                        yield result
        finally:
            with contextlib.suppress(ValueError):  # reset from another context: harmless
                requested_operation.reset(token)


def _formatted(result: ExecutionResult, context_value: Any) -> ExecutionResult:
    """Errors as the client sees them: coded, unexpected ones masked with the request id."""
    if result.errors:
        request_id = request_id_of(context_value)
        result.errors = [format_error(error, request_id) for error in result.errors]
        if telemetry.metrics is not None:
            for error in result.errors:
                telemetry.metrics.error(str((error.extensions or {}).get("code")))
    return result


def operation_type(
    query: str | None, operation_name: str | None, max_tokens: int
) -> OperationType | None:
    """The type of the operation `query` asks for, or None when it does not parse or names no
    operation (Strawberry answers those itself). Parsed as Strawberry parses it (the token
    bound, GRAPH_API_MAX_TOKENS; the parser cache every `ParserCache(maxsize=CACHE_SIZE)`
    shares), so that its own parse of the same request is a cache hit."""
    if not query:
        return None
    parse = cached_parse(CACHE_SIZE)
    try:
        document = parse(query, max_tokens=max_tokens)
        return get_operation_type(document, operation_name)
    except (GraphQLError, RuntimeError):  # a syntax error; no such operation
        return None


@cache
def build_schema(settings: Settings = DEFAULTS) -> GraphSchema:
    """The schema with the limits `settings` ask for; one per distinct settings."""
    built = GraphSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        # Classes and factories, not instances: each request gets its own extension objects
        # (ParserCache shares its LRU cache at module level; limits' validation results are
        # cached per schema).
        extensions=[
            RequireAuth,
            *limit_extensions(settings, CACHE_SIZE),
            lambda: ParserCache(maxsize=CACHE_SIZE),
            DynamoDBAccounting,
            CopiesPending,
            *([Observed] if settings.metrics or settings.tracing else []),
        ],
        execution_context_class=ShortPathExecutionContext,  # graph.engine.execution
    )
    built.settings = settings
    return built


schema = build_schema()  # the default limits: for export-schema and tools
