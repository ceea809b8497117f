"""Logging: one JSON object a line in production, readable text in development.

Every record carries the id of the request it was logged for (`request_id`), set by the
HTTP middleware, so a masked INTERNAL_SERVER_ERROR can be found in the log by its id; and,
when tracing is on, the trace and span it was logged in (`trace_id`, `span_id`).
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import Any

from graph_api import telemetry
from graph_api.settings import Settings, SettingsError

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "graph_api_request_id", default=None
)


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get() or "-"  # read by the formatters
        tracing = telemetry.tracing
        ids = tracing.current_ids() if tracing is not None else None
        if ids is not None:
            record.trace_id, record.span_id = ids
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if (rid := getattr(record, "request_id", "-")) != "-":
            entry["request_id"] = rid
        if trace_id := getattr(record, "trace_id", None):
            entry["trace_id"], entry["span_id"] = trace_id, getattr(record, "span_id", "")
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


TEXT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at the time (test runners swap it), unless
    given a stream of its own with `setStream`."""

    def __init__(self) -> None:
        super().__init__()
        self._chosen: Any = None  # forget the stderr of the moment __init__ stored

    @property
    def stream(self) -> Any:
        return sys.stderr if self._chosen is None else self._chosen

    @stream.setter
    def stream(self, value: Any) -> None:
        self._chosen = value


def handler(fmt: str) -> logging.Handler:
    """The one handler every record goes through: stderr, in `fmt` ("json" or "text")."""
    made = StderrHandler()
    made.addFilter(RequestIdFilter())
    made.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT))
    return made


def handler_from_env() -> logging.Handler:
    """The image's uvicorn supervisor's handler (`deploy/uvicorn-logging.json`, its
    `--log-config`): the parent process never builds the app, so without it its own lines
    ("Started parent process") came in uvicorn's text among the workers' JSON. The format is
    the workers' (GRAPH_API_LOG_FORMAT; JSON on a remote table); settings a worker will
    refuse give JSON here, and the worker's refusal says what is wrong."""
    try:
        fmt = Settings.from_env().log_format
    except SettingsError:
        fmt = "json"
    return handler(fmt)


def configure(level: str, fmt: str) -> None:
    """Route every logger (ours, uvicorn's, botocore's) through one handler on stderr."""
    root = logging.getLogger()
    root.handlers = [handler(fmt)]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers = []
        logging.getLogger(name).propagate = True
    # botocore's INFO are notes of where it found an endpoint and credentials, once per
    # client (seven lines at start): for DEBUG only; its warnings and errors stay.
    for name in NOTE_TAKERS:
        logging.getLogger(name).setLevel(logging.WARNING if level == "INFO" else logging.NOTSET)


NOTE_TAKERS = ("botocore", "aiobotocore")
