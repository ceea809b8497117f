"""The rate limit's gate (`graph/budgets.py`): after the static cost (`cost.CostLimit`,
which leaves the requested cost on the context) and before execution, so a refused
operation reads nothing from DynamoDB.

A query or mutation takes its requested cost from its caller's bucket up front; once it ran,
what it did not use goes back: it used the DynamoDB requests it sent plus the capacity units
they consumed (`extensions.dynamodb`), never more than it asked for. A refusal is a request
error, RATE_LIMITED, with `retryAfter` (HTTP: 429 and `Retry-After`). Every answer carries
the bucket in `extensions.cost.throttleStatus` and, over HTTP, the RateLimit header fields.

A subscription takes nothing to start: each event it is sent takes its requested cost
(`spend_event`); when the bucket cannot pay, the subscription ends with RATE_LIMITED.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

from graphql import GraphQLError
from starlette.responses import Response
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api.errors import RateLimited
from graph_api.graph.budgets import Throttle, describe
from graph_api.graph.context import Context
from graph_api.graph.policy import Budget

RATE_LIMITED = RateLimited.code
TOO_MANY_REQUESTS = 429


def used(context: Context, spent: int) -> int:
    """What an operation used, in points: its DynamoDB requests and capacity units."""
    ledger = context.ledger
    return min(spent, ledger.requests + math.ceil(ledger.capacity))


class _RateLimit(SchemaExtension):
    """What the two gates share: who pays, how much, and how the answer says it."""

    throttle: Throttle | None = None

    def _payer(self) -> tuple[Context, Budget, int] | None:
        """The context and the points to take, or None: nothing to take here (no rate
        limit, refused already, a subscription: its events pay)."""
        execution = self.execution_context
        context = execution.context
        if (
            not isinstance(context, Context)
            or context.services.limiter is None
            or context.requested_cost is None
            or execution.result is not None
            or execution.operation_type == OperationType.SUBSCRIPTION
        ):
            return None
        budget = context.services.limiter.budget(context.auth.caller)
        return context, budget, min(context.requested_cost, budget.maximum)

    def _refuse(self, context: Context, throttle: Throttle) -> None:
        error = GraphQLError(
            describe(throttle),
            extensions={"code": RATE_LIMITED, "retryAfter": throttle.seconds()},
        )
        self.execution_context.result = ExecutionResult(data=None, errors=[error])
        if isinstance(context.response, Response):
            context.response.status_code = TOO_MANY_REQUESTS

    def _answer(self, context: Context, throttle: Throttle) -> None:
        self.throttle = context.throttle = throttle
        if isinstance(context.response, Response):
            context.response.headers.update(throttle.headers())


class LocalRateLimit(_RateLimit):
    """The gate on the process's buckets: no await, one dict lookup each way."""

    def on_execute(self) -> Iterator[None]:
        payer = self._payer()
        if payer is None:
            yield
            return
        context, budget, spent = payer
        limiter = context.services.limiter
        assert limiter is not None
        holder = context.holder
        throttle = limiter.local.take(holder, budget, spent)
        if throttle.retry_after:
            self._refuse(context, throttle)
            self._answer(context, throttle)
            yield
            return
        try:
            yield
        finally:
            refund = spent - used(context, spent)
            if refund:
                throttle = limiter.local.take(holder, budget, -refund)
            self._answer(context, throttle)


class SharedRateLimit(_RateLimit):
    """The gate on Redis's buckets (`budgets.SharedBuckets`), one script call each way."""

    async def on_execute(self) -> AsyncIterator[None]:
        payer = self._payer()
        if payer is None:
            yield
            return
        context, budget, spent = payer
        limiter = context.services.limiter
        assert limiter is not None and limiter.shared is not None
        holder = context.holder
        throttle = await limiter.shared.take(holder, budget, spent)
        if throttle.retry_after:
            self._refuse(context, throttle)
            self._answer(context, throttle)
            yield
            return
        try:
            yield
        finally:
            refund = spent - used(context, spent)
            if refund:
                throttle = await limiter.shared.take(holder, budget, -refund)
            self._answer(context, throttle)


def spend_event(context: Context) -> None:
    """A subscription's event takes its requested cost from the caller's bucket in this
    process (with Redis too: the subscription lives here, and an await per event would let
    a connection's events overtake each other); raises RateLimited when the bucket cannot
    pay (the subscription ends with it)."""
    limiter = context.services.limiter
    if limiter is None or context.requested_cost is None:
        return
    budget = limiter.budget(context.auth.caller)
    cost = min(context.requested_cost, budget.maximum)
    throttle = limiter.local.take(context.holder, budget, cost)
    context.throttle = throttle
    if throttle.retry_after:
        raise RateLimited(describe(throttle), retryAfter=throttle.seconds())


def throttle_status(context: Any) -> dict[str, int] | None:
    """The bucket's state for `extensions.cost`, once a gate or an event spent."""
    throttle = context.throttle if isinstance(context, Context) else None
    return throttle.status() if throttle is not None else None
