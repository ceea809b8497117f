"""Telemetry: Prometheus metrics (`GET /metrics`) and OpenTelemetry traces, each off until
`enable` turns it on for the process.

The request path asks this module, never the libraries: `metrics` and `tracing` stay None
while off, so a request pays an attribute check and neither library is imported (the Lambda
handler's import stays lean: graph_api.http.lambda_handler).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph_api.settings import Settings
    from graph_api.telemetry.otel import Tracing
    from graph_api.telemetry.prometheus import Metrics

# prometheus_client's multiprocess mode: the directory where every worker keeps its values.
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"

metrics: Metrics | None = None
tracing: Tracing | None = None


def enable(settings: Settings) -> None:
    """Turn on what `settings` ask for, once per process (every `Services` of a process,
    and every request, share the one registry and the one tracer provider)."""
    global metrics, tracing
    if settings.metrics and metrics is None:
        if shared := os.environ.get(MULTIPROCESS_DIR):  # the image names one; make it
            os.makedirs(shared, exist_ok=True)
        from graph_api.telemetry.prometheus import METRICS

        metrics = METRICS
    if settings.tracing and tracing is None:
        from graph_api.telemetry.otel import Tracing

        tracing = Tracing.from_env()


def disable_tracing() -> None:
    """Export what is pending and stop tracing (a test's receiver is about to go away)."""
    global tracing
    if tracing is not None:
        tracing.shutdown()
        tracing = None
