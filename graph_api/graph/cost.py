"""A static cost limit, computed from the document before anything is sent to DynamoDB.

GitHub's rule: a connection costs its `first` (or `last`) times the number of parents it may
run for, so `students(ids: [100 ids]) { classes(first: 100) { students(first: 100) } }` costs
100 + 100·100 + 100·100·100 and is refused before its first request. `students(ids)`
counts its ids; a root field returning one node counts 1. The figure is reported in
`extensions.cost = {requested, limit}` on every response.

A document is compiled once into a formula (`_Formula`): the fields that count nodes and
what each holds, a count that reads a variable kept as a function of the variables. The
compile visits each selection once (a fragment is compiled once, and its spreads share it),
and so does pricing (a fragment's cost is worked out once a request), so fragments that
spread each other exponentially cost time linear in the document to price (and are
refused). Request after request, a document is priced from its formula: a number when
nothing in it reads a variable, else only its counting fields.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLBoolean,
    GraphQLError,
    GraphQLID,
    GraphQLInputType,
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
    ValueNode,
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
from graph_api.graph.context import Context
from graph_api.graph.document import (
    KeptBy,
    fragment_order,
    fragments_of,
    operations_of,
    reads_variables,
)
from graph_api.graph.paging import DEFAULT_FIRST, MAX_FIRST
from graph_api.graph.query import MAX_IDS
from graph_api.graph.throttle import gate, shared_gate, throttle_status
from graph_api.internals import graphql_schema

QUERY_TOO_COSTLY = QueryTooCostly.code


Counting = Callable[[Mapping[str, Any]], int]  # a count that reads the variables


class _Formula:
    """The cost of a selection set per parent, as data: the fields that count nodes, each
    with the formula of what it holds, and the fragments spread in; fields that count
    nothing are merged into their parent's formula. `constant` is the cost when no count
    under it reads a variable, so a request prices such a document by reading one number."""

    __slots__ = ("constant", "fields", "spreads")
    constant: int | None
    fields: tuple[tuple[int | Counting, _Formula], ...]
    spreads: tuple[_Formula, ...]

    def __init__(
        self, fields: list[tuple[int | Counting, _Formula]], spreads: list[_Formula]
    ) -> None:
        self.fields = tuple(fields)
        self.spreads = tuple(spreads)  # each fragment compiled once, shared by its spreads
        constant: int | None = 0
        for count, inner in self.fields:
            if constant is None or not isinstance(count, int) or inner.constant is None:
                constant = None
                break
            constant += count + max(count, 1) * inner.constant
        for spread in self.spreads:
            if constant is None or spread.constant is None:
                constant = None
                break
            constant += spread.constant
        self.constant = constant

    def cost(self, variables: Mapping[str, Any], memo: dict[int, int]) -> int:
        """The cost per parent for these variables. A fragment's is worked out once
        (`memo`, by formula), so fragments that spread each other stay linear to price."""
        if self.constant is not None:
            return self.constant
        known = memo.get(id(self))
        if known is not None:
            return known
        total = 0
        for count, inner in self.fields:
            n = count if isinstance(count, int) else count(variables)
            total += n + max(n, 1) * inner.cost(variables, memo)
        for spread in self.spreads:
            total += spread.cost(variables, memo)
        memo[id(self)] = total
        return total


def _connection_count(arguments: list[tuple[ValueNode, GraphQLInputType]], variables: Any) -> int:
    """A connection's `first`, else `last` (both is refused by the field), else 20; out of
    range values are the resolver's to refuse, with a clearer error."""
    value: Any = None
    for node, type_ in arguments:
        if not isinstance(value, int):
            value = value_from_ast(node, type_, variables)
    return min(max(value, 0), MAX_FIRST) if isinstance(value, int) else DEFAULT_FIRST


def _ids_count(node: ValueNode, type_: GraphQLInputType, variables: Any) -> int:
    value = value_from_ast(node, type_, variables)
    return min(len(value), MAX_IDS) if isinstance(value, list) else 0


