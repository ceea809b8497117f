"""The AWS Lambda entry point: the Starlette app behind Mangum, for an API Gateway HTTP API.

`deploy/template.yaml` names `graph_api.http.lambda_handler.handler`. One execution environment
serves one request at a time, so its services (the DynamoDB client, the cursor key) are built
once and reused by every invocation it receives.

Importing this module in Lambda is the function's init phase, and it goes as far as it can
without a request: the app and its services are built, and the DynamoDB client is opened on
the event loop Mangum runs every invocation on (botocore's models and endpoint rules loaded,
credentials resolved), so the first request does not pay for them. With SnapStart (the
template turns it on) Lambda runs that init once, when a version is published, and resumes
new execution environments from a snapshot of it. SnapStart's runtime hooks (the
`snapshot_restore_py` module that Lambda's Python runtimes ship) keep that sound: before the
snapshot the client is closed, so no connection or credentials are in it; after a restore the
random generator is seeded again (the retries' jitter would otherwise be the same in every
environment resumed from one snapshot) and the client is opened anew.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
from typing import Any

from mangum import Mangum

from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.http.hosting import remote_settings, services_for
from graph_api.settings import Settings


def make_handler(settings: Settings) -> Mangum:
    return _mangum(services_for(settings))


def _mangum(services: Services) -> Mangum:
    # No lifespan: the app has no startup work, and Lambda gives no shutdown hook to run.
    return Mangum(create_app(services), lifespan="off")


@functools.cache
def _services() -> Services:
    # Lambda sets AWS_LAMBDA_FUNCTION_NAME, so `auto` resolves to the remote backend.
    return services_for(remote_settings())


@functools.cache
def _default() -> Mangum:
    return _mangum(_services())


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _default()(event, context)


def open_client() -> None:
    """Open the DynamoDB client on Mangum's loop now, as the first request would."""
    asyncio.get_event_loop().run_until_complete(_services().dynamo.open())


def before_snapshot() -> None:
    """SnapStart: no open connection, nor the credentials it was made with, in the snapshot."""
    asyncio.get_event_loop().run_until_complete(_services().dynamo.aclose())


def after_restore() -> None:
    """SnapStart: a generator of this environment's own, and a client made here."""
    random.seed()
    open_client()


def _register_hooks() -> None:
    try:
        from snapshot_restore_py import register_after_restore, register_before_snapshot
    except ImportError:  # not one of Lambda's managed runtimes (a container image): no snapshot
        return
    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore)


if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
    # The init phase (see the module's docstring); elsewhere (tests, tooling) importing this
    # module builds nothing. Mangum runs each invocation on `asyncio.get_event_loop()`: the
    # loop set here (Python 3.14 makes none on demand), on which the client is opened.
    asyncio.set_event_loop(asyncio.new_event_loop())
    _default()
    open_client()
    _register_hooks()
