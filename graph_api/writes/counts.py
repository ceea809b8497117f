"""The counter updates a write adds to its own transaction: catalogs' and places' totals.

A node moves one shard of each counter it counts toward, the one its id picks
(`items.shards_moved`), so no item takes every write of a kind. A shard moves with `ADD
count :delta, moves :1` and no condition: the update creates the item on its first use, and
the transaction that adds a node to (or takes it from) a catalog or a place is the one that
moves the shard, so the sum of the shards is exact whenever that write committed. `moves`
only grows: `graph-api migrate` sees by it that no write moved a shard while it walked the
list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from graph_api.model import items
from graph_api.model.keys import Key
from graph_api.store import transactions as tx
from graph_api.store.transactions import Action


def _move(key: Key, delta: int) -> Action:
    return tx.update(
        key, assign={items.TYPE: items.COUNTER_TYPE}, add={items.COUNT: delta, items.MOVES: 1}
    )


def moved(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Action]:
    """A node going from `before` to `after` (None: created, or deleted; both are the same
    node, so the same shards): one update per counter shard whose net change is not zero
    (`items.shards_moved` says where a node counts). Nets, because a transaction may touch
    an item only once: a move within a state leaves its country's and state's shards alone."""
    net: Counter[Key] = Counter()
    for key in items.shards_moved(before or {}):
        net[key] -= 1
    for key in items.shards_moved(after or {}):
        net[key] += 1
    return [_move(key, delta) for key, delta in net.items() if delta]
