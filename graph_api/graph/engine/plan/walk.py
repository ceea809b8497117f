"""The one walk of a document, each selection visited once, cached with the document.

It works out, for every operation of the document:

- the limits' figures: how deep its fields nest (as Strawberry's QueryDepthLimiter counts:
  introspection fields and what they hold count nothing) and how many aliases it writes,
  every spread of a fragment counted;
- its cost formula (GitHub's rule, `graph/engine/cost.py`): the fields that count nodes, each with
  the formula of what it holds, a count that reads a variable kept as a function of the
  variables;
- the fields selected on each object type, its fragments' included (what reads of a node
  type's items ask for, `OperationPlan.parts`);
- the variables whose values can change its plan (`Walked.plan_variables`): those of
  `@skip`/`@include`, and of the arguments that count or page (`first`, `last`, `after`,
  `before`, `ids`).

A document whose fragments spread each other exponentially (`fragment F0 { ...F1 ...F1 }`,
40 levels in 400 tokens is 2^40 fields) is measured in time linear in its size: fragments
are walked dependencies first (`document.fragment_order`), and a spread adds the memoized
figures of its fragment. Nothing here trusts the document to be valid (the limits run
before graphql-core's rules): an unknown field or fragment counts nothing, and so does the
spread that closes a fragment cycle (`NoFragmentCyclesRule` reports it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLInputType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    ListValueNode,
    ObjectValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValueNode,
    VariableNode,
    get_named_type,
    is_abstract_type,
    value_from_ast,
)

from graph_api.graph.engine.document import (
    KeptBy,
    fragment_order,
    fragments_of,
    operations_of,
    reads_variables,
)
from graph_api.model.validation import DEFAULT_FIRST, MAX_FIRST, MAX_IDS

Counting = Callable[[Mapping[str, Any]], int]  # a count that reads the variables


class Formula:
    """The cost of a selection set per parent, as data: the fields that count nodes, each
    with the formula of what it holds, and the fragments spread in; fields that count
    nothing are merged into their parent's formula. `constant` is the cost when no count
    under it reads a variable, so a request prices such a document by reading one number."""

    __slots__ = ("constant", "fields", "spreads")
    constant: int | None
    fields: tuple[tuple[int | Counting, Formula], ...]
    spreads: tuple[Formula, ...]

    def __init__(
        self, fields: list[tuple[int | Counting, Formula]], spreads: list[Formula]
    ) -> None:
        self.fields = tuple(fields)
        self.spreads = tuple(spreads)  # each fragment's formula once, shared by its spreads
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


EMPTY = Formula([], [])


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


# Arguments whose variables can change an operation's plan: its cost (`first`, `last`,
# `ids`) or a page's reads (`after`, `before`: a roster's first page rides with its node).
PLAN_ARGUMENTS = frozenset({"first", "last", "after", "before", "ids"})
IF = "if"  # `@skip(if:)`, `@include(if:)`: which fields are collected


def variables_in(value: ValueNode) -> Iterator[str]:
    """The names of the variables an argument's value reads, at any depth."""
    if isinstance(value, VariableNode):
        yield value.name.value
    elif isinstance(value, ListValueNode):
        for item in value.values:
            yield from variables_in(item)
    elif isinstance(value, ObjectValueNode):
        for one in value.fields:
            yield from variables_in(one.value)


@dataclass
class _Definition:
    """What the walk found in one operation or fragment, its spreads not followed."""

    depth: int = 0
    aliases: int = 0
    formula: Formula = EMPTY
    selected: set[tuple[str, str]] = field(default_factory=set)  # (object type, field)
    uses: set[tuple[str, str]] = field(default_factory=set)  # (variable, argument or IF)
    spreads: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Operation:
    """One operation's figures, its fragments' included."""

    node: OperationDefinitionNode
    depth: int
    aliases: int
    formula: Formula | None  # None: no root type of its kind in the schema
    selected: frozenset[tuple[str, str]]
    plan_variables: tuple[tuple[str, str], ...]  # (variable, argument or IF), sorted


@dataclass(frozen=True)
class Walked:
    """A document's operations and fragments as the walk found them."""

    operations: tuple[Operation, ...]
    fragments: dict[str, FragmentDefinitionNode]
    fragment_variables: bool  # a fragment declares variables of its own (experimental)
    visited: int  # selections visited: each selection of the document at most once

    def operation(self, name: str | None) -> Operation | None:
        """The operation `name` names, or the only one (None: none, or several unnamed)."""
        found = self.operations
        if name is not None:
            found = tuple(o for o in found if o.node.name and o.node.name.value == name)
        return found[0] if len(found) == 1 else None


