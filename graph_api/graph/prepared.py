"""Resolvers in two steps: what a field of the document shares, then each parent's value.

A resolver called for every parent of a list (a student's `classes`, 30 times in Q1 of
`make bench`) works out the same things on every call: its arguments' meaning, the request's
context, what the selection under it reads. Marked `prepared_by(prepare)`, the resolver
`(self, info, **arguments)` is `prepare(info, **arguments)(self)`, and the executor
(`graph/execution.py`) calls `prepare` once for the field (its first parent's `info`), then
what it returned for each parent: no resolve info, no arguments, no Strawberry `Info` per
call. Anything else (graphql-core's own path) calls the resolver, which does both each time.

`prepare` may read of `info` only what every parent of the field shares: the context, the
selection, the variables; never the path. When it raises (arguments it refuses), every call
takes the resolver's own path, which raises the same error at each parent's path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

PREPARE = "__graph_prepare__"  # the attribute of the resolver function that holds `prepare`

F = TypeVar("F", bound=Callable[..., Any])


def prepared_by(prepare: Callable[..., Callable[[Any], Any]]) -> Callable[[F], F]:
    """Mark a resolver whose value is `prepare(info, **arguments)(self)`: `prepare` takes the
    resolver's parameters but `self`, by the same names."""

    def mark(resolver: F) -> F:
        setattr(resolver, PREPARE, prepare)
        return resolver

    return mark
