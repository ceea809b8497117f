"""The app as hosts that own the process build it: uvicorn workers in a container, Lambda.

Unlike `graph-api serve`, these never start the embedded backend: a container or a function
that quietly served an in-memory demo school would look healthy and lose every write.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from starlette.applications import Starlette

from graph_api.app import create_app
from graph_api.graph.context import Services
from graph_api.settings import Settings, SettingsError

log = logging.getLogger("graph_api")


def remote_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from the environment, refusing the embedded backend."""
    settings = Settings.from_env(environ)
    if settings.backend == "embedded":
        raise SettingsError(
            "no DynamoDB configured: set GRAPH_API_BACKEND=remote (AWS credentials come from"
            " the task role) or AWS_ENDPOINT_URL_DYNAMODB; hosted processes never embed moto"
        )
    return settings


def services_for(settings: Settings) -> Services:
    """The process's services, with the warnings an operator should see in the logs."""
    # A no-op where the host already logs (Lambda's runtime has a root handler); the level
    # goes on our own logger, since Lambda leaves the root at WARNING.
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(settings.log_level)
    if not settings.cursor_secret_configured:
        log.warning(
            "GRAPH_API_CURSOR_SECRET is not set: cursors break across processes and restarts"
        )
    log.info("remote backend: table %s", settings.table)
    return Services.create(settings)


def create_app_from_env() -> Starlette:
    """The uvicorn factory (`uvicorn --factory graph_api.hosting:create_app_from_env`).

    Each worker process calls it once; its services live as long as the worker.
    """
    return create_app(services_for(remote_settings()))
