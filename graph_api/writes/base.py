"""What every write needs: strongly consistent reads, version checks, retry on staleness."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from graph_api.errors import Conflict, NotFound
from graph_api.model import keys
from graph_api.model.keys import PK, SK, Key, Kind
from graph_api.store.codec import Item
from graph_api.store.retry import Failure
from graph_api.store.table import Table
from graph_api.store.transactions import Clause, Stale, delete, transact

T = TypeVar("T")

EXISTS: Clause = ("exists",)
NOT_EXISTS: Clause = ("not_exists",)


def key_of(item: Item) -> Key:
    return Key(item[PK], item[SK])


class Reads:
    """Reads for writers: base table, strongly consistent."""

    def __init__(self, table: Table) -> None:
        self.table = table

    async def node(self, kind: Kind, id_: str, field: str = "id") -> Item:
        keys.check_id(id_, field)
        item = await self.table.get(keys.node(kind, id_), consistent=True)
        if item is None:
            raise NotFound(f"{kind.lower()} {id_} does not exist", field=field, id=id_)
        return item

    async def both(
        self, first: tuple[Kind, str, str], second: tuple[Kind, str, str]
    ) -> tuple[Item, Item]:
        """Two nodes in one BatchGetItem; each of (kind, id, field) names its own NOT_FOUND."""
        wanted = [
            keys.node(kind, keys.check_id(id_, field)) for kind, id_, field in (first, second)
        ]
        found = await self.table.get_many(wanted, consistent=True)
        for (kind, id_, field), key in zip((first, second), wanted, strict=True):
            if key not in found:
                raise NotFound(f"{kind.lower()} {id_} does not exist", field=field, id=id_)
        return found[wanted[0]], found[wanted[1]]

    async def nodes(self, kind: Kind, ids: Sequence[str]) -> list[Item]:
        found = await self.table.get_many([keys.node(kind, i) for i in ids], consistent=True)
        return list(found.values())

    async def roster(self, target: Kind, target_id: str) -> list[Item]:
        """The edge items of a class's or a sport's students, from its own partition: a
        base-table Query, so strongly consistent (the count it is checked against is too)."""
        rng = keys.roster(target, target_id, Kind.STUDENT)
        return await self.table.query_all(rng, consistent=True)


def expect_version(node: Item, expected: int | None) -> None:
    """Optimistic locking: the client's `expectedVersion`, when given, must be current."""
    if expected is not None and node["version"] != expected:
        raise Conflict(
            f"{node['type']} {node['id']} is at version {node['version']}, not {expected}:"
            " read it again and reapply your change",
            field="expectedVersion",
            version=node["version"],
        )


async def retrying(table: Table, attempt: Callable[[], Awaitable[T]]) -> T:
    """Run a read-then-write attempt until its guards hold (others wrote meanwhile): the
    one "read again" loop, on the request's retries (its count, deadline and budget are
    shared with the calls inside each attempt, so their retries do not multiply)."""
    cost = 0
    while True:
        try:
            result = await attempt()
        except Stale:
            cost = await table.retries.pause(Failure.CONTENTION, KEPT_CHANGING)
            continue
        table.retries.recovered(cost)
        return result


KEPT_CHANGING = "the graph kept changing under this write; nothing was written, try again"


async def delete_if_unlinked(table: Table, kind: Kind, id_: str, counter: str, busy: str) -> str:
    """Delete a node whose `counter` of edges is zero, else CONFLICT saying `busy`
    (formatted with the count) so the client knows what to remove first."""
    node = await Reads(table).node(kind, id_)
    conflict = Conflict(busy.format(count=node.get(counter, 0)), id=id_)
    if node.get(counter, 0):
        raise conflict
    await transact(table, [delete(key_of(node), ("zero_or_missing", counter), on_fail=conflict)])
    return id_
