"""OpenTelemetry traces, as a collector receives them: an OTLP/HTTP receiver on localhost
decodes what the SDK's exporter sends (README, "Observability").

One SERVER span per operation, named by its type, with the GraphQL conventions' attributes;
under it a CLIENT span per DynamoDB call, with the DynamoDB conventions'; nothing per
resolver. With tracing off, the Lambda handler imports neither library.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from starlette.testclient import TestClient
from support import CREATE_TEACHER, QuietHandler, fresh_services

from graph_api import logs, telemetry
from graph_api.http.app import create_app


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP traces endpoint: `POST /v1/traces`, protobuf, as a collector takes it."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[Span] = []
        self.paths: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(QuietHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.server.paths.append(self.path)
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                self.server.spans.extend(scope_spans.spans)
        self.reply(ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
    try:
        yield server
    finally:
        telemetry.disable_tracing()
        server.shutdown()
        server.server_close()


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def attributes(span: Span) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in span.attributes}


CALLER_TRACE, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
ADD = "mutation AddAda($id: ID!, $name: String!) {" + CREATE_TEACHER.split("{", 1)[1]
FIND = 'query FindAda { teacher(id: "t1") { name classes(first: 5) { edges { node { id } } } } }'


def test_spans_reach_an_otlp_receiver_with_the_conventions_names_and_attributes(
    endpoint: str, receiver: Receiver
) -> None:
    with fresh_services(endpoint, tracing=True) as services:
        table = services.settings.table
        client = TestClient(create_app(services))
        added = client.post(
            "/graphql", json={"query": ADD, "variables": {"id": "t1", "name": "Ada"}}
        )
        assert "errors" not in added.json()
        # A caller that traces too: its trace goes on in ours.
        caller = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
        found = client.post("/graphql", json={"query": FIND}, headers=caller)
        assert found.json()["data"]["teacher"]
        refused = client.post("/graphql", json={"query": "{ nosuchfield }"}).json()
        code = refused["errors"][0]["extensions"]["code"]
        # Logged inside an operation's span: the JSON log names its trace.
        tracing = telemetry.tracing
        assert tracing is not None
        span, token = tracing.start_operation("query", "Logged", time.time_ns())
        record = logging.LogRecord("graph_api", logging.INFO, __file__, 1, "hello", None, None)
        logs.RequestIdFilter().filter(record)
        logged = json.loads(logs.JsonFormatter().format(record))
        tracing.detach(token)
        span.end()
        assert logged["trace_id"] == format(span.get_span_context().trace_id, "032x")
        telemetry.disable_tracing()  # exports what is pending

    assert set(receiver.paths) == {"/v1/traces"}
    servers = [s for s in receiver.spans if s.kind == Span.SPAN_KIND_SERVER]
    clients = [s for s in receiver.spans if s.kind == Span.SPAN_KIND_CLIENT]
    assert len(servers) + len(clients) == len(receiver.spans)  # nothing per resolver
    by_type = {attributes(s).get("graphql.operation.name", "refused"): s for s in servers}
    # The three operations, and the span the log line was written in.
    assert sorted(by_type) == ["AddAda", "FindAda", "Logged", "refused"]
    assert len(servers) == 4

    mutation, query, refusal = by_type["AddAda"], by_type["FindAda"], by_type["refused"]
    assert mutation.name == "mutation"
    assert attributes(mutation) == {
        "graphql.operation.type": "mutation",
        "graphql.operation.name": "AddAda",
    }
    assert (query.name, attributes(query)["graphql.operation.type"]) == ("query", "query")
    assert (query.trace_id.hex(), query.parent_span_id.hex()) == (CALLER_TRACE, CALLER_SPAN)
    assert mutation.trace_id.hex() != CALLER_TRACE and not mutation.parent_span_id
    assert (refusal.name, refusal.status.code) == ("query", Status.STATUS_CODE_ERROR)
    assert attributes(refusal)["error.type"] == code
    assert mutation.status.code != Status.STATUS_CODE_ERROR

    for operation in (mutation, query):
        children = [s for s in clients if s.parent_span_id == operation.span_id]
        assert children, operation.name
        for child in children:
            assert child.trace_id == operation.trace_id
            assert operation.start_time_unix_nano <= child.start_time_unix_nano
            assert child.end_time_unix_nano <= operation.end_time_unix_nano
            found = attributes(child)
            assert child.name == f"DynamoDB.{found['rpc.method']}"
            assert found["db.system.name"] == "aws.dynamodb"
            assert found["db.operation.name"] == found["rpc.method"]
            assert found["rpc.system"] == "aws-api"
            assert found["aws.dynamodb.table_names"] == [table]
            if operation is query:  # what each read consumed, as DynamoDB reported it
                consumed = json.loads(found["aws.dynamodb.consumed_capacity"][0])
                assert consumed["CapacityUnits"] > 0
    written = {attributes(s)["rpc.method"] for s in clients if s.parent_span_id == mutation.span_id}
    assert "TransactWriteItems" in written
    # Every DynamoDB call belongs to an operation: no orphan traces of one span.
    assert {s.parent_span_id for s in clients} <= {s.span_id for s in servers}


def test_with_tracing_off_the_lambda_handler_imports_no_telemetry_library() -> None:
    # What graph_api/telemetry would import (redis-py looks for OpenTelemetry's metrics SDK
    # on its own, at its import: not ours to measure here).
    ours = ("prometheus_client", "opentelemetry.sdk.trace", "opentelemetry.exporter")
    script = (
        "import sys, graph_api.http.lambda_handler as h; h._default();"
        f" print(sorted(m for m in sys.modules if m.startswith({ours!r})))"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "AWS_LAMBDA_FUNCTION_NAME": "graph-api",
        "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:9",
        "AWS_REGION": "us-east-1",
        "GRAPH_API_CURSOR_SECRET": "x" * 32,
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
