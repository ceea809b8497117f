"""Per-request DataLoaders: the three request shapes every field resolves through.

- `item`: items by primary key, one BatchGetItem wave for all keys asked in a loop turn.
- `partition`: a whole base-table partition (a node and the edges it owns), one Query each,
  all partitions of a wave concurrently; a partition is never queried twice in a request.
- `page`: a page of a GSI1 range (inverse edges, catalogs, locations), one Query each.

Loaders are made per request (`graph/context.py`): their caches are the request's view of
the table. `naive=True` turns batching and caching off, for the benchmark's comparison.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from strawberry.dataloader import DataLoader

from graph_api.keys import HOME_SK, PK, SK, Key, Range
from graph_api.store.codec import Item
from graph_api.store.table import Table

StartKey = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class PageRequest:
    """The first `count` items of `range` after `start` (an ExclusiveStartKey)."""

    range: Range
    count: int
    start: StartKey | None = None


def start_key(key: dict[str, str] | None) -> StartKey | None:
    return tuple(sorted(key.items())) if key else None


class Loaders:
    def __init__(self, table: Table, *, naive: bool = False) -> None:
        self.table = table
        self.naive = naive
        self.consistent = False
        cache, batch = (False, 1) if naive else (True, None)
        self.item: DataLoader[Key, Item | None] = DataLoader(
            self._get_one if naive else self._get_items, cache=cache, max_batch_size=batch
        )
        self.partition: DataLoader[str, list[Item]] = DataLoader(
            self._query_partitions, cache=cache, max_batch_size=batch
        )
        self.page: DataLoader[PageRequest, list[Item]] = DataLoader(
            self._query_pages, cache=cache, max_batch_size=batch
        )

    def after_write(self) -> None:
        """Forget what this request read and read the base table strongly from now on.

        A mutation's result must show its own write; GSI1 pages stay eventually consistent
        (DynamoDB offers nothing else on a GSI).
        """
        self.consistent = True
        for loader in (self.item, self.partition, self.page):
            loader.clear_all()

    async def _get_items(self, keys: list[Key]) -> list[Item | None]:
        found = await self.table.get_many(keys, consistent=self.consistent)
        return [found.get(key) for key in keys]

    async def _get_one(self, keys: list[Key]) -> list[Item | None]:
        return [await self.table.get(key, consistent=self.consistent) for key in keys]

    async def _query_partitions(self, pks: list[str]) -> Sequence[list[Item] | BaseException]:
        results = await asyncio.gather(
            *(self.table.query_all(Range(None, pk, ""), consistent=self.consistent) for pk in pks),
            return_exceptions=True,
        )
        if not self.naive:
            for result in results:
                if isinstance(result, list):
                    self._prime(result)
        return results

    def _prime(self, items: list[Item]) -> None:
        # A partition holds its node and home items: later loads of them cost nothing.
        for item in items:
            if item[SK] == item[PK] or item[SK] == HOME_SK:
                self.item.prime(Key(item[PK], item[SK]), item)

    async def _query_pages(
        self, requests: list[PageRequest]
    ) -> Sequence[list[Item] | BaseException]:
        # Requests that differ only in size share one Query of the largest size.
        largest: dict[tuple[Range, StartKey | None], int] = defaultdict(int)
        for request in requests:
            group = (request.range, request.start)
            largest[group] = max(largest[group], request.count)
        groups = list(largest)
        pages = await asyncio.gather(
            *(
                self.table.query_at_least(
                    rng, largest[(rng, start)], dict(start) if start else None
                )
                for rng, start in groups
            ),
            return_exceptions=True,
        )
        by_group = dict(zip(groups, pages, strict=True))
        results: list[list[Item] | BaseException] = []
        for request in requests:
            page = by_group[(request.range, request.start)]
            results.append(page if isinstance(page, BaseException) else page[: request.count])
        return results
