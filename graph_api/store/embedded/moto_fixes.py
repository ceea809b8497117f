"""Fixes to moto's DynamoDB backend (moto 5.2.x) that make it serve like a database.

Each fix restores DynamoDB's behaviour where moto's costs grow with the whole table; each is
pinned by `tests/test_embedded.py`, and goes away when moto itself does the same:

- `TransactWriteItems` deep-copies every table an action names, once per action, to roll
  back a cancelled transaction (88 s for 100 actions on the 4,631-item demo), and applies
  its actions one by one where readers can see half of them. Here a transaction evaluates
  every condition first, computes its writes on copies of the items it touches (moto's own
  Put/Update/Delete, run on a shadow of the table), then swaps the results in at once:
  readers wait for the swap only, not for the transaction.
- `Query` sorts the whole table to find one partition, of the table or of a GSI. Here each
  table keeps its items grouped by partition, for the table and for every GSI, updated by
  every write, and moto's own query logic runs over that one partition.
- Responses that carry items (`GetItem`, `BatchGetItem`, `Query`, `Scan`) are serialized by
  walking botocore's shape model over every attribute value (two thirds of a Query's time).
  They are already in DynamoDB's wire form, so they are written as JSON directly.

`apply()` installs the fixes once per process; nothing else in the project touches moto.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import threading
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoResult

from graph_api.store.embedded import isolation

_applied = False
_apply_lock = threading.Lock()
_MOTO: dict[str, Callable[..., Any]] = {}  # moto's own methods, before `apply()`

PrimaryKey = tuple[DynamoType, DynamoType | None]
_OPERATIONS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})


# -- partitions: every Query reads one partition, not the whole table ----------------------


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
        for item in _every_item(table):
            self.add(item)

    def add(self, item: Item) -> None:
        pk: PrimaryKey = (item.hash_key, item.range_key)
        for name, attrs in self.gsis.items():
            if all(attr in item.attrs for attr in attrs):  # DynamoDB indexes only these
                hash_value = item.attrs[attrs[0]]
                self.members[name].setdefault(hash_value, {})[pk] = item
                self.entries.setdefault(pk, []).append((name, hash_value))

    def discard(self, pk: PrimaryKey) -> None:
        for name, hash_value in self.entries.pop(pk, ()):
            partition = self.members[name].get(hash_value)
            if partition is not None:
                partition.pop(pk, None)
                if not partition:
                    del self.members[name][hash_value]

    def gsi_partition(self, name: str, hash_value: DynamoType) -> list[Item]:
        return list(self.members[name].get(hash_value, {}).values())


def _stored(table: Table) -> dict[Any, Any]:
    """moto's storage: `{hash: item}`, or `{hash: {range: item}}` with a sort key."""
    items: dict[Any, Any] = table.items
    return items


def _every_item(table: Table) -> list[Item]:
    if table.range_key_attr is None:
        return list(_stored(table).values())
    return [item for partition in _stored(table).values() for item in partition.values()]


def _partitions(table: Table) -> Partitions:
    """The table's partitions, built on first use (a table moto made by any means)."""
    found: Partitions | None = table.__dict__.get("_graph_api_partitions")
    if found is None:
        found = table.__dict__["_graph_api_partitions"] = Partitions(table)
    return found


def _reindex(table: Table, hash_value: DynamoType, range_value: DynamoType | None) -> None:
    """After a write to one item: move it to the partitions it now belongs to."""
    partitions: Partitions | None = table.__dict__.get("_graph_api_partitions")
    if partitions is None:
        return  # not built yet: it will be built from the items as they are then
    pk: PrimaryKey = (hash_value, range_value)
    partitions.discard(pk)
    if table.range_key_attr is None:
        item = _stored(table).get(hash_value)
    else:
        item = _stored(table).get(hash_value, {}).get(range_value)
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


