"""A node and its roster in one request: `class(id) { students }` is one Query.

A class's or a sport's partition holds the node item and, after it in key order, the edge
items of its roster (`schema/table.md`). When the selection under `class(id)` or `sport(id)`
asks for the first page of `students`, the root field reads the node and that page with one
Query of the partition and primes the request's loaders with both, so the `students` field
finds its page already read instead of sending a second request after the first.

A teacher's classes do the same, each class with one Query: the level that would have sent
one BatchGetItem for the classes' items (`studentCount`) beside a roster Query a class sends
the Queries alone, all at once (`start_partitions`). Until its Query answers, a class's item
and roster page wait in the loaders' caches as futures. The page loader answers a wave's
Queries together, once the slowest has, so the classes complete together and what their
fields read next (their students' items) leaves in one BatchGetItem, not one a class.

A roster page's students' items are not read as soon as the partition answers, ahead of
the level's other fields: that BatchGetItem would leave without what a sibling field (a
class's `teacher { version }`) asks in the same level, a second request where the formula
allows one (`tests/test_request_counts.py`). Tried on Q4 of `make bench` alone, where it
is safe, it left 0.15 ms sooner on DynamoDB Local but answered at most 0.1 ms sooner.

`selected` tells a page which fields its nodes will resolve (`nodes.with_items`), and
`operation_parts` which attributes the reads of each node type's items ask for
(`nodes.parts_of`).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    ListValueNode,
    ObjectValueNode,
    SelectionSetNode,
    TypeInfo,
    TypeInfoVisitor,
    ValueNode,
    VariableNode,
    Visitor,
    is_abstract_type,
    visit,
)

from graph_api.graph.context import Info
from graph_api.graph.document import KeptBy
from graph_api.graph.paging import DEFAULT_FIRST, MAX_FIRST
from graph_api.internals import raw_info
from graph_api.model import keys
from graph_api.model.keys import PK, SK, Key, Kind, Range
from graph_api.store.codec import Item
from graph_api.store.loaders import Loaders, PageRequest, expect

ROSTER_FIELD = "students"


# `raw`: graphql-core's resolve info under Strawberry's `Info` (`internals.raw_info`).


def _fields(raw: Any, selection_set: SelectionSetNode | None) -> Iterator[FieldNode]:
    """The fields of a selection set, its fragments' fields as its own (directives are not
    read: a field under `@skip` counts, which at worst reads an item it did not need)."""
    for selection in selection_set.selections if selection_set else ():
        if isinstance(selection, FieldNode):
            yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from _fields(raw, selection.selection_set)
        elif isinstance(selection, FragmentSpreadNode):
            fragment = raw.fragments.get(selection.name.value)  # unknown: validation says so
            if fragment is not None:
                yield from _fields(raw, fragment.selection_set)


def _value(raw: Any, node: ValueNode) -> Any:
    """An argument's value as Strawberry's `selected_fields` gives it: a variable's value, a
    literal as its token's text (`"50"`), null as None."""
    if isinstance(node, VariableNode):  # graphql-core's own executor: its container's
        variables = getattr(raw.variable_values, "coerced", raw.variable_values)
        return variables.get(node.name.value)
    if isinstance(node, ListValueNode):
        return [_value(raw, value) for value in node.values]
    if isinstance(node, ObjectValueNode):
        return {field.name.value: _value(raw, field.value) for field in node.fields}
    return getattr(node, "value", None)


def arguments(info: Info, field: FieldNode) -> dict[str, Any]:
    """A selected field's arguments (`_value`)."""
    raw = raw_info(info)
    return {a.name.value: _value(raw, a.value) for a in field.arguments or ()}


def _as_int(value: Any) -> int | None:
    """An argument as Strawberry hands it over: a literal comes as the token's text
    (`"50"`), a variable as its value, an omitted argument as the default."""
    if value is None:
        return DEFAULT_FIRST  # `first: null` means the default
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


NODES = ("edges", "node")  # the path from a connection field to its nodes' fields


