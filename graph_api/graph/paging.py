"""Relay connections over key ranges, with exact `hasNextPage` and HMAC'd cursors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

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


async def from_partition(
    info: Info,
    field: str,
    rng: Range,
    first: int | None,
    after: str | None,
    to_node: Callable[[Item], T],
) -> Connection[T]:
    """A page of edges held in one base-table partition, which is read whole once a request.

    Partitions owned by a node (a student's classes and sports, a teacher's classes) are
    small, so one Query serves every field that reads them.
    """
    count = check_first(first)
    start = _after(info, field, rng, after)
    items = await info.context.loaders.partition.load(rng.pk)
    after_sk = start[SK] if start else ""
    selected = [i for i in items if i[SK].startswith(rng.prefix) and i[SK] > after_sk]
    return _connection(info, field, rng, selected[: count + 1], count, to_node)


async def from_range(
    info: Info,
    field: str,
    rng: Range,
    first: int | None,
    after: str | None,
    to_node: Callable[[Item], T],
) -> Connection[T]:
    """A page of a GSI1 range (unbounded: a class's students, a catalog, a city)."""
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
    return Connection(
        edges=edges,
        page_info=PageInfo(
            has_next_page=len(items) > first, end_cursor=edges[-1].cursor if edges else None
        ),
    )
