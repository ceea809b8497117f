"""The plan of one operation for one set of plan variables, made once after validation.

`plan_for` is called once a request, by the cost limit (`graph/engine/cost.py`), which refuses the
operation when the plan's cost is over the limit and otherwise puts the plan on the
request's context (`Context.plan`). A plan is kept by the parsed document (Strawberry's
parser cache hands out the same document for the same text), the operation's name and
what the plan reads of the variables that can change it (`plan_values`: `@skip`/`@include`'s
booleans, `first`/`last` clamped, `ids` as a count, `after`/`before` as given or not, never
the cursor itself), in a cache bounded by document, variants and bytes (`cache.Plans`).
Request after request, an operation is planned by one look-up.

What the layers read of it:

- the cost limit and the rate limit: `cost` (`Context.requested_cost`);
- reads of node items: `parts`, the attributes the operation's fields of each type read;
- resolvers: `level(path)`, what is selected at their own response path (`Level`): whether
  a roster's first page rides with its node's read, which attributes a page's nodes read;
- the executor: `steps`, its per-field steps kept from request to request
  (`graph/engine/execution.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from sys import getsizeof
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    IntValueNode,
    NullValueNode,
    ValueNode,
    VariableNode,
    get_named_type,
    is_abstract_type,
)
from graphql.pyutils import Path

from graph_api.graph.engine.plan import cache, pricing, walk
from graph_api.graph.engine.plan.pricing import Cost
from graph_api.internals.graphql_core import collected_fields, fragment_details
from graph_api.model.validation import DEFAULT_FIRST, MAX_FIRST, MAX_IDS

ROSTER_FIELD = "students"
NODES = ("edges", "node")  # the path from a connection field to its nodes' fields

Parts = dict[str, frozenset[str] | None]  # GraphQL type → what reads of its items ask for
# A response path's keys, lists' indexes left out, from the field back to the root.
Signature = tuple[tuple[str, str | None], ...]


class OperationPlan:
    """One operation's plan (module docstring)."""

    __slots__ = (
        "_fragments",
        "_levels",
        "_parts",
        "cost",
        "operation",
        "schema",
        "steps",
        "variables",
        "watcher",
    )

    def __init__(
        self,
        schema: GraphQLSchema,
        walked: walk.Walked,
        operation: walk.Operation,
        cost: Cost,
        variables: Mapping[str, Any],
    ) -> None:
        self.schema = schema
        self.operation = operation
        self._fragments = fragment_details(walked.fragments)
        self.cost = cost
        # What the plan reads of the plan variables (`plan_values`): no caller's cursor.
        self.variables = variables
        # The executor's steps by parent type and field nodes (`graph/engine/execution.py`); None
        # where graphql-core's grouped field sets may differ within one plan (a fragment's
        # own variables).
        self.steps: dict[tuple[Any, ...], Any] | None = (
            None if walked.fragment_variables else _Steps(self)
        )
        self._levels: dict[Signature, Level] = {}
        # The parts, with the tables they were worked out from (`parts`).
        self._parts: tuple[tuple[tuple[str, object], ...], Parts] | None = None
        # Told once when the plan holds more (its memos, the executor's steps): the cache,
        # which measures its `footprint` again.
        self.watcher: Callable[[], None] | None = None

    def grew(self) -> None:
        watcher = self.watcher
        if watcher is not None:
            self.watcher = None
            watcher()

    def footprint(self) -> int:
        """The bytes this plan holds of its own, as `sys.getsizeof` counts them: its memos
        (levels, parts, the executor's steps) and what they hold. Not the document's
        nodes, the schema's types nor the walk, which their own caches hold."""
        size = _owned(self) + _owned(self.cost) + _sizes(self._fragments)
        for keys, level in self._levels.items():
            size += getsizeof(keys) + sum(map(getsizeof, keys)) + level.footprint()
        if self._parts is not None:
            size += getsizeof(self._parts) + _sizes(self._parts[0]) + _sizes(self._parts[1])
        size += getsizeof(self.steps)
        for key, steps in (self.steps or {}).items():
            size += getsizeof(key) + sum(map(getsizeof, key[1:])) + getsizeof(steps)
            size += sum(_owned(step) for step in steps)
        return size

    def level(self, path: Path | None) -> Level:
        """The level of the field at `path` (None: the operation's root)."""
        # The path's response keys, each with its parent's type (graphql-core's
        # `Path.typename`), from the field back to the root: the same for every item of a
        # list. Inline, with no call: once a resolver call.
        keys: Signature = ()
        while path is not None:
            key = path.key
            if key.__class__ is str:
                keys += ((key, path.typename),)
            path = path.prev
        known = self._levels.get(keys)
        return known if known is not None else self._level(keys)

    def _level(self, keys: Signature) -> Level:
        """The level at `keys` (`signature`: the field's first), worked out once a plan."""
        known = self._levels.get(keys)
        if known is not None:
            return known
        if not keys:
            root = self.schema.get_root_type(self.operation.node.operation)
            level = Level(self, None, root)
        else:
            parent = self._level(keys[1:])
            key, parent_type_name = keys[0]
            parent_type = self.schema.get_type(parent_type_name) if parent_type_name else None
            nodes = [f for f in parent.collect(parent_type) if (f.alias or f.name).value == key]
            field = _field(parent_type, nodes[0].name.value) if nodes else None
            child = get_named_type(field.type) if field is not None else None
            level = Level(self, tuple(nodes), child)
        self._levels[keys] = level
        self.grew()
        return level

    def parts(self, tables: Mapping[str, Mapping[str, Sequence[str]]]) -> Parts:
        """For each type of `tables` (GraphQL type → `NodeBase.field_attributes`: the
        process's node tables), the item attributes its fields selected anywhere in the
        operation (its fragments included) may read, or None when one of them is not named
        there: every read of such an item in the request asks for that one set, so that one
        read of a key answers all the others. Worked out again for other tables (by the
        identity of each type's table; the process's are the same objects each request)."""
        given = tuple(tables.items())
        known = self._parts
        if known is not None and _same(known[0], given):
            return known[1]
        selected: dict[str, list[str]] = {}
        for type_name, name in self.operation.selected:
            selected.setdefault(type_name, []).append(name)
        parts: Parts = {}
        for type_name, table in tables.items():
            attributes: set[str] | None = set()
            for name in selected.get(type_name, ()):
                if name in table:
                    attributes.update(table[name])  # type: ignore[union-attr]
                elif not name.startswith("__"):  # __typename reads nothing
                    attributes = None
                    break
            parts[type_name] = frozenset(attributes) if attributes is not None else None
        self._parts = (given, parts)
        return parts

    def collect(
        self, type_: GraphQLObjectType, nodes: Sequence[FieldNode] | None
    ) -> list[FieldNode]:
        """graphql-core's own collection (`collect_fields`, `collect_subfields`), for the
        plan's variables: the fields `nodes` select on an object of `type_` (None: the
        operation's root fields), fragments that apply to it flattened, `@skip` and
        `@include` as the variables say."""
        return collected_fields(
            self.schema, self._fragments, self.variables, self.operation.node, type_, nodes
        )


