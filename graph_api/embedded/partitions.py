"""moto's Query, over one partition: each table's items grouped by partition, for the table
and for every GSI, kept in step with every write.

moto 5.2's `Table.query` sorts the whole table (`all_items()`) to find one partition, of the
table or of a GSI, so every Query grows with the table. Here moto's own query logic runs over
the items of the one partition asked for (`query_one_partition`); writes keep the GSI
groups current (`put_then_reindex`, `delete_then_reindex`, `update_then_reindex`).

moto still sorts the partition it is given before it applies `Limit`, so a Query of a large
GSI partition (a country's students) grew with the partition. Each GSI partition is handed
over already in moto's order, sorted once after the writes that changed it: moto's sort of
sorted items is one pass, and its scan stops at `Limit`.

A read of an index the table lacks is refused as DynamoDB refuses it (`refuse_as_dynamodb`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

PrimaryKey = tuple[DynamoType, DynamoType | None]


class Partitions:
    """A table's items grouped by GSI partition, kept in step with every write.

    The base table is already grouped by moto (`Table.items[hash][range]`); each GSI gets
    `index name -> hash value -> {primary key: item}`, with the entries each item is in.
    """

    def __init__(self, table: Table) -> None:
        self.gsis = {
            index.name: [k["AttributeName"] for k in index.schema] for index in table.global_indexes
        }
        self.members: dict[str, dict[DynamoType, dict[PrimaryKey, Item]]] = {
            name: {} for name in self.gsis
        }
        self.entries: dict[PrimaryKey, list[tuple[str, DynamoType]]] = {}
        # (index, hash value) -> the partition's items in moto's order, until a write to it.
        self.ordered: dict[tuple[str, DynamoType], list[Item]] = {}
        self.order = {
            name: [*attrs, table.hash_key_attr, table.range_key_attr]
            for name, attrs in self.gsis.items()
        }
        for item in _every_item(table):
            self.add(item)

    def add(self, item: Item) -> None:
        pk: PrimaryKey = (item.hash_key, item.range_key)
        for name, attrs in self.gsis.items():
            if all(attr in item.attrs for attr in attrs):  # DynamoDB indexes only these
                hash_value = item.attrs[attrs[0]]
                self.members[name].setdefault(hash_value, {})[pk] = item
                self.entries.setdefault(pk, []).append((name, hash_value))
                self.ordered.pop((name, hash_value), None)

    def discard(self, pk: PrimaryKey) -> None:
        for name, hash_value in self.entries.pop(pk, ()):
            self.ordered.pop((name, hash_value), None)
            partition = self.members[name].get(hash_value)
            if partition is not None:
                partition.pop(pk, None)
                if not partition:
                    del self.members[name][hash_value]

    def gsi_partition(self, name: str, hash_value: DynamoType) -> list[Item]:
        """The partition's items in the order moto sorts them in (a copy: moto sorts it)."""
        ordered = self.ordered.get((name, hash_value))
        if ordered is None:
            attrs = [a for a in self.order[name] if a is not None]
            ordered = sorted(
                self.members[name].get(hash_value, {}).values(),
                key=lambda item: tuple(item.attrs[a] for a in attrs),
            )
            self.ordered[(name, hash_value)] = ordered
        return list(ordered)


def stored(table: Table) -> dict[Any, Any]:
    """moto's storage: `{hash: item}`, or `{hash: {range: item}}` with a sort key."""
    items: dict[Any, Any] = table.items
    return items


def _every_item(table: Table) -> list[Item]:
    if table.range_key_attr is None:
        return list(stored(table).values())
    return [item for partition in stored(table).values() for item in partition.values()]


def partitions_of(table: Table) -> Partitions:
    """The table's partitions, built on first use (a table moto made by any means)."""
    found: Partitions | None = table.__dict__.get("_graph_api_partitions")
    if found is None:
        found = table.__dict__["_graph_api_partitions"] = Partitions(table)
    return found


def reindex(table: Table, hash_value: DynamoType, range_value: DynamoType | None) -> None:
    """After a write to one item: move it to the partitions it now belongs to."""
    partitions: Partitions | None = table.__dict__.get("_graph_api_partitions")
    if partitions is None:
        return  # not built yet: it will be built from the items as they are then
    pk: PrimaryKey = (hash_value, range_value)
    partitions.discard(pk)
    if table.range_key_attr is None:
        item = stored(table).get(hash_value)
    else:
        item = stored(table).get(hash_value, {}).get(range_value)
    if isinstance(item, Item):
        partitions.add(item)


class _OnePartition:
    """A table as moto's `Table.query` sees it, holding only the items of one partition."""

    def __init__(self, table: Table, items: list[Item]) -> None:
        self._table = table
        self._items = items

    def all_items(self) -> list[Item]:
        return self._items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def query_one_partition(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def query(self: Table, *args: Any, **kwargs: Any) -> Any:
        asked = signature.bind(self, *args, **kwargs).arguments
        index_name, conditions = asked.get("index_name"), asked.get("hash_key_conditions") or []
        if not index_name:
            hash_key = asked.get("hash_key")
            partition = stored(self).get(hash_key) if hash_key is not None else None
            found = partition.values() if isinstance(partition, dict) else [partition]
            items = [item for item in found if isinstance(item, Item)]
        elif index_name in partitions_of(self).gsis and len(conditions) == 1:
            items = partitions_of(self).gsi_partition(index_name, conditions[0][1])
        else:
            return original(self, *args, **kwargs)  # a shape we do not index
        return original(_OnePartition(self, items), *args, **kwargs)

    return query


def put_then_reindex(original: Callable[..., Item]) -> Callable[..., Item]:
    def put_item(self: Table, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Item:
        item = original(self, item_attrs, *args, **kwargs)
        reindex(self, item.hash_key, item.range_key)
        return item

    return put_item


def delete_then_reindex(original: Callable[..., Item | None]) -> Callable[..., Item | None]:
    def delete_item(self: Table, hash_key: DynamoType, range_key: DynamoType | None) -> Any:
        try:
            return original(self, hash_key, range_key)
        finally:
            reindex(self, hash_key, range_key)

    return delete_item


def update_then_reindex(original: Callable[..., Item]) -> Callable[..., Item]:
    # moto's UpdateItem changes the stored item in place, so no put_item sees it.
    def update_item(
        self: DynamoDBBackend, table_name: str, key: dict[str, Any], *a: Any, **kw: Any
    ) -> Item:
        try:
            return original(self, table_name, key, *a, **kw)
        finally:
            table = self.get_table(table_name)
            if isinstance(key, dict) and table.hash_key_attr in key:
                range_value = (
                    DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
                )
                reindex(table, DynamoType(key[table.hash_key_attr]), range_value)

    return update_item


def refuse_as_dynamodb(original: Callable[..., Any]) -> Callable[..., Any]:
    """`DynamoDBBackend.get_schema`, which a Query or a Scan of an index asks first, refusing
    an index the table lacks with DynamoDB's ValidationException and message (moto answers
    ResourceNotFoundException, which DynamoDB keeps for a missing table)."""

    def get_schema(self: DynamoDBBackend, table_name: str, index_name: str | None) -> Any:
        if index_name:
            table = self.get_table(table_name)
            indexes = (table.global_indexes or []) + (table.indexes or [])
            if index_name not in {index.name for index in indexes}:
                raise MockValidationException(
                    f"The table does not have the specified index: {index_name}"
                )
        return original(self, table_name, index_name)

    return get_schema
