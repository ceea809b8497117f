"""GraphQL over HTTP (https://graphql.github.io/graphql-over-http/): the response's status
in the media type negotiated (`graph_api.http.negotiation`).

A client that accepts `application/graphql-response+json` gets it, and with it statuses
that say what happened: a request error (the document does not parse or validate, the
variables do not coerce, the operation is too costly: nothing executed, so there is no
`data` entry) is a 4xx. `application/json`, the legacy type and the default (no Accept,
`*/*`), keeps 200 for every well-formed request, as that type's clients expect. Execution
errors (a field failed, `data` present even if null) are 200 under both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strawberry.types import ExecutionResult

from graph_api.errors import (
    INTERNAL_SERVER_ERROR,
    BadRequest,
    RateLimited,
    Unauthenticated,
    Unavailable,
)
from graph_api.http.negotiation import GRAPHQL_RESPONSE_JSON, JSON

__all__ = [
    "BAD_REQUEST",
    "GRAPHQL_RESPONSE_JSON",
    "JSON",
    "is_request_error",
    "is_request_error_response",
    "status_for",
]

# An HTTP-level refusal (unparsable JSON, no query, a mutation over GET, ...): the request
# never became a GraphQL operation.
BAD_REQUEST = BadRequest.code
# Request errors whose code says more than 400 does (under graphql-response+json only).
_REQUEST_ERROR_STATUS = {
    Unauthenticated.code: 401,
    RateLimited.code: 429,  # graph/engine/throttle sets it for application/json too
    INTERNAL_SERVER_ERROR: 500,
    Unavailable.code: 503,
}


def is_request_error(result: ExecutionResult) -> bool:
    """Whether the operation failed before executing: no data, and no error on a field.

    A field error always has a path; one that nulled the whole of `data` (a non-null root
    field failed) is still an execution error, with `data: null` and a 2xx.
    """
    errors = result.errors or []
    return result.data is None and bool(errors) and all(not error.path for error in errors)


def is_request_error_response(response: Mapping[str, Any]) -> bool:
    """`is_request_error` of a response as sent (a websocket's `next` payload)."""
    errors = response.get("errors") or []
    return (
        response.get("data") is None
        and bool(errors)
        and all(not (isinstance(error, Mapping) and error.get("path")) for error in errors)
    )


def status_for(response: Mapping[str, Any], media_type: str) -> int:
    """The status of a GraphQL response (the body, as a dict) in `media_type`."""
    if media_type != GRAPHQL_RESPONSE_JSON or "data" in response:
        return 200
    # Nothing executed: the client's document or variables (400), unless the code says more.
    return max(
        (
            _REQUEST_ERROR_STATUS.get(str((error.get("extensions") or {}).get("code")), 400)
            for error in response.get("errors") or []
        ),
        default=400,
    )