def _same(known: tuple[tuple[str, object], ...], given: tuple[tuple[str, object], ...]) -> bool:
    """The same types, each with the very same table."""
    return len(known) == len(given) and all(
        a[0] == b[0] and a[1] is b[1] for a, b in zip(known, given, strict=True)
    )


class _Steps(dict[tuple[Any, ...], Any]):
    """The executor's steps, kept on the plan: a step added tells the plan it grew."""

    __slots__ = ("plan",)

    def __init__(self, plan: OperationPlan) -> None:
        super().__init__()
        self.plan = plan

    def __setitem__(self, key: tuple[Any, ...], value: Any) -> None:
        super().__setitem__(key, value)
        self.plan.grew()


def _owned(value: object) -> int:
    """`value`, the containers its attributes hold and their items (a step's field details;
    a shared item, a field node, counted too: more, never less, than the plan holds)."""
    size = getsizeof(value)
    slots = getattr(type(value), "__slots__", None)
    inner = (getattr(value, name, None) for name in slots) if slots else vars(value).values()
    for one in inner:
        if type(one) in _CONTAINERS:
            size += _sizes(one)
    return size


def _sizes(value: Any) -> int:
    """A container and its items (a dict's keys and values), one level deep."""
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
    return getsizeof(value) + sum(map(getsizeof, items))


