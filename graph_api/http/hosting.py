"""The app as hosts that own the process build it: uvicorn workers in a container, Lambda,
and `graph-api serve`'s uvicorn, in its own process or in `--workers N` worker processes.

Unlike `graph-api serve`, these never start the embedded backend: a container or a function
that quietly served an in-memory demo school would look healthy and lose every write.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette

from graph_api import logs
from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.settings import Settings, SettingsError
from graph_api.telemetry import MULTIPROCESS_DIR

log = logging.getLogger("graph_api")


def remote_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from the environment, refusing the embedded backend, and AWS's DynamoDB
    with no sign-in unless open writes are meant (`open_writes_problem`)."""
    settings = Settings.from_env(environ)
    if settings.backend == "embedded":
        raise SettingsError(
            "no DynamoDB configured: set GRAPH_API_BACKEND=remote (AWS credentials come from"
            " the task role) or AWS_ENDPOINT_URL_DYNAMODB; hosted processes never embed moto"
        )
    refusal = open_writes_problem(settings)
    if refusal is not None:
        raise SettingsError(refusal)
    return settings


def open_writes_problem(settings: Settings) -> str | None:
    """Why a server must not start (`serve`, the image's uvicorn, the Lambda function):
    AWS's own DynamoDB (its endpoint, or none named but botocore's) with no sign-in
    configured, where anyone could write, unless GRAPH_API_OPEN_WRITES says that is meant.
    None: it may start (an emulator's endpoint, named, keeps starting open)."""
    from graph_api.store.client import configured_endpoint, endpoint_of

    if (
        settings.backend != "remote"
        or settings.jwks_url
        or settings.jwt_secret
        or settings.open_writes
        or (settings.endpoint_url and not _is_aws(settings.endpoint_url))
    ):
        return None
    notes = logging.getLogger("botocore.configprovider")  # its INFO notes: see _say_where
    level = notes.level
    notes.setLevel(logging.WARNING)
    try:
        endpoint = settings.endpoint_url or configured_endpoint("dynamodb", settings.region)
        if endpoint is not None and not _is_aws(endpoint):
            return None  # an emulator's (DynamoDB Local, Alternator): today's behaviour
        endpoint = endpoint or endpoint_of("dynamodb", settings.region)
    finally:
        notes.setLevel(level)
    return (
        f"AWS's DynamoDB ({endpoint}) with no sign-in configured would let anyone write:"
        " set GRAPH_API_JWKS_URL (or GRAPH_API_JWT_SECRET) with GRAPH_API_JWT_ISSUER and"
        " GRAPH_API_JWT_AUDIENCE, or GRAPH_API_OPEN_WRITES=true if open writes are meant"
        " (for the embedded demo: GRAPH_API_BACKEND=embedded, as `make run` does)"
    )


def _is_aws(endpoint: str) -> bool:
    """Whether an endpoint URL is AWS's own (a regional, FIPS or VPC endpoint of it)."""
    host = (urlsplit(endpoint).hostname or "").lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


def announce(settings: Settings) -> None:
    """What an operator should see in the log when a server starts, one line each."""
    if settings.backend == "embedded":
        log.info("embedded backend: moto with %d demo students", settings.demo_students)
    else:
        log.info("remote backend: table %s (the server writes nothing by itself)", settings.table)
    if settings.cursor_secret_file:
        log.info(
            "cursors: development secret kept in %s (survives restarts; set"
            " GRAPH_API_CURSOR_SECRET when hosting)",
            settings.cursor_secret_file,
        )
    elif not settings.cursor_secret_configured:
        log.warning(
            "GRAPH_API_CURSOR_SECRET is not set: cursors break across processes and restarts"
        )
    auth = bool(settings.jwks_url or settings.jwt_secret)
    if auth:
        reads = "reads too" if settings.auth_reads else "reads are public"
        log.info("auth: mutations need a bearer token from %s; %s", settings.jwt_issuer, reads)
    elif settings.backend == "embedded":
        without = (
            "anyone may write without one (GRAPH_API_OPEN_WRITES=true)"
            if settings.open_writes
            else "without one, public fields only and no writes"
        )
        log.info(
            "auth: dev tokens; pick a role in GraphiQL, or send 'Authorization: Bearer' with"
            " the last line of `graph-api token --role teacher --id tch-001` (or admin,"
            " student, guardian); %s",
            without,
        )
    else:
        why = " (GRAPH_API_OPEN_WRITES=true)" if settings.open_writes else ""
        log.warning("auth: none configured, anyone may write%s (set GRAPH_API_JWKS_URL)", why)
    if settings.public_personal_data:
        log_public = log.info if settings.backend == "embedded" else log.warning
        log_public(
            "personal data: students' emails and streets are served to anyone"
            " (GRAPH_API_PUBLIC_PERSONAL_DATA=true)"
        )
    elif auth or settings.backend == "embedded":
        log.info("personal data: emails and streets only for callers the policy lets read them")
    else:
        log.info("personal data: emails and streets are served to nobody (no auth configured)")
    if settings.cors_origin_regex:
        log.info("CORS: pages on localhost and 127.0.0.1, any port, may call the API")
    elif settings.cors_origins:
        log.info("CORS: pages on %s may call the API", settings.cors_origins)
    else:
        log.info("CORS: no other origin's page may call the API (GRAPH_API_CORS_ORIGINS)")


# A request allocates tens of thousands of short-lived objects (GraphQL results, items); with
# the default threshold (700) the collector ran dozens of times a request and a full
# collection walked every module object (what raising it gains: bench/README.md). The
# long-lived objects of startup are frozen out of the collector's walks.
GC_THRESHOLDS = (50_000, 50, 100)


