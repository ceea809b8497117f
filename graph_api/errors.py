"""Errors a client may see, each with the code it carries in `extensions.code`, and the
one function that builds an error response's body (`error_body`).

Anything raised that is not an `ApiError` is unexpected: the schema masks it as
INTERNAL_SERVER_ERROR and logs it with the request id (see `graph/masking.py`); so does the
HTTP middleware for anything that escapes the app (`http/middleware.py`).
"""

from __future__ import annotations

from typing import Any, ClassVar


class ApiError(Exception):
    code: ClassVar[str] = "INTERNAL_SERVER_ERROR"  # what an unexpected error is masked as

    def __init__(self, message: str, **extensions: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extensions = extensions


class BadUserInput(ApiError):
    code = "BAD_USER_INPUT"


class NotFound(ApiError):
    code = "NOT_FOUND"


class AlreadyExists(ApiError):
    code = "ALREADY_EXISTS"


class Conflict(ApiError):
    code = "CONFLICT"


class Unavailable(ApiError):
    """DynamoDB did not answer in time or kept throttling after our retries; or the table
    lacks an index the field reads (made before it: `graph-api migrate` adds it)."""

    code = "UNAVAILABLE"


class QueryTooCostly(ApiError):
    """An operation whose static cost is over GRAPH_API_MAX_COST (`graph/engine/cost.py`)."""

    code = "QUERY_TOO_COSTLY"


class RateLimited(ApiError):
    """The caller's budget of cost points cannot pay for this operation (or a
    subscription's next event) now: `retryAfter` says in how many seconds it can
    (`graph/engine/budgets.py`). Nothing was run."""

    code = "RATE_LIMITED"


class Unauthenticated(ApiError):
    """A write (or, when reads are private, any operation, or a personal field) without a
    valid bearer token."""

    code = "UNAUTHENTICATED"


class Forbidden(ApiError):
    """Not this caller's to do: a mutation its token's roles do not allow on the nodes it
    names (a `userErrors` entry), or personal data on a server with no auth configured and
    GRAPH_API_PUBLIC_PERSONAL_DATA off."""

    code = "FORBIDDEN"


class BadRequest(ApiError):
    """Refused at the HTTP level, before it became an operation: unparsable JSON, no query,
    a subscription sent as a plain request (GraphQL over HTTP, `http/graphql_http.py`)."""

    code = "BAD_REQUEST"


class PersistedQueryNotFound(ApiError):
    """A document asked for by its id (`documentId`, APQ's `sha256Hash`) that this server
    does not hold: Apollo's persisted-queries link sends the text on seeing this code."""

    code = "PERSISTED_QUERY_NOT_FOUND"


class ForbiddenDocument(ApiError):
    """A document text not in the manifest, on a server that runs trusted documents only
    (GRAPH_API_DOCUMENTS=trusted)."""

    code = "FORBIDDEN_DOCUMENT"


INTERNAL_SERVER_ERROR = ApiError.code


def masked_message(request_id: str | None) -> str:
    """What a client sees of an unexpected error: the id to find it in the log by."""
    return f"Internal server error (request id {request_id})"


def error_body(message: str, code: str, **extensions: Any) -> dict[str, Any]:
    """A GraphQL response holding one request error (so no `data`): every error response
    built outside GraphQL execution is this one shape."""
    return {"errors": [{"message": message, "extensions": {"code": code, **extensions}}]}
