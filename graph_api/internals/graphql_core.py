"""graphql-core's non-public API that graph_api relies on (`graph_api.internals` lists it).

graphql-core documents `Executor` as the class to subclass (`execution_context_class`), but
"the methods used internally for executing and completing fields are not part of the public
API". graph/engine/execution.py overrides one of them and calls nine: `EXECUTOR_METHODS` names each
with the parameters it is called with, for tests/project/test_internals.py to pin (their signatures,
and one behaviour each). The rest are names graphql-core does not export.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    GraphQLObjectType,
    GraphQLSchema,
    MiddlewareManager,
    OperationDefinitionNode,
)
from graphql.execution import VariableValues
from graphql.execution.collect_fields import (
    FieldDetails,
    FragmentDetails,
    collect_fields,
    collect_subfields,
)
from graphql.execution.middleware import get_middleware_resolvers
from graphql.pyutils import Path
from graphql.type.scalars import serialize_boolean, serialize_id, serialize_string
from graphql.validation.validate import ValidationAbortedError

__all__ = [
    "EXECUTOR_METHODS",
    "UNCHANGED",
    "ValidationAbortedError",
    "collected_fields",
    "fragment_details",
    "make_path",
    "wraps_resolvers",
]

# `Executor`'s methods graph/engine/execution.py overrides (`execute_fields`) or calls, each
# with its parameters as it relies on them (names and order).
EXECUTOR_METHODS: dict[str, tuple[str, ...]] = {
    "execute_fields": (
        "parent_type",
        "source_value",
        "path",
        "grouped_field_set",
        "position_context",
    ),
    "execute_field": ("parent_type", "source", "field_details_list", "path", "position_context"),
    "build_resolve_info": ("field_def", "field_nodes", "parent_type", "path"),
    "handle_field_error": ("raw_error", "return_type", "field_details_list", "path"),
    "complete_value": (
        "return_type",
        "field_details_list",
        "info",
        "path",
        "result",
        "position_context",
    ),
    "collect_subfields": ("return_type", "field_details_list"),
    "collect_and_execute_subfields": (
        "return_type",
        "field_details_list",
        "path",
        "result",
        "position_context",
    ),
    "with_abort_signal": ("awaitable",),
    "settle_in_background": ("awaitables",),
    "track_async_work": ("values",),
}


def wraps_resolvers(manager: MiddlewareManager | None) -> bool:
    """Whether a middleware manager wraps resolvers (an extension's `resolve` hook):
    graphql-core's own test, `get_middleware_resolvers` (`:meta private:`) over its
    undocumented `middlewares`."""
    return manager is not None and any(get_middleware_resolvers(manager.middlewares))


# The built-in scalars' output coercions (`GraphQLString.serialize`, ...; the functions are
# not exported) and the types of value each returns unchanged.
UNCHANGED: dict[Callable[[Any], Any], frozenset[type]] = {
    serialize_string: frozenset({str}),
    serialize_id: frozenset({str}),
    serialize_boolean: frozenset({bool}),
}

_new_tuple = tuple.__new__


def make_path(prev: Path | None, key: str | int, typename: str | None) -> Path:
    """`Path(prev, key, typename)`: the same named tuple (its fields in that order, which its
    docs do not promise), made without the Python-level `__new__` NamedTuple writes (a path a
    field; Q1 of `make bench` makes about 650)."""
    return _new_tuple(Path, (prev, key, typename))


def fragment_details(fragments: Mapping[str, FragmentDefinitionNode]) -> dict[str, Any]:
    """A document's fragments as graphql-core's collection takes them (`collected_fields`)."""
    return {name: FragmentDetails(fragment) for name, fragment in fragments.items()}


def collected_fields(
    schema: GraphQLSchema,
    fragments: dict[str, Any],
    variables: Mapping[str, Any],
    operation: OperationDefinitionNode,
    type_: GraphQLObjectType,
    nodes: Sequence[FieldNode] | None,
) -> list[FieldNode]:
    """The field nodes graphql-core's executor collects on an object of `type_` under
    `nodes` (None: the operation's root), for these coerced variables: its own
    `collect_fields`/`collect_subfields` (exported, but "for internal use only"), grouped
    field sets flattened in order. `fragments`: `fragment_details`."""
    values = VariableValues({}, dict(variables))
    if nodes is None:
        grouped = collect_fields(schema, fragments, values, type_, operation).grouped_field_set
    else:
        details = [FieldDetails(node, None) for node in nodes]
        grouped = collect_subfields(
            schema, fragments, values, operation, type_, details
        ).grouped_field_set
    return [one.node for group in grouped.values() for one in group]
