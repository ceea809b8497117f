"""Per-request DataLoaders: the three request shapes every field resolves through.

- `item`: items by primary key, one BatchGetItem wave for all keys asked in a loop turn;
  whole, or only the attributes a page's nodes will read (`ItemLoader.load_parts`).
- `page`: a page of a range (a roster in its node's partition; a catalog or a location in
  GSI1), one Query each, all pages of a wave concurrently.

Bounded relations (a student's classes and sports, a teacher's classes) are maps on their
owner's item: they cost no request of their own.

Loaders are made per request (`graph/engine/context.py`): their caches are the request's view of
the table. `naive=True` turns batching and caching off, for the benchmark's comparison.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from strawberry.dataloader import AbstractCache, DataLoader

from graph_api.model.keys import Key, Kind, Range
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
    (bench/README.md). Keys spread over batches (one already in flight for another
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


def expect(loader: DataLoader[K, V], key: K) -> asyncio.Future[V] | None:
    """A future put in the loader's cache for `key`, which the caller settles with what
    another request read (`prefetch.start_partitions`): the key's loads wait for it instead
    of reading it. None when the key is cached or waiting for a batch already."""
    if not loader.cache or loader.cache_map.get(key) is not None:
        return None
    batch = loader.batch
    if batch is not None and not batch.dispatched and any(t.key == key for t in batch.tasks):
        return None
    future: asyncio.Future[V] = loader.loop.create_future()
    loader.cache_map.set(key, future)
    return future


class Read(NamedTuple):
    """An item asked for: whole (`attributes` None), or only those of its attributes."""

    key: Key
    attributes: frozenset[str] | None


class _ItemCache(AbstractCache[Read, Item | None]):
    """The item loader's cache: a read is answered by an earlier one of the same key that
    asked for at least its attributes (a whole item answers any), or that found nothing
    (an absent item has no attributes to read). A whole read is not answered by a part."""

    def __init__(self) -> None:
        self._reads: dict[Key, list[tuple[frozenset[str] | None, asyncio.Future[Item | None]]]]
        self._reads = {}

    def get(self, key: Read) -> asyncio.Future[Item | None] | None:
        wanted = key.attributes
        for attributes, future in self._reads.get(key.key, ()):
            if attributes is None or (wanted is not None and wanted <= attributes):
                return future
            if _found_nothing(future):
                return future
        return None

    def set(self, key: Read, value: asyncio.Future[Item | None]) -> None:
        self._reads.setdefault(key.key, []).append((key.attributes, value))

    def delete(self, key: Read) -> None:
        reads = self._reads.get(key.key, [])
        reads[:] = [read for read in reads if read[0] != key.attributes]

    def clear(self) -> None:
        self._reads.clear()


def _found_nothing(future: asyncio.Future[Item | None]) -> bool:
    return (
        future.done()
        and not future.cancelled()
        and future.exception() is None
        and future.result() is None
    )


class ItemLoader:
    """Items by key for one request: every read of a loop turn in one BatchGetItem wave
    (100 keys a call), each key read once. `load_parts` asks for some attributes only: the
    wave then reads the union of what its reads ask, or whole items if any asks for one."""

    def __init__(self, reads: _Reads, *, naive: bool = False) -> None:
        if naive:  # one GetItem a key, nothing kept: whole items answer any read
            self._loader = _Loader(reads.get_one, cache=False, max_batch_size=1)
        else:
            self._loader = _Loader(reads.get_items, cache_map=_ItemCache())

    def load(self, key: Key) -> Awaitable[Item | None]:
        return self._loader.load(Read(key, None))

    def load_many(self, keys: Iterable[Key]) -> Awaitable[list[Item | None]]:
        return self.load_each((key, None) for key in keys)

    def load_parts(
        self, keys: Iterable[Key], attributes: frozenset[str]
    ) -> Awaitable[list[Item | None]]:
        """The items of `keys`, with at least `attributes` of each, if it has them (a part:
        an attribute it lacks is not in it, and neither are those not asked for)."""
        return self.load_each((key, attributes) for key in keys)

    def load_each(
        self, reads: Iterable[tuple[Key, frozenset[str] | None]]
    ) -> Awaitable[list[Item | None]]:
        """The items of keys, each whole (None) or with at least its own attributes."""
        loader = self._loader
        return _each([loader.load(Read(key, attributes)) for key, attributes in reads])

    def load_part(self, key: Key, attributes: frozenset[str]) -> Awaitable[Item | None]:
        """`load_parts` of one key."""
        return self._loader.load(Read(key, attributes))

    def expect(self, key: Key) -> asyncio.Future[Item | None] | None:
        """`expect` of a whole read of `key`: it answers any read of the key."""
        return expect(self._loader, Read(key, None))

    def prime(self, key: Key, item: Item | None) -> None:
        """`key`'s whole item, read by another request shape: it answers any read of the key,
        those already waiting for this turn's wave too."""
        whole = Read(key, None)
        data = {whole: item}
        batch = self._loader.batch
        if batch is not None and not batch.dispatched:
            data.update((task.key, item) for task in batch.tasks if task.key.key == key)
        self._loader.prime_many(data)

    def clear_all(self) -> None:
        self._loader.clear_all()


class Loaders:
    def __init__(self, table: Table, *, naive: bool = False) -> None:
        self.naive = naive
        self._reads = reads = _Reads(table)
        cache, batch = (False, 1) if naive else (True, None)
        self.item = ItemLoader(reads, naive=naive)
        # What the request's reads of each kind's items ask for (None: whole items), set by
        # the schema's nodes once they know the operation (`graph.types.nodes.parts_of`): one set
        # a kind, so that the first read of a key answers every later one.
        self.parts: dict[Kind, frozenset[str] | None] | None = None
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

    async def get_items(self, reads: list[Read]) -> list[Item | None]:
        attributes: frozenset[str] | None = frozenset()
        for read in reads:
            if read.attributes is None:
                attributes = None
                break
            attributes |= read.attributes  # type: ignore[operator]
        keys = [read.key for read in reads]
        found = await self.table.get_many(keys, consistent=self.consistent, attributes=attributes)
        return [found.get(key) for key in keys]

    async def get_one(self, reads: list[Read]) -> list[Item | None]:
        return [await self.table.get(read.key, consistent=self.consistent) for read in reads]

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
