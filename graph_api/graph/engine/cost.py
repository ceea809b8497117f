"""A static cost limit, computed from the document before anything is sent to DynamoDB.

GitHub's rule: a connection costs its `first` (or `last`) times the number of parents it may
run for, so `students(ids: [100 ids]) { classes(first: 100) { students(first: 100) } }` costs
100 + 100·100 + 100·100·100 and is refused before its first request. `students(ids)`
counts its ids; a root field returning one node counts 1. The figure is reported in
`extensions.cost = {requested, limit}` on every response.

The cost is the operation's plan's (`graph/engine/plan/`): the limit makes the plan, once
validated, puts it on the request's context for every other layer, and reads its cost. The
document's one walk compiles the formula (`plan.walk.Formula`), in time linear in the
document however its fragments spread each other; a plan is kept for the variables that
change it, so request after request an operation is priced by one look-up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api.errors import QueryTooCostly
from graph_api.graph.engine.context import Context
from graph_api.graph.engine.plan import operation
from graph_api.graph.engine.throttle import gate, shared_gate, throttle_status
from graph_api.internals.strawberry import graphql_schema

QUERY_TOO_COSTLY = QueryTooCostly.code


class CostLimit(SchemaExtension):
    """Makes the operation's plan and puts it on the request's context (`Context.plan`,
    which every resolver reads); refuses the operation when its static cost passes `limit`,
    before it executes; then runs the rate limit's gate (`graph/engine/throttle.py`) for that
    cost, in the same hook."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.requested: int | None = None

    def on_execute(self) -> Iterator[None]:
        self.price()
        # The rate limit's gate rides this hook: an extension of its own costs every request.
        yield from gate(self.execution_context, self.requested)

    def price(self) -> None:
        """The operation's plan, left on the context; over `limit`, a refusal."""
        context = self.execution_context
        document = context.graphql_document
        if document is not None:
            plan = operation.plan_for(
                graphql_schema(context.schema), document, context.operation_name, context.variables
            )
            # No plan: no single operation, or bad variables, which execution reports.
            self.requested = plan.cost.requested if plan is not None else 0
            if isinstance(context.context, Context):  # every layer reads it (`graph/engine/plan/`)
                context.context.plan = plan
            if self.requested > self.limit and context.result is None:
                message = (
                    f"This query may cost {self.requested}, over the limit of"
                    f" {self.limit}: ask for fewer items (first, ids) or nest less."
                )
                cost = {"requested": self.requested, "limit": self.limit}
                if context.operation_type == OperationType.SUBSCRIPTION:
                    # Strawberry subscribes whatever result is set here (a subscription's
                    # cost is each event's): raised, the error ends it before it starts.
                    raise QueryTooCostly(message, cost=cost)
                # A result set before execution makes Strawberry skip executing.
                context.result = ExecutionResult(
                    data=None,
                    errors=[
                        GraphQLError(message, extensions={"code": QUERY_TOO_COSTLY, "cost": cost})
                    ],
                )

    def get_results(self) -> dict[str, Any]:
        if self.requested is None:
            return {}
        cost: dict[str, Any] = {"requested": self.requested, "limit": self.limit}
        status = throttle_status(self.execution_context.context)
        if status is not None:
            cost["throttleStatus"] = status
        return {"cost": cost}


class SharedCostLimit(CostLimit):
    """CostLimit with the rate limit's buckets in Redis: its hook awaits them."""

    async def on_execute(self) -> AsyncIterator[None]:  # type: ignore[override]
        self.price()
        async with shared_gate(self.execution_context, self.requested):
            yield
