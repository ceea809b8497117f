"""Selection-set plans, shared by the requests of one operation.

`ExecutionContext` (`graph/execution.py`) plans each selection set it runs: its `_Step`s,
what kind each is, how each value completes and, for an object field, the plan of the
selection under it. A request then binds the plan: the functions of `graph.runners`, which
hold the request's execution context. Planning is most of the work before a request's first
DynamoDB call (60-95 µs of the bench queries' 430-1,260 µs in process), and it is the same
work request after request: graphql-core collects the same fields from the same document,
unless a directive on a selection (`@skip`, `@include`, `@defer`) or a fragment's own
variables make what it collects depend on the request. For an operation with neither, the
plan of its root is kept here, and a request binds it without planning again.

Plans are kept by the identity of their schema, operation and root type (`KeptBy`), as
many as Strawberry keeps parsed documents.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)

from graph_api.graph import runners
from graph_api.graph.document import KeptBy
from graph_api.graph.known import KnownObjects


@dataclass(frozen=True, slots=True)
class Plan:
    """A selection set's plan: per field of the type, in response order, its step and how
    a request binds its function (`ExecutionContext._bind`)."""

    parent_type: GraphQLObjectType
    grouped: Any  # the selection set planned, kept alive: its id keys a request's `_runs`
    steps: tuple[Any, ...]  # the `_Step`s
    kinds: tuple[str, ...]  # runners.ITSELF, READ, DIRECT or FIELD
    # A DIRECT step's `runners.direct_call` or `runners.prepared_call`; else None.
    calls: tuple[Callable[..., runners.Run] | None, ...]
    # A READ or DIRECT step that completes an object or a list of objects: the plan of its
    # selection and the objects it admits; else None (`runners.generic`).
    children: tuple[tuple[Plan, KnownObjects] | None, ...]
    factory: runners.Factory  # the selection's function, compiled for its shape


_roots: KeptBy[Plan] = KeptBy()  # by schema, operation and root type
_alike: KeptBy[bool] = KeptBy()  # by operation: whether its collection is the same


def root_plan(
    schema: GraphQLSchema, operation: OperationDefinitionNode, root_type: GraphQLObjectType
) -> Plan | None:
    """The plan kept for this operation's root, if one is."""
    return _roots.get((schema, operation, root_type))


def keep_root_plan(
    schema: GraphQLSchema,
    operation: OperationDefinitionNode,
    fragments: Mapping[str, FragmentDefinitionNode],
    plan: Plan,
) -> None:
    """Keep the root's plan for the operation's next requests, if its collection is the
    same for all of them."""
    if collected_alike(operation, fragments):
        _roots.put((schema, operation, plan.parent_type), plan)


def collected_alike(
    operation: OperationDefinitionNode, fragments: Mapping[str, FragmentDefinitionNode]
) -> bool:
    """Whether graphql-core collects the same fields from this operation for every request:
    no selection of it or of the document's fragments carries a directive (`@skip`,
    `@include` and `@defer` decide what is collected; any other is taken as one of them),
    and no fragment has variables of its own."""
    known = _alike.get((operation,))
    if known is not None:
        return known
    alike = not any(
        definition.directives or definition.variable_definitions
        for definition in fragments.values()
    ) and not any(
        selection.directives
        for root in (operation.selection_set, *(f.selection_set for f in fragments.values()))
        for selection in _selections(root)
    )
    return _alike.put((operation,), alike)


def _selections(selection_set: SelectionSetNode | None) -> Iterator[Any]:
    """Every selection under a selection set (not through fragment spreads)."""
    pending = [selection_set] if selection_set else []
    while pending:
        for selection in pending.pop().selections:
            yield selection
            if isinstance(selection, FieldNode | InlineFragmentNode) and selection.selection_set:
                pending.append(selection.selection_set)
