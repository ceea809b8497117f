"""One transaction in flight per item within a process: writers of one item queue here
instead of colliding at DynamoDB.

DynamoDB holds every item of a `TransactWriteItems` until it commits (10-25 ms), and
cancels another transaction that touches one of them (`TransactionConflict`). Sixteen
writers of one class (its roster count) or one city (its counters) would mostly cancel each
other and retry; here they wait in line, so the process sends one transaction per item at a
time and only other instances' writes meet at DynamoDB (where `store/retry.py` retries
them).

`ItemLocks.holding(keys, wait)` takes an `asyncio.Lock` per key, in sorted order (two writers that
share keys take them in the same order, so none waits for the other in a cycle), and gives
them back when the block ends, however it ends. An entry lives only while a writer holds or
waits for it: the table holds at most (transactions in flight or waiting) x 100 keys, and
requests in flight are bounded (`max_concurrency`). Locks belong to an event loop, so each
loop has a table of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Hashable, Iterable
from typing import Any


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0  # writers holding or waiting for the lock


class ItemLocks:
    """Per-item locks of one process (a `Dynamo`'s), one table per event loop."""

    def __init__(self) -> None:
        self._tables: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, _Entry]] = (
            weakref.WeakKeyDictionary()
        )

    def _table(self) -> dict[Any, _Entry]:
        loop = asyncio.get_running_loop()
        table = self._tables.get(loop)
        if table is None:
            table = self._tables[loop] = {}
        return table

    def held(self) -> int:
        """Entries of the running loop's table (held or waited for)."""
        return len(self._table())

    @contextlib.asynccontextmanager
    async def holding(
        self, keys: Iterable[Hashable], wait: float | None = None
    ) -> AsyncIterator[None]:
        """Hold every key's lock for the block, waiting for other writers of them first (at
        most `wait` seconds: TimeoutError). Keys must sort among themselves. A caller that
        stops waiting (its deadline, a cancel) leaves the line cleanly."""
        table = self._table()
        joined: list[tuple[Hashable, _Entry]] = []
        acquired: list[_Entry] = []
        try:
            async with asyncio.timeout(wait):
                for key in sorted(set(keys)):  # type: ignore[type-var]  # sortable: above
                    entry = table.get(key)
                    if entry is None:
                        entry = table[key] = _Entry()
                    entry.users += 1
                    joined.append((key, entry))
                    await entry.lock.acquire()
                    acquired.append(entry)
            yield
        finally:
            for entry in acquired:
                entry.lock.release()
            for key, entry in joined:
                entry.users -= 1
                if entry.users == 0 and table.get(key) is entry:
                    del table[key]
