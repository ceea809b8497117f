"""The HTTP surface: Starlette routes `/graphql` (`graph_api.http.endpoint`: GraphQL over
HTTP, SSE and websockets, GraphiQL in a browser), the probes `/healthz` and `/readyz`
(`graph_api.http.health`), and `/metrics` (Prometheus' text format, graph_api/telemetry).
The app borrows `Services`; whoever made them (the CLI, a test) closes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from graph_api import telemetry
from graph_api.graph.engine.context import Services
from graph_api.http import graphiql, health
from graph_api.http.cors import cors_middleware
from graph_api.http.endpoint import GraphQLEndpoint
from graph_api.http.middleware import RequestGuard
from graph_api.writes import finisher


def create_app(services: Services) -> Starlette:
    async def home(_: Request) -> Response:
        return RedirectResponse("/graphql")

    async def metrics(_: Request) -> Response:
        assert telemetry.metrics is not None  # the route exists when the setting is on
        body, media_type = telemetry.metrics.exposition()
        return Response(body, media_type=media_type)

    endpoint = GraphQLEndpoint(services)
    routes: list[BaseRoute] = [
        Route("/graphql", endpoint, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", endpoint),
        Route("/healthz", health.healthz),
        Route("/readyz", health.Readiness(services).respond),
        Route("/", home),
    ]
    settings = services.settings
    if settings.metrics and not settings.metrics_port:  # else on a port of its own
        routes.append(Route("/metrics", metrics))
    if services.settings.graphiql and graphiql.assets_present():
        routes.append(Mount(f"/{graphiql.ASSETS_URL}", StaticFiles(directory=graphiql.ASSETS_DIR)))

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        stop_metrics = None
        if telemetry.metrics is not None and settings.metrics_port:
            stop_metrics = telemetry.metrics.serve(settings.metrics_host, settings.metrics_port)
        try:
            async with services.events.running(), finisher.running(services.settings):
                yield
        finally:
            if stop_metrics is not None:  # waits for its thread's loop: not on this one
                await asyncio.to_thread(stop_metrics)
            # The DynamoDB client of this loop: its connections end with the app.
            await services.dynamo.aclose()
            if services.limiter is not None:
                await services.limiter.aclose()
            if telemetry.metrics is not None:
                telemetry.metrics.process_exited()

    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            # Outermost: refusals and errors of the inner layers carry CORS headers too.
            *cors_middleware(services.settings),
            Middleware(RequestGuard, limit=services.settings.max_body_bytes),
        ],
    )
