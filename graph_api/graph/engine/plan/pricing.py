"""An operation's static cost, from its formula (`walk.Formula`) and the request's variables.

GitHub's rule: a connection costs its `first` (or `last`) times the number of parents it may
run for, so `students(ids: [100 ids]) { classes(first: 100) { students(first: 100) } }` costs
100 + 100·100 + 100·100·100 and is refused before its first request (`graph/engine/cost.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphql import (
    GraphQLBoolean,
    GraphQLID,
    GraphQLInt,
    GraphQLSchema,
    GraphQLString,
    ListTypeNode,
    NamedTypeNode,
    NonNullTypeNode,
    TypeNode,
    VariableDefinitionNode,
)
from graphql.execution.values import get_variable_values

from graph_api.graph.engine.plan import walk

# The largest integer every JSON client reads exactly; a fan-out of fragments can ask for
# far more (2^40 and beyond), which is refused all the same.
MAX_REPORTED = 2**53 - 1


@dataclass(frozen=True)
class Cost:
    requested: int  # capped at MAX_REPORTED
    visited: int  # selections the document's walk visited: at most its selections


def coerced(
    schema: GraphQLSchema, definitions: Sequence[VariableDefinitionNode], given: dict[str, Any]
) -> dict[str, Any] | None:
    """The variables' values as execution will use them (defaults applied, `100.0` as 100,
    one id as a list); None when they are bad, which execution reports."""
    values = as_given(schema, definitions, given)
    if values is not None:
        return values
    found = get_variable_values(schema, definitions, given)
    return None if isinstance(found, list) else found.coerced


def price(operation: walk.Operation, values: Mapping[str, Any]) -> int:
    """The operation's cost for these (coerced) variables, capped at MAX_REPORTED."""
    if operation.formula is None:
        return 0
    return min(operation.formula.cost(values, {}), MAX_REPORTED)


# Built-in scalars whose coercion gives a value of this exact type back unchanged.
_UNCHANGED = {
    scalar.name: (scalar, kind)
    for scalar, kind in (
        (GraphQLID, str),
        (GraphQLString, str),
        (GraphQLBoolean, bool),
        (GraphQLInt, int),
    )
}
_INT_RANGE = range(-(2**31), 2**31)


def as_given(
    schema: GraphQLSchema, definitions: Sequence[VariableDefinitionNode], given: dict[str, Any]
) -> dict[str, Any] | None:
    """The variables as graphql-core would coerce them, when that changes nothing: each one
    given, of a built-in scalar type (or a list of them) and already of its coerced Python
    type (what it saves: bench/README.md). None: graphql-core must coerce them."""
    for definition in definitions:
        value = given.get(definition.variable.name.value)
        type_node: TypeNode = definition.type
        if isinstance(type_node, NonNullTypeNode):
            type_node = type_node.type
        items = isinstance(type_node, ListTypeNode)
        if items:
            item: TypeNode = type_node.type  # type: ignore[attr-defined]
            if not isinstance(item, NonNullTypeNode) or type(value) is not list:
                return None
            type_node = item.type
        if not isinstance(type_node, NamedTypeNode) or value is None:
            return None  # a nested list, an input object; null, absent: its default, or none
        name = type_node.name.value
        scalar, kind = _UNCHANGED.get(name, (None, None))
        if scalar is None or schema.get_type(name) is not scalar:
            return None
        for one in value if items else (value,):
            if type(one) is not kind or (kind is int and one not in _INT_RANGE):
                return None
    return given
