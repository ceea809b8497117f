"""The HTTP surface: Starlette routes `/graphql` (GraphiQL in a browser) and `/healthz`.

The app borrows `Services`; whoever made them (the CLI, a test) closes them.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from strawberry.asgi import GraphQL

from graph_api.graph.context import Context, Services
from graph_api.graph.schema import build_schema
from graph_api.middleware import BodySizeLimit, RequestIdMiddleware


class GraphQLEndpoint(GraphQL[Context, None]):
    def __init__(self, services: Services, **kwargs: Any) -> None:
        settings = services.settings
        super().__init__(
            build_schema(settings),
            graphql_ide="graphiql" if settings.graphiql else None,
            **kwargs,
        )
        self.services = services

    async def get_context(self, request: Any, response: Any) -> Context:
        auth = await self.services.auth.authenticate(request.headers.get("authorization"))
        return Context.create(self.services, request.state.request_id, auth)


def create_app(services: Services) -> Starlette:
    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def home(_: Request) -> Response:
        return RedirectResponse("/graphql")

    return Starlette(
        routes=[
            Route("/graphql", GraphQLEndpoint(services), methods=["GET", "POST"]),
            Route("/healthz", healthz),
            Route("/", home),
        ],
        middleware=[
            Middleware(RequestIdMiddleware),
            Middleware(BodySizeLimit, limit=services.settings.max_body_bytes),
        ],
    )