_CONTAINERS = frozenset({dict, list, tuple, set, frozenset})


def _field(type_: GraphQLNamedType | None, name: str) -> Any:
    fields = getattr(type_, "fields", None)
    return fields.get(name) if fields is not None else None


class Level:
    """A level of the response: the field at one response path, the field nodes merged
    there and its type. What it selects is collected by graphql-core's collection
    (`OperationPlan.collect`), on each object type it may be: its type, or each possible
    type of an interface or a union. Once a plan."""

    __slots__ = ("_fields", "_first", "_read", "nodes", "plan", "type")

    def __init__(
        self,
        plan: OperationPlan,
        nodes: tuple[FieldNode, ...] | None,
        type_: GraphQLNamedType | None,
    ) -> None:
        self.plan = plan
        self.nodes = nodes  # None: the operation's root
        self.type = type_
        self._fields: dict[tuple[Any, ...], list[FieldNode]] = {}
        self._read: tuple[Mapping[str, str], frozenset[str]] | None = None
        self._first: dict[tuple[str, ...], int | None] = {}

    def collect(self, type_: GraphQLNamedType | None) -> list[FieldNode]:
        """The fields selected here on an object of `type_` (its fragments' as its own)."""
        key = ("on", type_.name if type_ is not None else None)
        found = self._fields.get(key)
        if found is None:
            found = self._fields[key] = _collect(self.plan, self.nodes, type_)
            self.plan.grew()
        return found

    def fields(self, under: Sequence[str] = ()) -> list[FieldNode]:
        """The fields selected here (fragments flattened), or at the end of the path
        `under` (`NODES`: the fields of a connection's nodes)."""
        key = tuple(under)
        found = self._fields.get(key)
        if found is not None:
            return found
        type_ = self.type
        level = self.collect(type_)
        for name in under:
            field = _field(type_, name)
            type_ = get_named_type(field.type) if field is not None else None
            level = _collect(self.plan, [f for f in level if f.name.value == name], type_)
        self._fields[key] = level
        self.plan.grew()
        return level

    def names(self, under: Sequence[str] = ()) -> set[str]:
        return {field.name.value for field in self.fields(under)}

    def reads(self, attributes: Mapping[str, str]) -> frozenset[str]:
        """The item attributes the fields selected on this connection's nodes read
        (`attributes`: the node type's field → attribute, one table a type)."""
        known = self._read
        if known is None or known[0] is not attributes:  # one table a level, in practice
            names = (field.name.value for field in self.fields(NODES))
            wanted = frozenset(attributes[name] for name in names if name in attributes)
            known = self._read = (attributes, wanted)
            self.plan.grew()
        return known[1]

    def first_page_size(self, under: Sequence[str] = ()) -> int | None:
        """`first` of a `students` field selected, from the start, here (or at the end of
        `under`): its roster's first page can ride with its node's read. Only a forward
        first page: a backward page (`last`, `before`) reads the partition from its other
        end, one Query of its own."""
        key = tuple(under)
        if key in self._first:
            return self._first[key]
        found: int | None = None
        for field in self.fields(under):
            if field.name.value != ROSTER_FIELD:
                continue
            args = {a.name.value: self._value(a.value) for a in field.arguments or ()}
            if any(args.get(name) is not None for name in ("after", "last", "before")):
                continue
            first = args.get("first", DEFAULT_FIRST)
            if first is None:
                first = DEFAULT_FIRST  # `first: null` means the default
            if type(first) is int and 1 <= first <= MAX_FIRST:
                found = first  # out of range: the field itself says BAD_USER_INPUT
                break
        self._first[key] = found
        self.plan.grew()
        return found

    def footprint(self) -> int:
        """The bytes of the level and its memos (`OperationPlan.footprint`)."""
        size = _owned(self) + sum(getsizeof(k) + getsizeof(v) for k, v in self._fields.items())
        size += sum(map(getsizeof, self._first))
        return size + (getsizeof(self._read[1]) if self._read is not None else 0)

    def _value(self, node: ValueNode) -> Any:
        if isinstance(node, VariableNode):
            return self.plan.variables.get(node.name.value)
        if isinstance(node, NullValueNode):
            return None
        if isinstance(node, IntValueNode):
            return int(node.value)
        return getattr(node, "value", node)


