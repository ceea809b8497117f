"""Relay connections over key ranges, with exact `hasNextPage` and HMAC'd cursors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import strawberry

from graph_api.cursors import Cursors
from graph_api.errors import BadUserInput
from graph_api.graph.context import Info
from graph_api.keys import SK, Range
from graph_api.store.codec import Item
from graph_api.store.loaders import Loaders, PageRequest, start_key
from graph_api.store.table import key_names

T = TypeVar("T")
DEFAULT_FIRST = 20
MAX_FIRST = 100


@dataclass(frozen=True, slots=True)
class CursorOf:
    """What the cursors of one page are bound to: the field and the range it walks."""

    cursors: Cursors
    field: str
    rng: Range

    def encode(self, key: Mapping[str, str]) -> str:
        return self.cursors.encode(self.field, self.rng, key)


def _cursor(root: Edge[Any]) -> str:
    return root.page.encode(root.key)


@strawberry.type
class Edge(Generic[T]):
    # Encoded (an HMAC) only when `cursor` is selected, not for every edge of every page.
    cursor: str = strawberry.field(resolver=_cursor)
    node: T
    page: strawberry.Private[CursorOf]
    key: strawberry.Private[Mapping[str, str]]


@strawberry.type
class PageInfo:
    has_next_page: bool
    last: strawberry.Private[Edge[Any] | None]

    @strawberry.field
    def end_cursor(self) -> str | None:
        return self.last.page.encode(self.last.key) if self.last else None


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


def from_map(
    info: Info,
    field: str,
    rng: Range,
    first: int | None,
    after: str | None,
    entries: Mapping[str, Mapping[str, Any]],
    to_node: Callable[[str, Mapping[str, Any], Loaders], T],
) -> Connection[T]:
    """A page of a bounded relation carried on its owner's item as a map keyed by id (a
    student's classes and sports, a teacher's classes): no request beyond the owner's item.

    Entries are ordered by id, and a cursor is the entry's position in `rng` (its `SK`), so
    cursors look and check like the cursors of a range read from the table.
    """
    count = check_first(first)
    ids = sorted(entries)  # the order of their positions: one prefix, then the id
    start = _after(info, field, rng, after)
    if start:
        ids = [id_ for id_ in ids if rng.at(id_).sk > start[SK]]
    context = info.context
    page = CursorOf(context.cursors, field, rng)
    loaders = context.loaders
    edges = [
        Edge(node=to_node(id_, entries[id_], loaders), page=page, key=rng.at(id_).as_item())
        for id_ in ids[:count]
    ]
    return _page(edges, len(ids) > count)


async def from_range(
    info: Info,
    field: str,
    rng: Range,
    first: int | None,
    after: str | None,
    to_node: Callable[[Item, Loaders], T],
) -> Connection[T]:
    """A page of a range (unbounded: a class's students, a catalog, a city)."""
    count = check_first(first)
    start = _after(info, field, rng, after)
    # One item more than asked tells whether a next page exists, without an empty page.
    request = PageRequest(rng, count + 1, start_key(start))
    loaders = info.context.loaders
    items = await loaders.page.load(request)
    page = CursorOf(info.context.cursors, field, rng)
    names = key_names(rng.index)
    edges = [
        Edge(node=to_node(item, loaders), page=page, key={n: item[n] for n in names})
        for item in items[:count]
    ]
    return _page(edges, len(items) > count)


def _page(edges: list[Edge[T]], more: bool) -> Connection[T]:
    last = edges[-1] if edges else None
    return Connection(edges=edges, page_info=PageInfo(has_next_page=more, last=last))
