"""Relay connections over key ranges, with exact `hasNextPage` and HMAC'd cursors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import strawberry

from graph_api.errors import BadUserInput
from graph_api.graph.context import Info
from graph_api.keys import SK, Range
from graph_api.store.codec import Item
from graph_api.store.loaders import PageRequest, start_key
from graph_api.store.table import key_names

T = TypeVar("T")
DEFAULT_FIRST = 20
MAX_FIRST = 100


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


@strawberry.type
class Edge(Generic[T]):
    cursor: str
    node: T


@strawberry.type
class Connection(Generic[T]):
    edges: list[Edge[T]]
    page_info: PageInfo


def check_first(first: int | None) -> int:
    """`first` as given, or the default when null; BAD_USER_INPUT outside 1..100."""
    if first is None:
        return DEFAULT_FIRST
    if not 1 <= first <= MAX_FIRST:
        raise BadUserInput(f"first must be between 1 and {MAX_FIRST}", field="first")
    return first


def _after(info: Info, field: str, rng: Range, after: str | None) -> dict[str, str] | None:
    return None if after is None else info.context.cursors.decode(after, field, rng)


async def from_map(
    info: Info,
    field: str,
    rng: Range,
    first: int | None,
    after: str | None,
    entries: Mapping[str, Mapping[str, Any]],
    to_node: Callable[[str, Mapping[str, Any]], T],
) -> Connection[T]:
    """A page of a bounded relation carried on its owner's item as a map keyed by id (a
    student's classes and sports, a teacher's classes): no request beyond the owner's item.

    Entries are ordered by id, and a cursor is the entry's position in `rng` (its `SK`), so
    cursors look and check like the cursors of a range read from the table.
    """
    count = check_first(first)
    start = _after(info, field, rng, after)
    after_sk = start[SK] if start else ""
    positions = ((rng.at(id_).as_item(), id_) for id_ in sorted(entries))  # SK order
    selected = [(key, id_) for key, id_ in positions if key[SK] > after_sk][: count + 1]
    cursors = info.context.cursors
    edges = [
        Edge(cursor=cursors.encode(field, rng, key), node=to_node(id_, entries[id_]))
        for key, id_ in selected[:count]
    ]
    return _page(edges, len(selected) > count)


async def from_range(
    info: Info,
    field: str,
    rng: Range,
    first: int | None,
    after: str | None,
    to_node: Callable[[Item], T],
) -> Connection[T]:
    """A page of a range (unbounded: a class's students, a catalog, a city)."""
    count = check_first(first)
    start = _after(info, field, rng, after)
    # One item more than asked tells whether a next page exists, without an empty page.
    request = PageRequest(rng, count + 1, start_key(start))
    items = await info.context.loaders.page.load(request)
    return _connection(info, field, rng, items, count, to_node)


def _connection(
    info: Info,
    field: str,
    rng: Range,
    items: list[Item],
    first: int,
    to_node: Callable[[Item], T],
) -> Connection[T]:
    names = key_names(rng.index)
    cursors = info.context.cursors
    edges = [
        Edge(cursor=cursors.encode(field, rng, {n: item[n] for n in names}), node=to_node(item))
        for item in items[:first]
    ]
    return _page(edges, len(items) > first)


def _page(edges: list[Edge[T]], more: bool) -> Connection[T]:
    end_cursor = edges[-1].cursor if edges else None
    return Connection(edges=edges, page_info=PageInfo(has_next_page=more, end_cursor=end_cursor))
