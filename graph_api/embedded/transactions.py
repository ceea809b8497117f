"""moto's TransactWriteItems, without copying whole tables and without half-visible writes.

moto 5.2 deep-copies every table an action names, once per action, to roll back a cancelled
transaction (88 s for 100 actions on the 4,631-item demo), and applies the actions one by
one where readers can see half of them. Here a transaction evaluates every condition first,
computes its writes on a shadow of the table that holds only the items it touches (moto's
own Put/Update/Delete; plain `SET`/`REMOVE`/`ADD` applied directly), then swaps the results
in at once under `isolation.tables`: readers wait for the swap only.

Nothing changes a stored item in place: the shadow starts from the stored items themselves,
a plain update makes a new item that shares every value it does not change, and only moto's
own update (which works in place) gets a deep copy first. Two deep copies of every item
updated were two fifths of a rename's transaction CPU.
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any, cast

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
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table

from graph_api.embedded import isolation
from graph_api.embedded.partitions import PrimaryKey, reindex, stored

_OPERATIONS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})
# moto's own writes, as imported: `moto_fixes.apply()` imports this module before it wraps
# them, and the shadow must not update the partitions of the real table.
_MOTO_PUT: Callable[..., Item] = Table.put_item
_MOTO_DELETE: Callable[..., Item | None] = Table.delete_item
_MOTO_UPDATE: Callable[..., Item] = DynamoDBBackend.update_item


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
        return _MOTO_PUT(self, *args, **kwargs)

    def delete_item(self, *args: Any, **kwargs: Any) -> Item | None:
        return _MOTO_DELETE(self, *args, **kwargs)

    def copy_in(self, hash_value: DynamoType, range_value: DynamoType | None) -> Item | None:
        """Start from the real item itself (None if absent), which nothing here changes."""
        current = self._table.get_item(hash_value, range_value)
        if current is not None:
            self._store(hash_value, range_value, current)
        return current

    def own(self, hash_value: DynamoType, range_value: DynamoType | None) -> None:
        """Before moto's update, which changes the item in place: a deep copy of its own."""
        found = self.result(hash_value, range_value)
        if found is not None and found is self._table.get_item(hash_value, range_value):
            self._store(hash_value, range_value, copy.deepcopy(found))

    def _store(self, hash_value: DynamoType, range_value: DynamoType | None, item: Item) -> None:
        if range_value is None:
            self.items[hash_value] = item
        else:
            self.items[hash_value][range_value] = item

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
            if new is old:
                continue  # a condition check: the item as it was
            real = table._table
            if new is None:
                if old is not None:
                    _MOTO_DELETE(real, hash_value, range_value)
            else:
                if range_value is None:
                    stored(real)[hash_value] = new
                else:
                    stored(real)[hash_value][range_value] = new
                if real.stream_shard is not None:  # `streams`: published after the swap
                    real.stream_shard.add(old, new)  # (a delete above adds its own)
            reindex(real, hash_value, range_value)


def _apply_action(
    shadow: _ShadowBackend, table: _Shadow, op_type: str, op: dict[str, Any], key: dict[str, Any]
) -> None:
    if op_type == "Put":
        table.put_item(op["Item"], overwrite=True)
    elif op_type == "Delete":
        table.delete_item(*shadow.get_keys_value(table._table, key))
    elif op_type == "Update" and not _simple_update(shadow, table, op, key):
        table.own(*shadow.get_keys_value(table._table, key))
        _MOTO_UPDATE(
            shadow,
            op["TableName"],
            key,
            update_expression=op["UpdateExpression"],
            expression_attribute_names=op.get("ExpressionAttributeNames") or {},
            expression_attribute_values=op.get("ExpressionAttributeValues") or {},
        )


# moto parses, validates (deep-copying its syntax tree) and executes every update expression,
# a cost paid per action (bench/README.md). The plain forms our writes use (`SET #a = :v` and
# `SET #m.#k.#f = :v` into nested maps, `REMOVE #a` / `REMOVE #m.#k`, `ADD #a :n` on numbers)
# are applied directly; anything else, a missing parent map, or any error goes to moto,
# which answers as DynamoDB does.
_CLAUSE = re.compile(r"\s*(SET|REMOVE|ADD)\s+(.*?)\s*(?=\b(?:SET|REMOVE|ADD)\s|$)", re.S)
_PATH = r"(#\w+(?:\.#\w+)*)"
_SET = re.compile(_PATH + r"\s*=\s*(:\w+)")
_ADD = re.compile(r"(#\w+)\s+(:\w+)")
_NAME = re.compile(_PATH)


def _simple_update(
    shadow: _ShadowBackend, table: _Shadow, op: dict[str, Any], key: dict[str, Any]
) -> bool:
    names = op.get("ExpressionAttributeNames") or {}
    values = op.get("ExpressionAttributeValues") or {}
    steps: list[tuple[str, list[str], Any]] = []
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
            if match is None:
                return False
            placeholders = match.group(1).split(".")
            if any(name not in names for name in placeholders):
                return False
            value = values.get(match.group(2)) if verb != "REMOVE" else None
            if verb != "REMOVE" and value is None:
                return False
            steps.append((verb, [names[name] for name in placeholders], value))
    if consumed != len(expression) or not steps:
        return False
    real = table._table
    if any(path[0] in (real.hash_key_attr, real.range_key_attr) for _, path, _ in steps):
        return False  # moto refuses key changes with DynamoDB's message
    hash_value, range_value = shadow.get_keys_value(real, key)
    item = table.get_item(hash_value, range_value)
    staged = _sharing(item) if item is not None else Item(hash_value, range_value, key)
    fresh: set[int] = set()  # the maps this update made, which it may change in place
    try:
        for verb, path, value in steps:
            parent = _parent_map(staged.attrs, path, fresh)
            if parent is None:
                return False  # no such map: DynamoDB's "document path is invalid"
            attr = path[-1]
            if verb == "SET":
                parent[attr] = DynamoType(value)
            elif verb == "REMOVE":
                parent.pop(attr, None)
            else:
                current = parent.get(attr)
                if "N" not in value or (current is not None and current.type != "N"):
                    return False  # sets, or a type error: moto's path
                total = Decimal(value["N"]) + (Decimal(current.value) if current else 0)
                parent[attr] = DynamoType({"N": str(total)})
    except Exception:
        return False  # a size limit, say: moto raises DynamoDB's error
    if range_value is None:
        table.items[hash_value] = staged
    else:
        table.items[hash_value][range_value] = staged
    return True


def _sharing(item: Item) -> Item:
    """A new item holding the same values as `item` (which an update replaces, never changes)."""
    staged = cast(Item, Item.__new__(Item))
    staged.hash_key, staged.range_key = item.hash_key, item.range_key
    staged.attrs = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.update(staged.attrs, item.attrs)  # as moto's own copy does: its size was checked
    return staged


def _parent_map(
    attrs: dict[str, DynamoType], path: list[str], fresh: set[int]
) -> dict[str, DynamoType] | None:
    """The map that holds a path's last name: the item's attributes, or a nested map, copied
    on the way down (once per update: `fresh`) so that the stored item's maps stay as they are."""
    parent = attrs
    for name in path[:-1]:
        found = parent.get(name)
        if found is None or not found.is_map():
            return None
        if id(found) not in fresh:
            mine = DynamoType.__new__(DynamoType)
            mine.type, mine.value = found.type, dict(found.value)
            dict.__setitem__(parent, name, mine)  # the same size: no check to run again
            fresh.add(id(mine))
            found = mine
        parent = found.value
    return parent
