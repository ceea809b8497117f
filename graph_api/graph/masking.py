"""Errors as clients see them: every error carries `extensions.code`; surprises are masked.

The schema logs unexpected exceptions with the request id (`log_unexpected`, its
`process_errors` hook), then rewrites every error of the result (`format_error`), whichever
step raised it: parsing, validation or execution.
"""

from __future__ import annotations

import logging
from typing import Any

from graphql import GraphQLError
from strawberry.types import ExecutionContext

from graph_api.errors import INTERNAL_SERVER_ERROR, ApiError, BadUserInput, masked_message

log = logging.getLogger("graph_api.errors")


def request_id_of(context: Any) -> str | None:
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
                request_id_of(execution_context.context if execution_context else None),
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


def code_of(error: GraphQLError) -> str:
    """The code `format_error` gives `error`."""
    original = error.original_error
    if isinstance(original, ApiError):
        return original.code
    if is_unexpected(error):
        return INTERNAL_SERVER_ERROR
    if error.extensions and "code" in error.extensions:
        return str(error.extensions["code"])
    return BadUserInput.code


def format_error(error: GraphQLError, request_id: str | None) -> GraphQLError:
    """The error as the client sees it: with a code, and masked when unexpected."""
    original = error.original_error
    if isinstance(original, ApiError):
        return _with_code(error, original.message, {**original.extensions, "code": original.code})
    if is_unexpected(error):
        return _with_code(
            error,
            masked_message(request_id),
            {"code": INTERNAL_SERVER_ERROR, "requestId": request_id},
        )
    # Parse, validation and coercion errors: the client's document or variables.
    if error.extensions and "code" in error.extensions:
        return error
    return _with_code(error, error.message, {**(error.extensions or {}), "code": BadUserInput.code})