def _query_one_partition(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def query(self: Table, *args: Any, **kwargs: Any) -> Any:
        asked = signature.bind(self, *args, **kwargs).arguments
        index_name, conditions = asked.get("index_name"), asked.get("hash_key_conditions") or []
        if not index_name:
            hash_key = asked.get("hash_key")
            partition = _stored(self).get(hash_key) if hash_key is not None else None
            found = partition.values() if isinstance(partition, dict) else [partition]
            items = [item for item in found if isinstance(item, Item)]
        elif index_name in _partitions(self).gsis and len(conditions) == 1:
            items = _partitions(self).gsi_partition(index_name, conditions[0][1])
        else:
            return original(self, *args, **kwargs)  # a shape we do not index
        return original(_OnePartition(self, items), *args, **kwargs)

    return query


def _put_then_reindex(original: Callable[..., Item]) -> Callable[..., Item]:
    def put_item(self: Table, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Item:
        item = original(self, item_attrs, *args, **kwargs)
        _reindex(self, item.hash_key, item.range_key)
        return item

    return put_item


def _delete_then_reindex(original: Callable[..., Item | None]) -> Callable[..., Item | None]:
    def delete_item(self: Table, hash_key: DynamoType, range_key: DynamoType | None) -> Any:
        try:
            return original(self, hash_key, range_key)
        finally:
            _reindex(self, hash_key, range_key)

    return delete_item


def _update_then_reindex(original: Callable[..., Item]) -> Callable[..., Item]:
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
                _reindex(table, DynamoType(key[table.hash_key_attr]), range_value)

    return update_item


# -- transactions: computed aside, then swapped in at once ------------------------------------


class _Shadow:
    """One table as a transaction writes it: copies of the items it touches, nothing else.

    moto's own Put, Update and Delete run against it (so their validation and update
    expressions are moto's), while readers go on reading the real table.
    """

    def __init__(self, table: Table) -> None:
        self._table = table
        self.items: dict[Any, Any] = defaultdict(dict) if table.range_key_attr else {}
        self.stream_shard = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)  # the table's definition: keys, indexes

    def get_item(self, *args: Any, **kwargs: Any) -> Item | None:
        return Table.get_item(self, *args, **kwargs)  # type: ignore[arg-type]

    def put_item(self, *args: Any, **kwargs: Any) -> Item:
        return _MOTO["put_item"](self, *args, **kwargs)  # type: ignore[no-any-return]

    def delete_item(self, *args: Any, **kwargs: Any) -> Item | None:
        return _MOTO["delete_item"](self, *args, **kwargs)  # type: ignore[no-any-return]

    def copy_in(self, hash_value: DynamoType, range_value: DynamoType | None) -> Item | None:
        """Start from a copy of the real item; return the real one (None if absent)."""
        current = self._table.get_item(hash_value, range_value)
        if current is not None:
            if range_value is None:
                self.items[hash_value] = copy.deepcopy(current)
            else:
                self.items[hash_value][range_value] = copy.deepcopy(current)
        return current

    def result(self, hash_value: DynamoType, range_value: DynamoType | None) -> Item | None:
        if range_value is None:
            found = self.items.get(hash_value)
        else:
            found = self.items.get(hash_value, {}).get(range_value)
        return found if isinstance(found, Item) else None


class _ShadowBackend:
    """The backend as `_Shadow` tables: what moto's `update_item` runs against."""

    def __init__(self, backend: DynamoDBBackend) -> None:
        self._backend = backend
        self.shadows: dict[str, _Shadow] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def get_table(self, table_name: str) -> _Shadow:
        table = self._backend.get_table(table_name)
        if table.name not in self.shadows:
            self.shadows[table.name] = _Shadow(table)
        return self.shadows[table.name]


def _key_of(backend: DynamoDBBackend, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    table = backend.get_table(op["TableName"])
    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = op["Item"][table.range_key_attr]
    return key


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """moto's TransactWriteItems, without copying whole tables (see the module docstring).

    The caller holds the writers' lock (`isolation.writers`), so nothing else writes while
    the transaction is computed; readers wait only for the swap (`isolation.tables`).
    """
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    actions: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    seen: set[tuple[str, str]] = set()
    for action in transact_items:
        if len(action) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(action.items()))
        if op_type not in _OPERATIONS:
            raise MockValidationException("Unsupported transaction operation")
        key = _key_of(self, op_type, op)
        identity = (str(op["TableName"]), str(dict(sorted(key.items()))))
        if identity in seen:
            raise MultipleTransactionsException()
        seen.add(identity)
        actions.append((op_type, op, key))

    # Every condition against the state before the transaction (no two actions share an
    # item, so this is what DynamoDB evaluates); a failure cancels with nothing written.
    reasons: list[tuple[Any, Any, Any]] = []
    for _, op, key in actions:
        current = self.get_item(op["TableName"], key)
        condition = op.get("ConditionExpression")
        if condition is None or get_filter_expression(
            condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
        ).expr(current):
            reasons.append((None, None, None))
            continue
        old = None
        if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
            old = current.to_json()["Attributes"]
        reasons.append(("ConditionalCheckFailed", ConditionalCheckFailed().message, old))
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)

    # The writes, on copies of the items they touch: a failure leaves the table untouched.
    shadow = _ShadowBackend(self)
    touched: list[tuple[_Shadow, PrimaryKey, Item | None]] = []
    for n, (op_type, op, key) in enumerate(actions):
        table = shadow.get_table(op["TableName"])
        hash_value, range_value = self.get_keys_value(table._table, key)
        touched.append((table, (hash_value, range_value), table.copy_in(hash_value, range_value)))
        try:
            _apply_action(shadow, table, op_type, op, key)
        except (MultipleTransactionsException, MockValidationException):
            raise
        except Exception as error:
            reasons = [(None, None, None)] * len(actions)
            reasons[n] = (type(error).__name__, str(error), None)
            raise TransactionCanceledException(reasons) from error

    with isolation.tables.write():  # readers see the whole transaction or none of it
        for table, (hash_value, range_value), old in touched:
            new = table.result(hash_value, range_value)
            real = table._table
            if new is None:
                if old is not None:
                    _MOTO["delete_item"](real, hash_value, range_value)
            else:
                if range_value is None:
                    _stored(real)[hash_value] = new
                else:
                    _stored(real)[hash_value][range_value] = new
                if real.stream_shard is not None:
                    real.stream_shard.add(old, new)
            _reindex(real, hash_value, range_value)


