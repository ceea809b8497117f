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
allows one (`tests/graph/engine/test_request_counts.py`); where it is safe, it saved too
little to keep (bench/README.md).

Which roster page rides with which read, which fields a page's nodes will resolve
(`nodes.with_items`) and which attributes the reads of each node type's items ask for
(`nodes.parts_of`) are the operation's plan's to say (`graph/engine/plan/`): the functions below
read it, for the resolver's own field.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from graphql import FieldNode

from graph_api.graph.engine.context import Info
from graph_api.graph.engine.plan.operation import NODES, Level, OperationPlan, Parts
from graph_api.model import keys
from graph_api.model.keys import PK, SK, Key, Kind, Range
from graph_api.store.codec import Item
from graph_api.store.loaders import Loaders, PageRequest, expect

__all__ = ["NODES", "Parts"]


class NoPlan(RuntimeError):
    """A resolver ran with no operation plan on its request's context: the schema runs
    without the cost limit (`cost.CostLimit`), which makes every plan. A server error."""


def plan_of(info: Info) -> OperationPlan:
    """The operation's plan, which the cost limit put on the request's context."""
    plan = info.context.plan
    if plan is None:
        raise NoPlan("no operation plan on the request's context: is cost.CostLimit installed?")
    return plan


def level(info: Info) -> Level:
    """What the plan says of the resolver's own field (by its response path)."""
    plan = info.context.plan
    return (plan if plan is not None else plan_of(info)).level(info.path)


def selected(info: Info, under: Sequence[str] = ()) -> list[FieldNode]:
    """The fields selected under this field (fragments flattened), or at the end of the path
    `under` (`NODES`: the fields of a connection's nodes), as the plan collected them."""
    return level(info).fields(under)


def reads(info: Info, attributes: Mapping[str, str]) -> frozenset[str]:
    """The item attributes that the fields selected on this connection's nodes read
    (`attributes`: the node type's field -> attribute)."""
    plan = info.context.plan  # `level(info)`, inline: once a node of a list
    return (plan if plan is not None else plan_of(info)).level(info.path).reads(attributes)


def operation_parts(info: Info, tables: Mapping[str, Mapping[str, tuple[str, ...]]]) -> Parts:
    """For each type of `tables`, what the request's reads of its items ask for
    (`OperationPlan.parts`)."""
    return plan_of(info).parts(tables)


def first_page_size(info: Info, under: Sequence[str] = ()) -> int | None:
    """`first` of a `students` field selected, from the start, under this field (or at the
    end of `under`) whose page can ride with its node's read (`Level.first_page_size`)."""
    return level(info).first_page_size(under)


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
