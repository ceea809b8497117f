"""OpenTelemetry traces: one SERVER span per GraphQL query or mutation, and a CLIENT span
under it for each DynamoDB call it makes, following the semantic conventions for GraphQL
servers and for DynamoDB clients.

Configured by the SDK's own variables: `OTEL_TRACES_EXPORTER` (otlp, the default, console or
none), `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (OTLP over HTTP
with protobuf), `OTEL_SERVICE_NAME` (graph-api unless set), `OTEL_TRACES_SAMPLER`, and the
batch processor's `OTEL_BSP_*`. The document itself (`graphql.document`) is not recorded: it
holds the client's literal values (ids, emails), and its size is only bounded by the body cap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from graph_api import __version__
from graph_api.settings import SettingsError

UNKNOWN_OPERATION = "GraphQL Operation"  # the conventions' span name when the type is unknown
TRACE_HEADERS = ("traceparent", "tracestate")
_ITEM_ACTIONS = ("Put", "Update", "Delete", "ConditionCheck", "Get")


def exporters(environ: Mapping[str, str]) -> list[SpanExporter]:
    names = [n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    chosen: list[SpanExporter] = []
    for name in names:
        if name == "otlp":
            protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
                "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
            )
            if protocol != "http/protobuf":
                raise SettingsError(
                    f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: this server exports traces over"
                    " http/protobuf only (an OpenTelemetry Collector takes both)"
                )
            chosen.append(OTLPSpanExporter())  # reads the endpoint and headers itself
        elif name == "console":
            chosen.append(ConsoleSpanExporter())
        elif name not in ("none", ""):
            raise SettingsError(f"OTEL_TRACES_EXPORTER: {name} is not otlp, console or none")
    return chosen


class Tracing:
    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("graph_api", __version__)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Tracing:
        env = os.environ if environ is None else environ
        # Resource.create adds OTEL_RESOURCE_ATTRIBUTES; the sampler comes from OTEL_TRACES_SAMPLER.
        resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "graph-api"})
        provider = TracerProvider(resource=resource)
        for exporter in exporters(env):
            provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider)

    def shutdown(self) -> None:
        self.provider.shutdown()

    # -- the operation's span -------------------------------------------------------------

    @staticmethod
    def trace_headers(headers: Mapping[str, str]) -> dict[str, str]:
        """What a request's headers say of its caller's trace (W3C Trace Context)."""
        return {name: value for name in TRACE_HEADERS if (value := headers.get(name))}

    def start_operation(
        self,
        operation_type: str | None,
        name: str | None,
        started_ns: int,
        trace_headers: Mapping[str, str] | None = None,
    ) -> tuple[Span, object]:
        """The operation's SERVER span, the caller's child if its headers name a trace, made
        current (its DynamoDB calls become its children) until `detach` is given the token
        returned with it."""
        span = self.tracer.start_span(
            operation_type or UNKNOWN_OPERATION,
            context=propagate.extract(trace_headers) if trace_headers else None,
            kind=SpanKind.SERVER,
            start_time=started_ns,
            attributes=_operation_attributes(operation_type, name),
        )
        return span, otel_context.attach(trace.set_span_in_context(span))

    @staticmethod
    def detach(token: object) -> None:
        otel_context.detach(token)  # type: ignore[arg-type]

    def record_operation(
        self,
        span: Span | None,
        operation_type: str | None,
        name: str | None,
        started_ns: int,
        error_code: str | None,
        trace_headers: Mapping[str, str] | None = None,
    ) -> None:
        """End the operation's span (made now if it never executed: it failed to parse or
        validate); `error_code` marks an operation that produced no data."""
        if span is None:
            span, token = self.start_operation(operation_type, name, started_ns, trace_headers)
            self.detach(token)
        if error_code is not None:
            span.set_attribute("error.type", error_code)
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    # -- DynamoDB's spans -----------------------------------------------------------------

    def start_call(
        self, service: str, operation: str, params: Mapping[str, Any], region: str
    ) -> Span | None:
        """A CLIENT span for one DynamoDB call, or None outside an operation's span (the
        change stream reader's polls, the command line): those would be traces of one span."""
        if not trace.get_current_span().is_recording():
            return None
        attributes: dict[str, Any] = {
            "db.system.name": "aws.dynamodb",
            "db.operation.name": operation,
            "rpc.system": "aws-api",
            "rpc.service": service,
            "rpc.method": operation,
            "cloud.region": region,
        }
        tables = table_names(params)
        if tables:
            attributes["aws.dynamodb.table_names"] = tables
        return self.tracer.start_span(
            f"{service.replace(' ', '')}.{operation}", kind=SpanKind.CLIENT, attributes=attributes
        )

    @staticmethod
    def end_call(span: Span, answer: Mapping[str, Any] | None, error: BaseException | None) -> None:
        if answer is not None:
            consumed = answer.get("ConsumedCapacity")
            if consumed:
                entries = consumed if isinstance(consumed, list) else [consumed]
                span.set_attribute(
                    "aws.dynamodb.consumed_capacity", [json.dumps(entry) for entry in entries]
                )
            request_id = (answer.get("ResponseMetadata") or {}).get("RequestId")
            if request_id:
                span.set_attribute("aws.request_id", request_id)
        if error is not None:
            cause = error.__cause__ or error
            response = getattr(cause, "response", None)
            code = (response or {}).get("Error", {}).get("Code") if response else None
            span.set_attribute("error.type", code or type(cause).__name__)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end()

    # -- the logs -------------------------------------------------------------------------

    @staticmethod
    def current_ids() -> tuple[str, str] | None:
        """The current span's trace and span ids, as W3C traceparent writes them."""
        span_context = trace.get_current_span().get_span_context()
        if not span_context.is_valid:
            return None
        return format(span_context.trace_id, "032x"), format(span_context.span_id, "016x")


def _operation_attributes(operation_type: str | None, name: str | None) -> dict[str, str]:
    attributes = {}
    if operation_type:
        attributes["graphql.operation.type"] = operation_type
    if name:
        attributes["graphql.operation.name"] = name
    return attributes


def table_names(params: Mapping[str, Any]) -> list[str]:
    """The tables a call names: its TableName, RequestItems' keys, or its transaction's."""
    if "TableName" in params:
        return [str(params["TableName"])]
    if "RequestItems" in params:
        return sorted(params["RequestItems"])
    names = {
        action[kind]["TableName"]
        for action in params.get("TransactItems", ())
        for kind in _ITEM_ACTIONS
        if kind in action
    }
    return sorted(names)