def _apply_action(
    shadow: _ShadowBackend, table: _Shadow, op_type: str, op: dict[str, Any], key: dict[str, Any]
) -> None:
    if op_type == "Put":
        table.put_item(op["Item"], overwrite=True)
    elif op_type == "Delete":
        table.delete_item(*shadow.get_keys_value(table._table, key))
    elif op_type == "Update" and not _simple_update(shadow, table, op, key):
        _MOTO["update_item"](
            shadow,
            op["TableName"],
            key,
            update_expression=op["UpdateExpression"],
            expression_attribute_names=op.get("ExpressionAttributeNames") or {},
            expression_attribute_values=op.get("ExpressionAttributeValues") or {},
        )


# moto parses, validates (deep-copying its syntax tree) and executes every update expression:
# about 2 ms an action. The plain forms our writes use (`SET #a = :v`, `REMOVE #a`,
# `ADD #a :n` on numbers) are applied directly; anything else, or any error, goes to moto.
_CLAUSE = re.compile(r"\s*(SET|REMOVE|ADD)\s+(.*?)\s*(?=\b(?:SET|REMOVE|ADD)\s|$)", re.S)
_SET = re.compile(r"(#\w+)\s*=\s*(:\w+)")
_ADD = re.compile(r"(#\w+)\s+(:\w+)")
_NAME = re.compile(r"(#\w+)")


def _simple_update(
    shadow: _ShadowBackend, table: _Shadow, op: dict[str, Any], key: dict[str, Any]
) -> bool:
    names = op.get("ExpressionAttributeNames") or {}
    values = op.get("ExpressionAttributeValues") or {}
    steps: list[tuple[str, str, Any]] = []
    expression = op["UpdateExpression"]
    consumed = 0
    for clause in _CLAUSE.finditer(expression):
        if clause.start() != consumed:
            return False
        consumed = clause.end()
        verb, parts = clause.group(1), [p.strip() for p in clause.group(2).split(",")]
        pattern = {"SET": _SET, "ADD": _ADD, "REMOVE": _NAME}[verb]
        for part in parts:
            match = pattern.fullmatch(part)
            if match is None or match.group(1) not in names:
                return False
            value = values.get(match.group(2)) if verb != "REMOVE" else None
            if verb != "REMOVE" and value is None:
                return False
            steps.append((verb, names[match.group(1)], value))
    if consumed != len(expression) or not steps:
        return False
    real = table._table
    if any(attr in (real.hash_key_attr, real.range_key_attr) for _, attr, _ in steps):
        return False  # moto refuses key changes with DynamoDB's message
    hash_value, range_value = shadow.get_keys_value(real, key)
    item = table.get_item(hash_value, range_value)
    staged = copy.deepcopy(item) if item is not None else Item(hash_value, range_value, key)
    try:
        for verb, attr, value in steps:
            if verb == "SET":
                staged.attrs[attr] = DynamoType(value)
            elif verb == "REMOVE":
                staged.attrs.pop(attr, None)
            else:
                current = staged.attrs.get(attr)
                if "N" not in value or (current is not None and current.type != "N"):
                    return False  # sets, or a type error: moto's path
                total = Decimal(value["N"]) + (Decimal(current.value) if current else 0)
                staged.attrs[attr] = DynamoType({"N": str(total)})
    except Exception:
        return False  # a size limit, say: moto raises DynamoDB's error
    if range_value is None:
        table.items[hash_value] = staged
    else:
        table.items[hash_value][range_value] = staged
    return True


# -- responses: items are already wire JSON ---------------------------------------------------


_ITEM_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})


def _as_json(original: Callable[..., Any]) -> Callable[..., Any]:
    def execute_result(self: DynamoResult, context: Any) -> Any:
        if context.operation_model.name not in _ITEM_READS or not isinstance(self.result, dict):
            return original(self, context)
        return 200, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(self.result)

    return execute_result


def apply() -> None:
    """Install the fixes (once per process)."""
    global _applied
    with _apply_lock:
        if _applied:
            return
        _MOTO.update(
            put_item=Table.put_item,
            delete_item=Table.delete_item,
            update_item=DynamoDBBackend.update_item,
        )
        Table.query = _query_one_partition(Table.query)  # type: ignore[method-assign]
        Table.put_item = _put_then_reindex(Table.put_item)  # type: ignore[method-assign]
        Table.delete_item = _delete_then_reindex(Table.delete_item)  # type: ignore[method-assign]
        DynamoDBBackend.update_item = _update_then_reindex(DynamoDBBackend.update_item)  # type: ignore[method-assign]
        DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
        DynamoResult.execute_result = _as_json(DynamoResult.execute_result)  # type: ignore[method-assign]
        _applied = True