def _collect(
    plan: OperationPlan, nodes: Sequence[FieldNode] | None, type_: GraphQLNamedType | None
) -> list[FieldNode]:
    """The fields `nodes` select (None: the root's) on an object of `type_`, or of any of
    its possible types (an interface, a union), each field node once."""
    if isinstance(type_, GraphQLObjectType):
        return plan.collect(type_, nodes)
    if type_ is None or not is_abstract_type(type_):
        return []  # a leaf, or a field the schema does not know: nothing under it
    found: dict[int, FieldNode] = {}
    for possible in plan.schema.get_possible_types(type_):
        for node in plan.collect(possible, nodes):
            found.setdefault(id(node), node)
    return list(found.values())


# -- planning ----------------------------------------------------------------------------


_plans = cache.Plans()  # by schema and document, then `plan_key`


def plan_for(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
) -> OperationPlan | None:
    """The operation's plan for these variables (None: no single operation, or variables
    execution refuses: it says why, before any resolver runs)."""
    walked = walk.walked(schema, document)
    operation = walked.operation(operation_name)
    if operation is None or operation.formula is None:
        return None
    given = dict(variables or {})
    values = pricing.coerced(schema, operation.node.variable_definitions or (), given)
    if values is None:
        return None
    read = plan_values(operation, values)
    key = (operation_name, tuple(read.values()))
    known = _plans.get(schema, document, key)
    if known is not None:
        return known
    cost = Cost(pricing.price(operation, values), walked.visited)
    kept = {name: value for (name, use), value in read.items() if use != "ids"}
    plan = OperationPlan(schema, walked, operation, cost, kept)
    return _plans.put(schema, document, key, plan)


CURSOR = "a cursor"  # what a plan keeps of an `after`/`before` given: that one was, not which


def plan_values(operation: walk.Operation, values: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    """What the plan reads of each plan variable (by variable and use), all a plan is kept
    by: the operation's cost and reads are the same for any two values that agree here.

    - `first`/`last`: the value in 0..MAX_FIRST, or one value below that range and one
      above it (the cost counts 0 and MAX_FIRST; the field refuses either);
    - `ids`: the list's length, up to MAX_IDS + 1 (the cost counts at most MAX_IDS; the field
      refuses more);
    - `after`/`before`: whether one was given (`CURSOR`), never the caller's cursor;
    - `@skip`/`@include`'s `if`: the boolean.
    """
    read: dict[tuple[str, str], Any] = {}
    for name, use in operation.plan_variables:
        value = values.get(name)
        if use == "ids":
            value = min(len(value), MAX_IDS + 1) if isinstance(value, list) else None
        elif use in ("after", "before"):
            value = None if value is None else CURSOR
        elif use in ("first", "last"):
            if type(value) is not int:
                value = None
            elif not 0 <= value <= MAX_FIRST:
                value = -1 if value < 0 else MAX_FIRST + 1
        elif type(value) is not bool:  # another directive's argument: not read
            value = None
        read[(name, use)] = value
    return read
