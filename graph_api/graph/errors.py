"""Errors as clients see them: every error carries `extensions.code`; surprises are masked.

`process_errors` (the schema's logging hook) logs unexpected exceptions with the request id
before `CodedErrors` rewrites them into a generic INTERNAL_SERVER_ERROR for the client.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionContext

from graph_api.errors import ApiError

log = logging.getLogger("graph_api.errors")

INTERNAL = "INTERNAL_SERVER_ERROR"
BAD_USER_INPUT = "BAD_USER_INPUT"


def request_id_of(execution_context: ExecutionContext | None) -> str | None:
    context = execution_context.context if execution_context else None
    return getattr(context, "request_id", None)


def is_unexpected(error: GraphQLError) -> bool:
    original = error.original_error
    return original is not None and not isinstance(original, ApiError | GraphQLError)


def log_unexpected(errors: list[GraphQLError], execution_context: ExecutionContext | None) -> None:
    for error in errors:
        if is_unexpected(error):
            log.error(
                "unexpected error in %s (request %s)",
                ".".join(map(str, error.path or [])) or "operation",
                request_id_of(execution_context),
                exc_info=error.original_error,
            )


def _with_code(error: GraphQLError, message: str, extensions: dict[str, Any]) -> GraphQLError:
    return GraphQLError(
        message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions=extensions,
    )


class CodedErrors(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        yield
        result = self.execution_context.result
        if result is not None and result.errors:
            result.errors = [self.format(error) for error in result.errors]

    def format(self, error: GraphQLError) -> GraphQLError:
        original = error.original_error
        if isinstance(original, ApiError):
            return _with_code(
                error, original.message, {**original.extensions, "code": original.code}
            )
        if is_unexpected(error):
            request_id = request_id_of(self.execution_context)
            return _with_code(
                error,
                f"Internal server error (request id {request_id})",
                {"code": INTERNAL, "requestId": request_id},
            )
        # Parse, validation and coercion errors: the client's document or variables.
        if error.extensions and "code" in error.extensions:
            return error
        return _with_code(
            error, error.message, {**(error.extensions or {}), "code": BAD_USER_INPUT}
        )
