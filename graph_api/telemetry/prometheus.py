"""The process's Prometheus instruments, and `/metrics`' text.

Names are in base units (`_seconds`, capacity units) with `_total` on counters; labels
take a handful of values each (an operation type, an outcome, an error code, a DynamoDB
operation, a retry's reason), never an id or an operation's text.

Several worker processes (`graph-api serve --workers N`, uvicorn's own `--workers`) each
count their own requests. With `PROMETHEUS_MULTIPROC_DIR` set (to an empty directory, before
the workers start: `serve` makes one itself) every worker writes its values there and any
worker's `/metrics` reports the sum of all of them, prometheus_client's multiprocess mode.
Without it, a scrape reads the worker that happened to take the connection.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)

from graph_api.telemetry import MULTIPROCESS_DIR

log = logging.getLogger(__name__)

# Operations take milliseconds (a cached query) to seconds (a rename; the deadline is 10 s).
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.operations = Histogram(
            "graph_api_graphql_request_duration_seconds",
            "GraphQL queries and mutations, from parsing to the result: by operation type"
            " (unknown when the document did not parse) and outcome (ok; partial: data with"
            " errors; error: no data)",
            ["operation_type", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.errors = Counter(
            "graph_api_graphql_errors_total",
            "GraphQL errors sent to clients, by extensions.code",
            ["code"],
            registry=registry,
        )
        self.dynamodb_requests = Counter(
            "graph_api_dynamodb_requests_total",
            "Requests sent to DynamoDB (and DynamoDB Streams), by operation",
            ["operation"],
            registry=registry,
        )
        self.dynamodb_throttles = Counter(
            "graph_api_dynamodb_throttles_total",
            "DynamoDB requests refused as throttled, by operation",
            ["operation"],
            registry=registry,
        )
        self.dynamodb_capacity = Counter(
            "graph_api_dynamodb_consumed_capacity_total",
            "DynamoDB capacity units consumed, by operation",
            ["operation"],
            registry=registry,
        )
        self.dynamodb_retries = Counter(
            "graph_api_dynamodb_retries_total",
            "DynamoDB requests sent again, by why (throttled, transient, contention, conflict)",
            ["reason"],
            registry=registry,
        )
        self.subscriptions = Gauge(
            "graph_api_subscriptions_open",
            "Subscriptions open on this server",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.events_delivered = Counter(
            "graph_api_subscription_events_delivered_total",
            "Change events queued for a subscriber",
            registry=registry,
        )
        self.events_shed = Counter(
            "graph_api_subscription_events_shed_total",
            "Change events dropped because their subscriber fell behind and was ended",
            registry=registry,
        )

        # Each label set's child, kept: `labels()` takes a lock and builds a key every time
        # (two thirds of a counter's cost).
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)  # the instruments live as long as the process
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # -- what the request path reports ------------------------------------------------

    def operation(self, operation_type: str, outcome: str, seconds: float) -> None:
        self._child(self.operations, operation_type, outcome).observe(seconds)

    def error(self, code: str) -> None:
        self._child(self.errors, code).inc()

    def dynamodb_call(self, operation: str, capacity: float, throttled: bool) -> None:
        self._child(self.dynamodb_requests, operation).inc()
        if capacity:
            self._child(self.dynamodb_capacity, operation).inc(capacity)
        if throttled:
            self._child(self.dynamodb_throttles, operation).inc()

    def retry(self, reason: str) -> None:
        self.dynamodb_retries.labels(reason).inc()

    # -- the scrape ---------------------------------------------------------------------

    @staticmethod
    def exposition() -> tuple[bytes, str]:
        """`/metrics`' body and media type: every worker's values in multiprocess mode."""
        if os.environ.get(MULTIPROCESS_DIR):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(REGISTRY), CONTENT_TYPE_LATEST

    @staticmethod
    def serve(host: str, port: int) -> Callable[[], None] | None:
        """`/metrics` (any path, in fact) on `host:port` of its own, on prometheus_client's
        server in a daemon thread; the function that stops it. None when the port is taken:
        with several workers the first one to bind serves every worker's values (in
        multiprocess mode) and the others leave it to that one."""
        registry: CollectorRegistry = REGISTRY
        if os.environ.get(MULTIPROCESS_DIR):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        try:
            server, thread = start_http_server(port, host, registry)
        except OSError as error:
            log.info("metrics: %s:%d not served by this process (%s)", host, port, error)
            return None
        log.info("metrics: GET http://%s:%d/metrics", host, port)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

        return stop

    @staticmethod
    def process_exited(pid: int | None = None) -> None:
        """A worker stops: its share of the gauges leaves the sum (multiprocess mode)."""
        if os.environ.get(MULTIPROCESS_DIR):
            multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]


# One set of instruments per process: prometheus_client refuses a name registered twice.
METRICS = Metrics(REGISTRY)