class _Walk:
    def __init__(self, schema: GraphQLSchema, document: DocumentNode) -> None:
        self.schema = schema
        self.visited = 0
        self.fragments = fragments_of(document)
        self.done: dict[str, _Definition] = {}
        for name in fragment_order(self.fragments):
            fragment = self.fragments[name]
            condition = schema.get_type(fragment.type_condition.name.value)
            self.done[name] = self.definition(condition, fragment.selection_set)

    def definition(
        self, parent: GraphQLNamedType | None, selections: SelectionSetNode | None
    ) -> _Definition:
        found = _Definition()
        terms: list[tuple[int | Counting, Formula]] = []
        spreads: list[Formula] = []
        found.depth, found.aliases = self.walk(parent, selections, terms, spreads, found)
        found.formula = Formula(terms, spreads)
        return found

    def walk(
        self,
        parent: GraphQLNamedType | None,
        selections: SelectionSetNode | None,
        terms: list[tuple[int | Counting, Formula]],
        spreads: list[Formula],
        found: _Definition,
    ) -> tuple[int, int]:
        """Depth and aliases of a selection set; its cost terms added to `terms` and
        `spreads` (an inline fragment's and a field's that counts nothing are its parent's
        own), what it selects and which plan variables it reads to `found`."""
        depth = aliases = 0
        for node in selections.selections if selections else ():
            self.visited += 1
            for directive in node.directives or ():
                for argument in directive.arguments or ():
                    found.uses.update((name, IF) for name in variables_in(argument.value))
            if isinstance(node, FieldNode):
                inner_depth, inner_aliases = self.field(parent, node, terms, spreads, found)
                aliases += inner_aliases + (1 if node.alias else 0)
                if node.selection_set and not node.name.value.startswith("__"):
                    depth = max(depth, 1 + inner_depth)
            elif isinstance(node, InlineFragmentNode):
                condition = node.type_condition
                inner = self.schema.get_type(condition.name.value) if condition else parent
                inner_depth, inner_aliases = self.walk(
                    inner, node.selection_set, terms, spreads, found
                )
                depth, aliases = max(depth, inner_depth), aliases + inner_aliases
            elif isinstance(node, FragmentSpreadNode):
                name = node.name.value
                found.spreads.add(name)
                # Unknown, or the spread that closes a cycle: nothing (validation says why).
                known = self.done.get(name)
                if known is not None:
                    depth, aliases = max(depth, known.depth), aliases + known.aliases
                    spreads.append(known.formula)
        return depth, aliases

    def field(
        self,
        parent: GraphQLNamedType | None,
        node: FieldNode,
        terms: list[tuple[int | Counting, Formula]],
        spreads: list[Formula],
        found: _Definition,
    ) -> tuple[int, int]:
        name = node.name.value
        for argument in node.arguments or ():
            if argument.name.value in PLAN_ARGUMENTS:
                found.uses.update(
                    (variable, argument.name.value) for variable in variables_in(argument.value)
                )
        schema = self.schema
        definition = getattr(parent, "fields", {}).get(name) if parent is not None else None
        if parent is not None:
            possible = schema.get_possible_types(parent) if is_abstract_type(parent) else [parent]
            found.selected.update((t.name, name) for t in possible)
        child = get_named_type(definition.type) if definition is not None else None
        if definition is None or not isinstance(parent, GraphQLObjectType):
            # Not priced (a field of an interface, or unknown): its depth, aliases and
            # selections count all the same.
            return self.walk(child, node.selection_set, [], [], found)
        count = self.count(parent, node)
        if count is None:
            return self.walk(child, node.selection_set, terms, spreads, found)
        inner_terms: list[tuple[int | Counting, Formula]] = []
        inner_spreads: list[Formula] = []
        figures = self.walk(child, node.selection_set, inner_terms, inner_spreads, found)
        terms.append((count, Formula(inner_terms, inner_spreads)))
        return figures

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
        schema = self.schema
        if parent in (schema.query_type, schema.mutation_type, schema.subscription_type):
            return 1  # a root field returns one node; a subscription's, each event's
        return None

    def operation(self, node: OperationDefinitionNode) -> Operation:
        root = self.schema.get_root_type(node.operation)
        own = self.definition(root, node.selection_set)
        selected, uses = set(own.selected), set(own.uses)
        pending, seen = list(own.spreads), set(own.spreads)
        while pending:  # the fragments it reaches, each once
            fragment = self.done.get(pending.pop())
            if fragment is None:
                continue
            selected |= fragment.selected
            uses |= fragment.uses
            for name in fragment.spreads - seen:
                seen.add(name)
                pending.append(name)
        return Operation(
            node,
            own.depth,
            own.aliases,
            own.formula if root is not None else None,
            frozenset(selected),
            tuple(sorted(uses)),
        )


_walked: KeptBy[Walked] = KeptBy()  # by schema and document


def walked(schema: GraphQLSchema, document: DocumentNode) -> Walked:
    """The document walked once, for `schema`."""
    known = _walked.get((schema, document))
    if known is not None:
        return known
    walk = _Walk(schema, document)
    operations = tuple(walk.operation(node) for node in operations_of(document))
    result = Walked(
        operations,
        walk.fragments,
        any(f.variable_definitions for f in walk.fragments.values()),
        walk.visited,
    )
    return _walked.put((schema, document), result)
