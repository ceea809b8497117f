"""Per-request DataLoaders: the three request shapes every field resolves through.

- `item`: items by primary key, one BatchGetItem wave for all keys asked in a loop turn.
- `page`: a page of a range (a roster in its node's partition; a catalog or a location in
  GSI1), one Query each, all pages of a wave concurrently.

Bounded relations (a student's classes and sports, a teacher's classes) are maps on their
owner's item: they cost no request of their own.

Loaders are made per request (`graph/context.py`): their caches are the request's view of
the table. `naive=True` turns batching and caching off, for the benchmark's comparison.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from strawberry.dataloader import DataLoader

from graph_api.model.keys import Key, Range
from graph_api.store.codec import Item
from graph_api.store.table import Table

StartKey = tuple[tuple[str, str], ...]
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class PageRequest:
    """The first `count` items of `range` after `start` (an ExclusiveStartKey); with
    `forward` false, the last `count` before it, last first (`ScanIndexForward: false`)."""

    range: Range
    count: int
    start: StartKey | None = None
    forward: bool = True


def start_key(key: dict[str, str] | None) -> StartKey | None:
    return tuple(sorted(key.items())) if key else None


class _Loader(DataLoader[K, V]):
    """Strawberry's DataLoader, whose `load_many` awaits its futures one after another
    instead of gathering them: they settle together (one batch, or the cache), so only the
    first wait suspends, and `gather`'s wrapper future and a callback per key are saved
    (30 keys: about 20 µs). Keys spread over batches (one already in flight for another
    field) fail with the first failure in key order, not in time."""

    def load_many(self, keys: Iterable[K]) -> Awaitable[list[V]]:
        return _each([self.load(key) for key in keys])


async def _each(futures: list[Awaitable[V]]) -> list[V]:
    try:
        return [await future for future in futures]
    except BaseException:
        # As `gather` does: every future's error is retrieved, now or when it settles, so
        # none is logged as "never retrieved" when the request's cache is dropped.
        for future in futures:
            if isinstance(future, asyncio.Future):
                future.add_done_callback(_retrieve)
        raise


def _retrieve(future: asyncio.Future[object]) -> None:
    if not future.cancelled():
        future.exception()


class Loaders:
    def __init__(self, table: Table, *, naive: bool = False) -> None:
        self.naive = naive
        self._reads = reads = _Reads(table)
        cache, batch = (False, 1) if naive else (True, None)
        self.item: DataLoader[Key, Item | None] = _Loader(
            reads.get_one if naive else reads.get_items, cache=cache, max_batch_size=batch
        )
        self.page: DataLoader[PageRequest, list[Item]] = _Loader(
            reads.query_pages, cache=cache, max_batch_size=batch
        )

    @property
    def consistent(self) -> bool:
        """Whether the base table is read strongly consistent (`after_write`)."""
        return self._reads.consistent

    @consistent.setter
    def consistent(self, value: bool) -> None:
        self._reads.consistent = value

    def after_write(self) -> None:
        """Forget what this request read and read the base table strongly from now on.

        A mutation's result must show its own write; GSI1 pages stay eventually consistent
        (DynamoDB offers nothing else on a GSI).
        """
        self.consistent = True
        for loader in (self.item, self.page):
            loader.clear_all()


class _Reads:
    """The loaders' batch functions, on an object of their own: a DataLoader holding a
    method of `Loaders` would make each request's loaders a reference cycle, whose items
    only the garbage collector frees, not the request's end."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.consistent = False

    async def get_items(self, keys: list[Key]) -> list[Item | None]:
        found = await self.table.get_many(keys, consistent=self.consistent)
        return [found.get(key) for key in keys]

    async def get_one(self, keys: list[Key]) -> list[Item | None]:
        return [await self.table.get(key, consistent=self.consistent) for key in keys]

    async def query_pages(
        self, requests: list[PageRequest]
    ) -> Sequence[list[Item] | BaseException]:
        # Requests that differ only in size share one Query of the largest size.
        largest: dict[tuple[Range, StartKey | None, bool], int] = defaultdict(int)
        for request in requests:
            group = (request.range, request.start, request.forward)
            largest[group] = max(largest[group], request.count)
        groups = list(largest)
        pages = await asyncio.gather(
            *(
                self.table.query_at_least(
                    rng,
                    largest[(rng, start, forward)],
                    dict(start) if start else None,
                    forward=forward,
                )
                for rng, start, forward in groups
            ),
            return_exceptions=True,
        )
        by_group = dict(zip(groups, pages, strict=True))
        results: list[list[Item] | BaseException] = []
        for request in requests:
            page = by_group[(request.range, request.start, request.forward)]
            results.append(page if isinstance(page, BaseException) else page[: request.count])
        return results