def selected(info: Info, under: Sequence[str] = ()) -> list[FieldNode]:
    """The fields selected under this field (fragments flattened), or at the end of the
    path `under` (`NODES`: the fields of a connection's nodes).

    Read off the document, only as deep as asked (Strawberry's `selected_fields` converts
    the whole tree below the field, with every argument), and once per operation for each
    field of the document: a list of 30 students asks it of each student's `classes`.
    """
    raw = raw_info(info)
    key = (*map(id, raw.field_nodes), *under)
    memo = info.context.selections
    level: list[FieldNode] | None = memo.get(key)
    if level is None:
        level = [field for root in raw.field_nodes for field in _fields(raw, root.selection_set)]
        for name in under:
            level = [
                child
                for field in level
                if field.name.value == name
                for child in _fields(raw, field.selection_set)
            ]
        memo[key] = level
    return level


def reads(info: Info, attributes: Mapping[str, str]) -> frozenset[str]:
    """The item attributes that the fields selected on this connection's nodes read
    (`attributes`: the node type's field -> attribute), once per operation for each field of
    the document, as `selected` is."""
    key = ("reads", *map(id, raw_info(info).field_nodes))
    memo = info.context.selections
    wanted: frozenset[str] | None = memo.get(key)
    if wanted is None:
        names = (field.name.value for field in selected(info, NODES))
        wanted = frozenset(attributes[name] for name in names if name in attributes)
        memo[key] = wanted
    return wanted


Parts = dict[str, frozenset[str] | None]  # GraphQL type → what reads of its items ask for

_parts: KeptBy[Parts] = KeptBy()  # by operation


def operation_parts(info: Info, tables: Mapping[str, Mapping[str, tuple[str, ...]]]) -> Parts:
    """For each type of `tables` (GraphQL type → `NodeBase.field_attributes`), the item
    attributes that its fields selected anywhere in the operation (its fragments included)
    may read, or None when one of them is not named there: every read of such an item in
    the request asks for that one set, so that one read of a key answers all the others."""
    raw = raw_info(info)
    operation = raw.operation
    known = _parts.get((operation,))
    if known is not None:
        return known
    schema = raw.schema
    selected_on: dict[str, set[str]] = defaultdict(set)
    type_info = TypeInfo(schema)

    class Collect(Visitor):
        def enter_field(self, node: FieldNode, *_: Any) -> None:
            parent = type_info.get_parent_type()
            if parent is None:  # not a field of its type: validation said so
                return
            possible = schema.get_possible_types(parent) if is_abstract_type(parent) else [parent]
            for object_type in possible:
                selected_on[object_type.name].add(node.name.value)

    for definition in (operation, *raw.fragments.values()):
        visit(definition, TypeInfoVisitor(type_info, Collect()))
    parts: Parts = {}
    for type_name, table in tables.items():
        attributes: set[str] | None = set()
        for name in selected_on.get(type_name, ()):
            if name in table:
                attributes.update(table[name])  # type: ignore[union-attr]
            elif not name.startswith("__"):  # __typename reads nothing
                attributes = None
                break
        parts[type_name] = frozenset(attributes) if attributes is not None else None
    return _parts.put((operation,), parts)


def first_page_size(info: Info, under: Sequence[str] = ()) -> int | None:
    """`first` of a `students` field selected, from the start, under this field (or at the
    end of `under`, as `selected` reads it).

    Only a forward first page: a backward page (`last`, `before`) reads the partition from
    its other end, one Query of its own.
    """
    for field in selected(info, under):
        if field.name.value != ROSTER_FIELD:
            continue
        args = arguments(info, field)
        if any(args.get(name) is not None for name in ("after", "last", "before")):
            continue
        first = _as_int(args.get("first", DEFAULT_FIRST))
        if first is not None and 1 <= first <= MAX_FIRST:
            return first  # out of range: the field itself says BAD_USER_INPUT
    return None


async def node_with_roster(info: Info, kind: Kind, id_: str) -> Item | None:
    """The node item, read together with its roster's first page when one is selected."""
    loaders = info.context.loaders
    first = first_page_size(info)
    if first is None or loaders.naive:
        return await loaders.item.load(keys.node(kind, id_))
    node, _ = await _read_partition(loaders, kind, id_, first)
    return node


