"""The HTTP surface: Starlette routes `/graphql` (GraphiQL in a browser) and `/healthz`.

`/graphql` speaks GraphQL over HTTP (`graph_api.graphql_http`: media types, statuses) and
serves GraphiQL with its own assets (`graph_api.graphiql`: no CDN).
The app borrows `Services`; whoever made them (the CLI, a test) closes them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.http.base import BaseRequestProtocol
from strawberry.schema.exceptions import InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_SSE_PROTOCOL, GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api import graphiql
from graph_api.errors import NotFound
from graph_api.graph.context import Context, Services
from graph_api.graph.schema import build_schema
from graph_api.graphql_http import (
    BAD_REQUEST,
    JSON,
    error_body,
    is_request_error,
    response_media_type,
    status_for,
)
from graph_api.middleware import BodySizeLimit, RequestIdMiddleware

STREAM_ONLY = (
    "a subscription runs over a websocket (graphql-transport-ws) or as GraphQL over SSE"
    " (send Accept: text/event-stream), not as a plain HTTP request"
)
KEEP_ALIVE_SECONDS = 15.0  # pings keep proxies from closing a quiet websocket
CONNECTION_INIT_SECONDS = 10.0  # a websocket that never says connection_init is closed


class GraphQLEndpoint(GraphQL[Context, None]):
    def __init__(self, services: Services, **kwargs: Any) -> None:
        settings = services.settings
        super().__init__(
            build_schema(settings),
            graphql_ide="graphiql" if settings.graphiql else None,
            # Subscriptions: graphql-transport-ws on the websocket, GraphQL over SSE
            # (distinct connections) on POST/GET with `Accept: text/event-stream`.
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_SSE_PROTOCOL),
            keep_alive=True,
            keep_alive_interval=KEEP_ALIVE_SECONDS,
            connection_init_wait_timeout=timedelta(seconds=CONNECTION_INIT_SECONDS),
            max_subscriptions_per_connection=settings.max_subscriptions_per_connection,
            **kwargs,
        )
        self.services = services
        self.ide_html = graphiql.page() if settings.graphiql else ""

    async def get_context(self, request: Any, response: Any) -> Context:
        auth = await self.services.auth.authenticate(request.headers.get("authorization"))
        return Context.create(self.services, request.state.request_id, auth)

    async def on_ws_connect(self, context: Context) -> None:
        # A browser cannot set headers on a websocket: its token comes in `connection_init`'s
        # payload, `{"Authorization": "Bearer ..."}` (the upgrade's header also counts).
        params = getattr(context, "connection_params", None)
        token = params.get("Authorization") if isinstance(params, dict) else None
        if isinstance(token, str):
            context.auth = await self.services.auth.authenticate(token)

    # -- GraphQL over HTTP (graph_api.graphql_http) ------------------------------------------

    def parse_json(self, data: str | bytes) -> Any:
        """A request's JSON: anything but an object (or a batch's list) is a 400, never a 500."""
        try:
            value = self.decode_json(data)
        except (ValueError, RecursionError) as error:  # bad JSON or UTF-8, absurd nesting
            raise HTTPException(400, "Unable to parse request body as JSON") from error
        if not isinstance(value, dict | list):
            raise HTTPException(400, "The request must be a JSON object")
        return value

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = await self.run(request)
        except HTTPException as error:
            # Strawberry answers these in plain text; clients expect a GraphQL response.
            response = self.refusal(request, error)
        await response(scope, receive, send)

    def refusal(self, request: Request, error: HTTPException) -> Response:
        """A request refused before it became an operation: its status, a coded error."""
        code = NotFound.code if error.status_code == 404 else BAD_REQUEST
        response = Response(
            self.encode_json(error_body(error.reason, code)),
            status_code=error.status_code,
            media_type=response_media_type(request.headers.get("accept")),
        )
        if error.status_code == 405:
            response.headers["allow"] = "POST"
        return response

    async def get_sub_response(self, request: Request | WebSocket) -> Response:
        sub_response = await super().get_sub_response(request)
        # The negotiated type rides on the sub-response to `create_response`, which is not
        # given the request.
        sub_response.media_type = response_media_type(request.headers.get("accept"))
        return sub_response

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        response = await super().process_result(request, result)
        if is_request_error(result):
            # Nothing executed, so there is no `data` entry (GraphQL spec, "Response").
            response.pop("data", None)
        return response

    def create_response(
        self,
        response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse],
        sub_response: Response,
    ) -> Response:
        response = super().create_response(response_data, sub_response)
        media_type = sub_response.media_type or JSON
        response.headers["content-type"] = media_type
        if isinstance(response_data, dict) and not sub_response.status_code:
            response.status_code = status_for(response_data, media_type)
            if response.status_code == 401:
                response.headers["www-authenticate"] = "Bearer"
        return response

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        try:
            return await super().execute_single(
                request=request,
                request_adapter=request_adapter,
                sub_response=sub_response,
                context=context,
                root_value=root_value,
                request_data=request_data,
            )
        except HTTPException as error:
            refused = error.__cause__
            if isinstance(refused, InvalidOperationTypeError):
                if refused.operation_type == OperationType.SUBSCRIPTION:
                    raise HTTPException(400, STREAM_ONLY) from error
                # A mutation over GET is 405, not Strawberry's 400 (GraphQL over HTTP, "GET").
                if request_adapter.method == "GET":
                    raise HTTPException(405, error.reason) from error
            raise

    # -- GraphiQL (graph_api.graphiql) -------------------------------------------------------

    def should_render_graphql_ide(self, request: BaseRequestProtocol) -> bool:
        wanted = super().should_render_graphql_ide(request)
        if wanted and self.graphql_ide is None:
            raise HTTPException(404, "GraphiQL is turned off on this server (GRAPH_API_GRAPHIQL)")
        return wanted

    async def render_graphql_ide(self, request: Request) -> Response:
        return HTMLResponse(self.ide_html)


def create_app(services: Services) -> Starlette:
    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def home(_: Request) -> Response:
        return RedirectResponse("/graphql")

    endpoint = GraphQLEndpoint(services)
    routes: list[BaseRoute] = [
        Route("/graphql", endpoint, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", endpoint),
        Route("/healthz", healthz),
        Route("/", home),
    ]
    if services.settings.graphiql and graphiql.assets_present():
        routes.append(Mount(f"/{graphiql.ASSETS_URL}", StaticFiles(directory=graphiql.ASSETS_DIR)))

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with services.events.running():
            yield

    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(RequestIdMiddleware),
            Middleware(BodySizeLimit, limit=services.settings.max_body_bytes),
        ],
    )
