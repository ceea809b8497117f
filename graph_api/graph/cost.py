"""A static cost limit, computed from the document before anything is sent to DynamoDB.

GitHub's rule: a connection costs its `first` times the number of parents it may run for,
so `students(ids: [100 ids]) { classes(first: 100) { students(first: 100) } }` costs
100 + 100·100 + 100·100·100 and is refused before its first request. `students(ids)`
counts its ids; a root field returning one node counts 1. The figure is reported in
`extensions.cost = {requested, limit}` on every response.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    get_named_type,
    value_from_ast,
)
from graphql.execution.values import get_variable_values
from graphql.language import DocumentNode
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult

from graph_api.graph.paging import DEFAULT_FIRST, MAX_FIRST
from graph_api.graph.query import MAX_IDS

QUERY_TOO_COSTLY = "QUERY_TOO_COSTLY"


class _Walk:
    def __init__(
        self, schema: GraphQLSchema, document: DocumentNode, variables: Mapping[str, Any]
    ) -> None:
        self.schema = schema
        self.variables = dict(variables)
        self.fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }

    def fields(
        self, selections: SelectionSetNode | None, seen: frozenset[str] = frozenset()
    ) -> Iterator[FieldNode]:
        """The fields of a selection set, fragments spread in."""
        for selection in selections.selections if selections else ():
            if isinstance(selection, FieldNode):
                yield selection
            elif isinstance(selection, InlineFragmentNode):
                yield from self.fields(selection.selection_set, seen)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.fragments.get(name)
                if fragment is not None and name not in seen:  # cycles are invalid anyway
                    yield from self.fields(fragment.selection_set, seen | {name})

    def count(self, parent: GraphQLObjectType, node: FieldNode) -> int | None:
        """How many nodes this field may return, if it fetches any; None if it does not."""
        definition = parent.fields.get(node.name.value)
        if definition is None:
            return None
        args = {a.name.value: a.value for a in node.arguments or ()}
        if "first" in definition.args:
            value = (
                value_from_ast(args["first"], definition.args["first"].type, self.variables)
                if "first" in args
                else None
            )
            # Out-of-range values are the resolver's to refuse, with a clearer error.
            return min(max(value, 0), MAX_FIRST) if isinstance(value, int) else DEFAULT_FIRST
        if "ids" in definition.args and "ids" in args:
            value = value_from_ast(args["ids"], definition.args["ids"].type, self.variables)
            return min(len(value), MAX_IDS) if isinstance(value, list) else 0
        if parent is self.schema.query_type or parent is self.schema.mutation_type:
            return 1
        return None

    def cost(
        self, parent: GraphQLNamedType, selections: SelectionSetNode | None, factor: int
    ) -> int:
        if not isinstance(parent, GraphQLObjectType):
            return 0
        total = 0
        for node in self.fields(selections):
            definition = parent.fields.get(node.name.value)
            if definition is None:
                continue
            count = self.count(parent, node)
            inner = factor
            if count is not None:
                total += factor * count
                inner = factor * max(count, 1)
            total += self.cost(get_named_type(definition.type), node.selection_set, inner)
        return total


def operation_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
) -> int:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if operation_name is not None:
        operations = [o for o in operations if o.name and o.name.value == operation_name]
    if len(operations) != 1:
        return 0  # execution reports the missing or ambiguous operation
    operation = operations[0]
    root = schema.get_root_type(operation.operation)
    if root is None:
        return 0
    # The values execution will use: defaults applied, `100.0` as 100, one id as a list.
    coerced = get_variable_values(
        schema, operation.variable_definitions or (), dict(variables or {})
    )
    if isinstance(coerced, list):
        return 0  # execution reports the bad variables
    return _Walk(schema, document, coerced.coerced).cost(root, operation.selection_set, 1)


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
            )
            if self.requested > self.limit and context.result is None:
                # A result set before execution makes Strawberry skip executing.
                context.result = ExecutionResult(
                    data=None,
                    errors=[
                        GraphQLError(
                            f"This query may cost {self.requested}, over the limit of"
                            f" {self.limit}: ask for fewer items (first, ids) or nest less.",
                            extensions={
                                "code": QUERY_TOO_COSTLY,
                                "cost": {"requested": self.requested, "limit": self.limit},
                            },
                        )
                    ],
                )
        yield

    def get_results(self) -> dict[str, Any]:
        if self.requested is None:
            return {}
        return {"cost": {"requested": self.requested, "limit": self.limit}}