def start_partitions(loaders: Loaders, kind: Kind, ids: Sequence[str], first: int) -> int:
    """Read each node of a page (a teacher's classes) with its roster's first `first` edges,
    one Query a node, all at once and none waited for here; how many Queries that asks for
    (`store.ledger.sent` waits until they have left). Until its Query answers, a node's item and
    its roster's page are futures in the loaders' caches, which its fields wait for. The
    Queries answer together, as one wave of the page loader: what the nodes' fields read next
    leaves in one request, not one a node."""
    if loaders.naive:
        return 0
    asked = 0
    for id_ in ids:
        page = PageRequest(keys.roster(kind, id_, Kind.STUDENT), first + 1)
        node, roster = loaders.item.expect(keys.node(kind, id_)), expect(loaders.page, page)
        shards = [(k, loaders.item.expect(k)) for k in _shards(kind, id_)]
        whole = Range(None, keys.partition(kind, id_), "")
        read = loaders.page.load(PageRequest(whole, first + 2 + len(shards)))
        asked += not read.done()  # type: ignore[attr-defined]
        settle = partial(_settle, loaders, kind, id_, page, node, roster, shards)
        asyncio.ensure_future(read).add_done_callback(settle)
    return asked


def _settle(
    loaders: Loaders,
    kind: Kind,
    id_: str,
    page: PageRequest,
    node: asyncio.Future[Item | None] | None,
    roster: asyncio.Future[list[Item]] | None,
    shards: list[tuple[Key, asyncio.Future[Item | None] | None]],
    read: asyncio.Future[list[Item]],
) -> None:
    """Give what a partition's Query read to the loaders, and to the futures its node's
    fields wait for (`page`: the roster's first page, which `roster` stands for; `shards`: a
    class's roster shards, its `studentCount`)."""
    if read.cancelled() or read.exception() is not None:
        for future in (node, roster, *(f for _, f in shards)):
            if future is not None:
                _copy(read, future)
        return
    item, edges = _primed(loaders, kind, id_, page.count - 1, read.result())
    found = {(i[PK], i[SK]): i for i in read.result()}
    for key, future in shards:
        if future is not None and not future.done():
            future.set_result(found.get(key))
    if node is not None and not node.done():
        node.set_result(item)
    if roster is None or roster.done():
        return
    if item is not None:
        roster.set_result(edges)
        return
    # No node, so no page from its partition (`_primed` primes none): the roster's own Query,
    # if its field is asked for, as without the prefetch.
    loaders.page.cache_map.delete(page)
    asyncio.ensure_future(loaders.page.load(page)).add_done_callback(partial(_copy, target=roster))


def _copy(done: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    """Settle `target` as `done` settled (if nothing settled it first). An error is marked
    retrieved: a field that never awaits `target` logs nothing."""
    if target.done():
        return
    if done.cancelled():
        target.cancel()
    elif (error := done.exception()) is not None:
        target.set_exception(error)
        target.exception()
    else:
        target.set_result(done.result())


async def _read_partition(
    loaders: Loaders, kind: Kind, id_: str, first: int
) -> tuple[Item | None, list[Item]]:
    # The node sorts before its edges (`CLASS#c` < `STUDENT#…`, `SPORT#s` < `STUDENT#…`), a
    # class's roster shards between them: the node, the shards and the page the field asks
    # for (its `first + 1`).
    whole = Range(None, keys.partition(kind, id_), "")
    items = await loaders.page.load(PageRequest(whole, first + 2 + len(_shards(kind, id_))))
    return _primed(loaders, kind, id_, first, items)


def _shards(kind: Kind, id_: str) -> list[Key]:
    """A class's or a sport's roster shards, read with its partition."""
    return keys.roster_shards(kind, id_)


def _primed(
    loaders: Loaders, kind: Kind, id_: str, first: int, items: list[Item]
) -> tuple[Item | None, list[Item]]:
    """The node's item (None: there is none) and its roster's first `first + 1` edges, from
    the Query of its partition, primed in the loaders (a future that `expect` put there
    stays, for `_settle` to settle)."""
    node = items[0] if items and items[0][SK] == items[0][PK] else None
    roster = keys.roster(kind, id_, Kind.STUDENT)
    edges = [i for i in items if i[SK].startswith(roster.prefix)][: first + 1]
    loaders.item.prime(keys.node(kind, id_), node)
    found = {(i[PK], i[SK]): i for i in items}
    for shard in _shards(kind, id_):  # its count: none, one of the layout before
        loaders.item.prime(shard, found.get(shard))
    if node is not None:
        loaders.page.prime(PageRequest(roster, first + 1), edges)
    return node, edges
