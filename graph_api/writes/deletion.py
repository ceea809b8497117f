"""Deleting a node that nothing links to any more (a teacher with no class, a sport with no
member): one conditional delete on its counter (a sport's: on each of its roster shards, as
read, which go with it), and its catalog's count."""

from __future__ import annotations

from graph_api.errors import Conflict
from graph_api.model.keys import Kind
from graph_api.store.table import Table
from graph_api.store.transactions import EXISTS, STALE, delete, transact
from graph_api.writes import counts, roster_shards
from graph_api.writes.attempts import retrying
from graph_api.writes.reads import Reads, key_of


async def delete_if_unlinked(table: Table, kind: Kind, id_: str, counter: str, busy: str) -> str:
    """Delete a node whose `counter` of edges is zero, else CONFLICT saying `busy`
    (formatted with the count) so the client knows what to remove first."""
    reads = Reads(table)

    async def attempt() -> str:
        node = await reads.node(kind, id_)
        per_shard = await roster_shards.counts(reads, kind, node)
        linked = node.get(counter, 0) + sum(per_shard or ())
        if linked:
            raise Conflict(busy.format(count=linked), id=id_)
        shards = [
            delete(key, roster_shards.fence(n), on_fail=STALE)
            for key, n in zip(roster_shards.shards(kind, id_), per_shard or (), strict=False)
        ]
        # The node as read, still there: a delete that lost a race to another (or a link
        # made since our read) reads again, and says NOT_FOUND (or CONFLICT) then, so the
        # catalog's count moves once.
        gone = delete(
            key_of(node),
            EXISTS,
            ("eq", "version", node["version"]),
            ("zero_or_missing", counter),
            on_fail=STALE,
        )
        await transact(table, [gone, *counts.moved(node, None), *shards])
        return id_

    return await retrying(table, attempt)
