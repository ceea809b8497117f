"""A static cost limit, computed from the document before anything is sent to DynamoDB.

GitHub's rule: a connection costs its `first` (or `last`) times the number of parents it may
run for, so `students(ids: [100 ids]) { classes(first: 100) { students(first: 100) } }` costs
100 + 100·100 + 100·100·100 and is refused before its first request. `students(ids)`
counts its ids; a root field returning one node counts 1. The figure is reported in
`extensions.cost = {requested, limit}` on every response.

The walk visits each selection of the document once: a fragment's cost is computed once and
a spread adds it times the number of parents it runs for, so fragments that spread each
other exponentially cost time linear in the document to price (and are refused).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLBoolean,
    GraphQLError,
    GraphQLID,
    GraphQLInt,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    GraphQLString,
    InlineFragmentNode,
    ListTypeNode,
    NamedTypeNode,
    NonNullTypeNode,
    SelectionSetNode,
    TypeNode,
    VariableDefinitionNode,
    get_named_type,
    value_from_ast,
)
from graphql.execution.values import get_variable_values
from graphql.language import DocumentNode
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api.errors import QueryTooCostly
from graph_api.graph.document import fragment_order, fragments_of, operations_of
from graph_api.graph.paging import DEFAULT_FIRST, MAX_FIRST
from graph_api.graph.query import MAX_IDS

QUERY_TOO_COSTLY = QueryTooCostly.code


class _Walk:
    """The cost of selections, each visited once: a fragment's cost is computed once (for a
    factor of 1, its type condition as the parent) and a spread adds it times its factor."""

    def __init__(
        self, schema: GraphQLSchema, document: DocumentNode, variables: Mapping[str, Any]
    ) -> None:
        self.schema = schema
        self.variables = dict(variables)
        self.visited = 0  # selections visited: each selection of the document at most once
        self.memo: dict[str, int] = {}
        fragments = fragments_of(document)
        for name in fragment_order(fragments):
            fragment = fragments[name]
            parent = schema.get_type(fragment.type_condition.name.value)
            self.memo[name] = self.cost(parent, fragment.selection_set, 1)

    def count(self, parent: GraphQLObjectType, node: FieldNode) -> int | None:
        """How many nodes this field may return, if it fetches any; None if it does not."""
        definition = parent.fields.get(node.name.value)
        if definition is None:
            return None
        args = {a.name.value: a.value for a in node.arguments or ()}
        if "first" in definition.args:
            # A connection: `first`, else `last` (both is refused by the field), else 20.
            value: Any = None
            for name in ("first", "last"):
                if not isinstance(value, int) and name in args and name in definition.args:
                    value = value_from_ast(args[name], definition.args[name].type, self.variables)
            # Out-of-range values are the resolver's to refuse, with a clearer error.
            return min(max(value, 0), MAX_FIRST) if isinstance(value, int) else DEFAULT_FIRST
        if "ids" in definition.args and "ids" in args:
            value = value_from_ast(args["ids"], definition.args["ids"].type, self.variables)
            return min(len(value), MAX_IDS) if isinstance(value, list) else 0
        roots = (self.schema.query_type, self.schema.mutation_type, self.schema.subscription_type)
        if parent in roots:  # a subscription's: each event fetches its node
            return 1
        return None

    def cost(
        self, parent: GraphQLNamedType | None, selections: SelectionSetNode | None, factor: int
    ) -> int:
        total = 0
        for node in selections.selections if selections else ():
            self.visited += 1
            if isinstance(node, FragmentSpreadNode):
                # Unknown, or the spread that closes a cycle: nothing (validation says why).
                total += factor * self.memo.get(node.name.value, 0)
            elif isinstance(node, InlineFragmentNode):
                condition = node.type_condition
                inner = self.schema.get_type(condition.name.value) if condition else parent
                total += self.cost(inner, node.selection_set, factor)
            elif isinstance(node, FieldNode) and isinstance(parent, GraphQLObjectType):
                definition = parent.fields.get(node.name.value)
                if definition is None:
                    continue
                count = self.count(parent, node)
                inner_factor = factor
                if count is not None:
                    total += factor * count
                    inner_factor = factor * max(count, 1)
                total += self.cost(
                    get_named_type(definition.type), node.selection_set, inner_factor
                )
        return total


@dataclass(frozen=True)
class Cost:
    requested: int  # capped at MAX_REPORTED
    visited: int  # selections the walk visited: at most the document's selections


# The largest integer every JSON client reads exactly; a fan-out of fragments can ask for
# far more (2^40 and beyond), which is refused all the same.
MAX_REPORTED = 2**53 - 1


def operation_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
) -> Cost:
    operations = operations_of(document)
    if operation_name is not None:
        operations = [o for o in operations if o.name and o.name.value == operation_name]
    if len(operations) != 1:
        return Cost(0, 0)  # validation or execution reports the missing or ambiguous operation
    operation = operations[0]
    root = schema.get_root_type(operation.operation)
    if root is None:
        return Cost(0, 0)
    definitions = operation.variable_definitions or ()
    given = dict(variables or {})
    values = _as_given(schema, definitions, given)
    if values is None:
        # The values execution will use: defaults applied, `100.0` as 100, one id as a list.
        coerced = get_variable_values(schema, definitions, given)
        if isinstance(coerced, list):
            return Cost(0, 0)  # execution reports the bad variables
        values = coerced.coerced
    walk = _Walk(schema, document, values)
    requested = walk.cost(root, operation.selection_set, 1)
    return Cost(min(requested, MAX_REPORTED), walk.visited)


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


def _as_given(
    schema: GraphQLSchema, definitions: Sequence[VariableDefinitionNode], given: dict[str, Any]
) -> dict[str, Any] | None:
    """The variables as graphql-core would coerce them, when that changes nothing: each one
    given, of a built-in scalar type (or a list of them) and already of its coerced Python
    type (30 ids: 18 µs less than coercing them). None: graphql-core must coerce them."""
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


class CostLimit(SchemaExtension):
    """Refuses an operation whose static cost passes `limit`, before it executes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.requested: int | None = None

    def on_execute(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        if document is not None:
            self.requested = operation_cost(
                context.schema._schema, document, context.operation_name, context.variables
            ).requested
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
        yield

    def get_results(self) -> dict[str, Any]:
        if self.requested is None:
            return {}
        return {"cost": {"requested": self.requested, "limit": self.limit}}
