"""What an operation cost: `extensions.dynamodb` on every response (DynamoDB requests and
capacity), and, when telemetry is on, its duration and its span (`Observed`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from graph_api import telemetry
from graph_api.graph.engine.context import Context
from graph_api.graph.masking import code_of


class DynamoDBAccounting(SchemaExtension):
    def get_results(self) -> dict[str, Any]:
        context = self.execution_context.context
        if not isinstance(context, Context) or not context.services.settings.accounting:
            return {}
        return {"dynamodb": context.ledger.summary()}


class CopiesPending(SchemaExtension):
    """`extensions.copiesPending` when a mutation saved a node whose copies DynamoDB stopped
    taking (`Table.unfinished`): the payload answers the node as saved, and this says which
    nodes' copies its to-dos will finish (`writes/finisher.py`). Sending it again is not
    needed."""

    def get_results(self) -> dict[str, Any]:
        context = self.execution_context.context
        if not isinstance(context, Context) or not context.table.unfinished:
            return {}
        return {"copiesPending": {"nodes": list(context.table.unfinished), "message": PENDING}}


PENDING = (
    "saved, but not all of its copies yet: DynamoDB stopped taking them; they are finished"
    " once it answers again (no need to send the mutation again)"
)


class Observed(SchemaExtension):
    """A query's or mutation's duration by type and outcome (metrics), and its SERVER span
    (tracing), current while it executes so that its DynamoDB calls are its children.
    Subscriptions are not requests: their events' errors are counted, not their lifetime.
    Only in the schema when telemetry may be on (`build_schema`)."""

    _span: Any = None
    _started_ns = 0

    def on_operation(self) -> Iterator[None]:
        started, self._started_ns = time.perf_counter(), time.time_ns()
        try:
            yield
        finally:  # an extension's exception (a syntax error found by the parser cache) too
            self._record(started)

    def _record(self, started: float) -> None:
        kind, name = self._operation()
        if kind == OperationType.SUBSCRIPTION.value:
            return
        context = self.execution_context
        errors: list[GraphQLError] | None = context.pre_execution_errors
        data = None
        if context.result is not None:
            errors, data = context.result.errors, context.result.data
        failed = data is None and (bool(errors) or context.result is None)
        outcome = "error" if failed else "partial" if errors else "ok"
        if telemetry.metrics is not None:
            telemetry.metrics.operation(kind or "unknown", outcome, time.perf_counter() - started)
        if telemetry.tracing is not None:
            code = (code_of(errors[0]) if errors else "INTERNAL_SERVER_ERROR") if failed else None
            telemetry.tracing.record_operation(
                self._span, kind, name, self._started_ns, code, self._trace_headers()
            )

    def on_execute(self) -> Iterator[None]:
        tracing = telemetry.tracing
        kind, name = self._operation() if tracing is not None else (None, None)
        if tracing is None or kind == OperationType.SUBSCRIPTION.value:
            yield
            return
        # Started when the operation was (its parsing and validation are in its time).
        self._span, token = tracing.start_operation(
            kind, name, self._started_ns, self._trace_headers()
        )
        try:
            yield
        finally:
            tracing.detach(token)

    def _trace_headers(self) -> dict[str, str] | None:
        context = self.execution_context.context
        return context.trace_headers if isinstance(context, Context) else None

    def _operation(self) -> tuple[str | None, str | None]:
        """The operation's type and name, once its document parsed (None before)."""
        context = self.execution_context
        if context.graphql_document is None:
            return None, None
        try:
            return context.operation_type.value, context.operation_name
        except Exception:  # the name asked for matches no operation: a request error
            return None, context.operation_name
