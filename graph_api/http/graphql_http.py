"""GraphQL over HTTP (https://graphql.github.io/graphql-over-http/): the response's media
type and status.

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

from graph_api.errors import INTERNAL_SERVER_ERROR, BadRequest, Unauthenticated, Unavailable

GRAPHQL_RESPONSE_JSON = "application/graphql-response+json"
JSON = "application/json"
# An HTTP-level refusal (unparsable JSON, no query, a mutation over GET, ...): the request
# never became a GraphQL operation.
BAD_REQUEST = BadRequest.code
# Request errors whose code says more than 400 does (under graphql-response+json only).
_REQUEST_ERROR_STATUS = {
    Unauthenticated.code: 401,
    INTERNAL_SERVER_ERROR: 500,
    Unavailable.code: 503,
}


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value)))
            except ValueError:
                return 0.0
    return 1.0


def response_media_type(accept: str | None) -> str:
    """The media type to answer in, from the request's Accept header.

    `application/graphql-response+json` when the client accepts it at least as much as
    `application/json`; otherwise `application/json`, which wildcards also mean (and which
    answers a client that accepts neither, as the spec allows instead of a 406).
    """
    best = {GRAPHQL_RESPONSE_JSON: 0.0, JSON: 0.0}
    for entry in (accept or "").split(","):
        media_range, *params = entry.split(";")
        media_range = media_range.strip().lower()
        if media_range == GRAPHQL_RESPONSE_JSON:
            kind = GRAPHQL_RESPONSE_JSON
        elif media_range in (JSON, "application/*", "*/*"):
            kind = JSON
        else:
            continue
        best[kind] = max(best[kind], _quality(params))
    wanted = best[GRAPHQL_RESPONSE_JSON]
    return GRAPHQL_RESPONSE_JSON if wanted > 0 and wanted >= best[JSON] else JSON


def is_request_error(result: ExecutionResult) -> bool:
    """Whether the operation failed before executing: no data, and no error on a field.

    A field error always has a path; one that nulled the whole of `data` (a non-null root
    field failed) is still an execution error, with `data: null` and a 2xx.
    """
    errors = result.errors or []
    return result.data is None and bool(errors) and all(not error.path for error in errors)


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
