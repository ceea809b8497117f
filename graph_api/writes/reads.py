"""What a writer reads before it writes: nodes and rosters from the base table, strongly
consistent, a missing node NOT_FOUND naming the field it was asked by."""

from __future__ import annotations

from collections.abc import Sequence

from graph_api.errors import NotFound
from graph_api.model import keys
from graph_api.model.keys import PK, SK, Key, Kind
from graph_api.store.codec import Item
from graph_api.store.table import Table


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
