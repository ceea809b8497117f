"""The rate limit's gate (`graph/engine/budgets.py`), inside the cost extension's hook
(`cost.CostLimit`): once an operation is priced and before it executes, so a refused
operation reads nothing from DynamoDB. It is no extension of its own: each costs every
request its instance and its hooks' context managers (bench/README.md).

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
from contextlib import asynccontextmanager
from typing import Any

from graphql import GraphQLError
from starlette.responses import Response
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api.errors import RateLimited
from graph_api.graph.engine.budgets import Throttle, Tier, describe
from graph_api.graph.engine.context import Context
from graph_api.internals.starlette import header_fields

RATE_LIMITED = RateLimited.code
TOO_MANY_REQUESTS = 429


def used(context: Context, spent: int) -> int:
    """What an operation used, in points: its DynamoDB requests and capacity units."""
    ledger = context.ledger
    return min(spent, ledger.requests + math.ceil(ledger.capacity))


def _payer(execution: ExecutionContext, requested: int | None) -> tuple[Context, Tier, int] | None:
    """Who pays and how much, or None: nothing to take here (no rate limit, no document,
    refused already, a subscription: its events pay)."""
    context = execution.context
    if (
        requested is None
        or not isinstance(context, Context)
        or context.services.limiter is None
        or execution.result is not None
        or execution.operation_type is OperationType.SUBSCRIPTION
    ):
        return None
    tier = context.services.limiter.tier(context.auth.caller)
    return context, tier, min(requested, tier.budget.maximum)


def _refuse(execution: ExecutionContext, context: Context, tier: Tier, throttle: Throttle) -> None:
    """A result set before execution makes Strawberry skip executing."""
    error = GraphQLError(
        describe(throttle),
        extensions={"code": RATE_LIMITED, "retryAfter": throttle.seconds()},
    )
    execution.result = ExecutionResult(data=None, errors=[error])
    if isinstance(context.response, Response):
        context.response.status_code = TOO_MANY_REQUESTS
    _answer(context, tier, throttle)


def _answer(context: Context, tier: Tier, throttle: Throttle) -> None:
    context.throttle = throttle
    response = context.response
    if isinstance(response, Response):  # the sub-response: it has none of these yet
        fields = header_fields(response)
        fields.append(tier.policy)
        fields.extend(throttle.fields())


def gate(execution: ExecutionContext, requested: int | None) -> Iterator[None]:
    """Around an operation's execution, on the process's buckets (no await): take
    `requested` (at most the bucket's maximum) or refuse; give back what it did not use."""
    payer = _payer(execution, requested)
    if payer is None:
        yield
        return
    context, tier, spent = payer
    limiter = context.services.limiter
    assert limiter is not None  # _payer checked it
    local = limiter.local
    holder = context.holder
    throttle = local.take(holder, tier.budget, spent)
    if throttle.retry_after:
        _refuse(execution, context, tier, throttle)
        yield
        return
    try:
        yield
    finally:
        refund = spent - used(context, spent)
        if refund:
            throttle = local.take(holder, tier.budget, -refund)
        _answer(context, tier, throttle)


@asynccontextmanager
async def shared_gate(execution: ExecutionContext, requested: int | None) -> AsyncIterator[None]:
    """`gate` on Redis's buckets (`budgets.SharedBuckets`), one script call each way."""
    payer = _payer(execution, requested)
    if payer is None:
        yield
        return
    context, tier, spent = payer
    limiter = context.services.limiter
    assert limiter is not None and limiter.shared is not None  # Redis's settings chose this
    shared = limiter.shared
    holder = context.holder
    throttle = await shared.take(holder, tier.budget, spent)
    if throttle.retry_after:
        _refuse(execution, context, tier, throttle)
        yield
        return
    try:
        yield
    finally:
        refund = spent - used(context, spent)
        if refund:
            throttle = await shared.take(holder, tier.budget, -refund)
        _answer(context, tier, throttle)


def spend_event(context: Context) -> None:
    """A subscription's event takes its requested cost from the caller's bucket in this
    process (with Redis too: the subscription lives here, and an await per event would let
    a connection's events overtake each other); raises RateLimited when the bucket cannot
    pay (the subscription ends with it)."""
    limiter = context.services.limiter
    if limiter is None or context.requested_cost is None:
        return
    budget = limiter.tier(context.auth.caller).budget
    cost = min(context.requested_cost, budget.maximum)
    throttle = limiter.local.take(context.holder, budget, cost)
    context.throttle = throttle
    if throttle.retry_after:
        raise RateLimited(describe(throttle), retryAfter=throttle.seconds())


def throttle_status(context: Any) -> dict[str, int] | None:
    """The bucket's state for `extensions.cost`, once a gate or an event spent."""
    throttle = context.throttle if isinstance(context, Context) else None
    return throttle.status() if throttle is not None else None