def services_for(settings: Settings) -> Services:
    """The process's services, with logging set up and the startup notes logged."""
    logs.configure(settings.log_level, settings.log_format)
    announce(settings)
    services = Services.create(settings)
    tune_collector()
    return services


def tune_collector() -> None:
    """Once a server process has built its services: see GC_THRESHOLDS."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()


# A request's head (request line and headers) may take this many bytes: the h11
# implementation refuses a longer one (400) as soon as it has read that much, and closes the
# connection unread (uvicorn's `h11_max_incomplete_event_size`, h11's and Node's default).
# httptools, uvicorn's choice when installed, has no bound: a 67 MB header was read whole.
MAX_HEAD_BYTES = 16_384
# The variable that names the proxies whose X-Forwarded-For and X-Forwarded-Proto count
# (uvicorn's, which its command line reads too): addresses or networks, comma-separated.
FORWARDED_ALLOW_IPS = "FORWARDED_ALLOW_IPS"


def uvicorn_limits(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """uvicorn's options that match the app's bounds (the Dockerfile sets the same as
    UVICORN_* variables and FORWARDED_ALLOW_IPS):

    - a websocket message over GRAPH_API_MAX_BODY_BYTES is refused (1009) from its frame's
      header, before uvicorn reads and buffers it (the app refuses it too, under any
      server: `http.websocket.MessageTooBig`);
    - a request's head over MAX_HEAD_BYTES is refused before it is read on (h11);
    - forwarded addresses count only from the proxies FORWARDED_ALLOW_IPS names: none
      unless set (uvicorn trusts loopback by default, so a forged X-Forwarded-For from a
      process on the host got a fresh address, and fresh subscription slots, each time).
    """
    env = os.environ if environ is None else environ
    return {
        "ws_max_size": settings.max_body_bytes,
        "http": "h11",
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
        "forwarded_allow_ips": env.get(FORWARDED_ALLOW_IPS, ""),
    }


def create_app_from_env() -> Starlette:
    """The uvicorn factory (`uvicorn --factory graph_api.http.hosting:create_app_from_env`).

    Each worker process calls it once; its services live as long as the worker.
    """
    return create_app(services_for(remote_settings()))


# `graph-api serve --workers N`: the parent resolved its settings (the embedded DynamoDB's
# endpoint, the cursor secret, --host and --port) and hands them to its workers, which uvicorn
# starts as fresh interpreters, in this variable. Every worker so signs and reads cursors
# with the same secret, and reaches the same DynamoDB.
WORKER_SETTINGS = "GRAPH_API_WORKER_SETTINGS"


def settings_for_workers(settings: Settings) -> str:
    """`settings` as the value of WORKER_SETTINGS."""
    fields = dataclasses.asdict(settings)
    fields["cursor_secret"] = settings.cursor_secret.hex()
    return json.dumps(fields)


def settings_from_parent(raw: str) -> Settings:
    fields = json.loads(raw)
    fields["cursor_secret"] = bytes.fromhex(fields["cursor_secret"])
    return Settings(**fields)


def create_worker_app() -> Starlette:
    """The uvicorn factory of `graph-api serve --workers N`: one worker's app, built from the
    parent's settings. The parent logs the startup notes, once; a worker only its requests."""
    settings = settings_from_parent(os.environ[WORKER_SETTINGS])
    logs.configure(settings.log_level, settings.log_format)
    services = Services.create(settings)
    tune_collector()
    return create_app(services)


def serve(settings: Settings, workers: int, started: Callable[[], None]) -> None:
    """`graph-api serve`'s server, until uvicorn stops: the app in this process, or in
    `workers` worker processes built from these settings (`create_worker_app`). `started`
    is called once everything is ready and uvicorn is about to listen (the banner)."""
    import uvicorn  # the server's own dependency: the Lambda handler never imports it

    if workers > 1:
        # Each worker is a fresh interpreter that builds its own services from this
        # process's settings (create_worker_app), so all share the cursor secret and the
        # DynamoDB. uvicorn's supervisor takes SIGINT and SIGTERM from here on: it stops
        # the workers and returns, and the caller's cleanup runs.
        settings = dataclasses.replace(settings, workers=workers)
        os.environ[WORKER_SETTINGS] = settings_for_workers(settings)
        # /metrics sums every worker's values (prometheus_client's multiprocess mode), kept
        # in a directory of their own, empty at start, unless the operator named one.
        made_metrics_dir = None
        if settings.metrics and not os.environ.get(MULTIPROCESS_DIR):
            made_metrics_dir = tempfile.mkdtemp(prefix="graph-api-metrics-")
            os.environ[MULTIPROCESS_DIR] = made_metrics_dir
        started()
        try:
            uvicorn.run(
                "graph_api.http.hosting:create_worker_app",
                factory=True,
                workers=workers,
                host=settings.host,
                port=settings.port,
                log_level=settings.log_level.lower(),
                log_config=None,
                # uvicorn kills a worker that has not answered its health check in this
                # time: one still importing on a busy host would be killed over and over.
                timeout_worker_healthcheck=math.ceil(settings.worker_healthcheck_seconds),
                **uvicorn_limits(settings),
            )
        finally:
            if made_metrics_dir is not None:
                shutil.rmtree(made_metrics_dir, ignore_errors=True)
        return
    services = Services.create(settings)
    tune_collector()
    started()
    try:
        uvicorn.run(
            create_app(services),
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            log_config=None,  # keep the logging that logs.configure set up
            **uvicorn_limits(settings),
        )
    finally:
        services.close()
