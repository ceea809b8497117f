"""The AWS Lambda entry point: the Starlette app behind Mangum, for an API Gateway HTTP API.

`deploy/template.yaml` names `graph_api.http.lambda_handler.handler`. One execution environment
serves one request at a time, so its services (the DynamoDB client, the cursor key) are built
once and reused by every invocation it receives.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from mangum import Mangum

from graph_api.http.app import create_app
from graph_api.http.hosting import remote_settings, services_for
from graph_api.settings import Settings


def make_handler(settings: Settings) -> Mangum:
    # No lifespan: the app has no startup work, and Lambda gives no shutdown hook to run.
    return Mangum(create_app(services_for(settings)), lifespan="off")


@functools.cache
def _default() -> Mangum:
    # Lambda sets AWS_LAMBDA_FUNCTION_NAME, so `auto` resolves to the remote backend.
    return make_handler(remote_settings())


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _default()(event, context)


if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
    # Build during the init phase, so the first request does not pay for it; elsewhere
    # (tests, tooling) importing this module builds nothing.
    _default()
