"""The HTTP surface: Starlette routes `/graphql` (GraphiQL in a browser) and `/healthz`.

The app borrows `Services`; whoever made them (the CLI, a test) closes them.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from strawberry.asgi import GraphQL

from graph_api.graph.context import Context, Services
from graph_api.graph.schema import build_schema

REQUEST_ID_HEADER = "x-request-id"
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class RequestIdMiddleware:
    """Gives every request an id (the client's, when it sent a sane one) and echoes it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope["headers"]).get(REQUEST_ID_HEADER.encode(), b"").decode("latin-1")
        request_id = sent if _SANE_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    h for h in message.get("headers", []) if h[0] != REQUEST_ID_HEADER.encode()
                ]
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_id)


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
        return Context.create(self.services, request.state.request_id)


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
        middleware=[Middleware(RequestIdMiddleware)],
    )
