"""CORS: which browser pages on other origins may call the API, with Starlette's own
`CORSMiddleware` (it answers the preflight `OPTIONS /graphql` and adds the headers).

The origins are the settings' (`GRAPH_API_CORS_ORIGINS`; on the embedded backend, unset, any
port of localhost and 127.0.0.1). None configured, no middleware: a preflight is 405 and a
browser keeps other origins' pages from reading answers. Tokens travel in `Authorization`,
never in cookies, so credentials are not allowed. The SAM template feeds the same setting
(deploy/template.yaml), so Lambda and a container answer browsers alike.
"""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

from graph_api.settings import Settings

# What a GraphQL client sends beyond the CORS-safelisted headers (Accept, Content-Type's
# form types): JSON bodies, a bearer token, a request id of its own.
ALLOWED_HEADERS = ("authorization", "content-type", "x-request-id")
EXPOSED_HEADERS = ("x-request-id",)
PREFLIGHT_MAX_AGE = 600  # seconds a browser may reuse a preflight's answer


def cors_middleware(settings: Settings) -> list[Middleware]:
    """Starlette's CORSMiddleware for the configured origins; none when there are none."""
    origins = [origin for origin in settings.cors_origins.split(",") if origin]
    if not origins and not settings.cors_origin_regex:
        return []
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_origin_regex=settings.cors_origin_regex or None,
            allow_methods=["GET", "POST"],
            allow_headers=list(ALLOWED_HEADERS),
            expose_headers=list(EXPOSED_HEADERS),
            max_age=PREFLIGHT_MAX_AGE,
        )
    ]