class _Compile:
    """A document's formulas, each selection visited once: a fragment is compiled once (its
    type condition as the parent) and its spreads share it."""

    def __init__(self, schema: GraphQLSchema, document: DocumentNode) -> None:
        self.schema = schema
        self.visited = 0  # selections visited: each selection of the document at most once
        self.fragments: dict[str, _Formula] = {}
        definitions = fragments_of(document)
        for name in fragment_order(definitions):
            fragment = definitions[name]
            parent = schema.get_type(fragment.type_condition.name.value)
            self.fragments[name] = self.formula(parent, fragment.selection_set)

    def count(self, parent: GraphQLObjectType, node: FieldNode) -> int | Counting | None:
        """How many nodes this field may return, if it fetches any; None if it does not. A
        count that reads a variable is a function of the variables."""
        definition = parent.fields[node.name.value]
        args = {a.name.value: a.value for a in node.arguments or ()}
        if "first" in definition.args:
            given = [
                (args[name], definition.args[name].type)
                for name in ("first", "last")
                if name in args and name in definition.args
            ]
            if any(reads_variables(value) for value, _ in given):
                return partial(_connection_count, given)
            return _connection_count(given, None)
        if "ids" in definition.args and "ids" in args:
            value, type_ = args["ids"], definition.args["ids"].type
            if reads_variables(value):
                return partial(_ids_count, value, type_)
            return _ids_count(value, type_, None)
        roots = (self.schema.query_type, self.schema.mutation_type, self.schema.subscription_type)
        if parent in roots:  # a subscription's: each event fetches its node
            return 1
        return None

    def formula(
        self, parent: GraphQLNamedType | None, selections: SelectionSetNode | None
    ) -> _Formula:
        fields: list[tuple[int | Counting, _Formula]] = []
        spreads: list[_Formula] = []
        self.merge(parent, selections, fields, spreads)
        return _Formula(fields, spreads)

    def merge(
        self,
        parent: GraphQLNamedType | None,
        selections: SelectionSetNode | None,
        fields: list[tuple[int | Counting, _Formula]],
        spreads: list[_Formula],
    ) -> None:
        """Add the selections' terms to a formula's: an inline fragment's and a field's that
        counts nothing are the parent's own."""
        for node in selections.selections if selections else ():
            self.visited += 1
            if isinstance(node, FragmentSpreadNode):
                # Unknown, or the spread that closes a cycle: nothing (validation says why).
                fragment = self.fragments.get(node.name.value)
                if fragment is not None:
                    spreads.append(fragment)
            elif isinstance(node, InlineFragmentNode):
                condition = node.type_condition
                inner = self.schema.get_type(condition.name.value) if condition else parent
                self.merge(inner, node.selection_set, fields, spreads)
            elif isinstance(node, FieldNode) and isinstance(parent, GraphQLObjectType):
                definition = parent.fields.get(node.name.value)
                if definition is None:
                    continue
                count = self.count(parent, node)
                child = get_named_type(definition.type)
                if count is None:
                    self.merge(child, node.selection_set, fields, spreads)
                else:
                    fields.append((count, self.formula(child, node.selection_set)))


@dataclass(frozen=True)
class Cost:
    requested: int  # capped at MAX_REPORTED
    visited: int  # selections compiling the document visited: at most its selections


# The largest integer every JSON client reads exactly; a fan-out of fragments can ask for
# far more (2^40 and beyond), which is refused all the same.
MAX_REPORTED = 2**53 - 1


@dataclass(frozen=True)
class _Priced:
    """An operation's formula, compiled once a document (None: no single operation to
    price, which validation or execution reports)."""

    formula: _Formula | None
    definitions: Sequence[VariableDefinitionNode]
    visited: int


_priced: KeptBy[_Priced] = KeptBy()  # by schema, document and operation name


def _price(schema: GraphQLSchema, document: DocumentNode, operation_name: str | None) -> _Priced:
    known = _priced.get((schema, document), operation_name)
    if known is not None:
        return known
    operations = operations_of(document)
    if operation_name is not None:
        operations = [o for o in operations if o.name and o.name.value == operation_name]
    root = schema.get_root_type(operations[0].operation) if len(operations) == 1 else None
    if root is None:
        priced = _Priced(None, (), 0)
    else:
        compiled = _Compile(schema, document)
        formula = compiled.formula(root, operations[0].selection_set)
        priced = _Priced(formula, operations[0].variable_definitions or (), compiled.visited)
    return _priced.put((schema, document), priced, operation_name)


def operation_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
) -> Cost:
    priced = _price(schema, document, operation_name)
    if priced.formula is None:
        return Cost(0, 0)
    given = dict(variables or {})
    values = as_given(schema, priced.definitions, given)
    if values is None:
        # The values execution will use: defaults applied, `100.0` as 100, one id as a list.
        coerced = get_variable_values(schema, priced.definitions, given)
        if isinstance(coerced, list):
            return Cost(0, 0)  # execution reports the bad variables
        values = coerced.coerced
    requested = priced.formula.cost(values, {})
    return Cost(min(requested, MAX_REPORTED), priced.visited)


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
        self.price()
        # The rate limit's gate rides this hook: an extension of its own costs every request.
        yield from gate(self.execution_context, self.requested)

    def price(self) -> None:
        """The operation's requested cost, left on the context; over `limit`, a refusal."""
        context = self.execution_context
        document = context.graphql_document
        if document is not None:
            self.requested = operation_cost(
                graphql_schema(context.schema), document, context.operation_name, context.variables
            ).requested
            if isinstance(context.context, Context):  # the rate limit takes it (`throttle`)
                context.context.requested_cost = self.requested
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
