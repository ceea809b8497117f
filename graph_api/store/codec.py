"""DynamoDB's typed attribute values to and from plain Python values.

The table holds strings, whole numbers, booleans, nulls, maps and lists only; this is
smaller and faster than boto3's TypeSerializer (no Decimal, no sets).
"""

from __future__ import annotations

from typing import Any

from graph_api.model.items import Item as Item  # re-exported: the store's callers name it here

Wire = dict[str, dict[str, Any]]


def encode_value(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if value is None:
        return {"NULL": True}
    if isinstance(value, dict):
        return {"M": {k: encode_value(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {"L": [encode_value(v) for v in value]}
    raise TypeError(f"cannot store {type(value).__name__} in the table")


def decode_value(wire: dict[str, Any]) -> Any:
    if "S" in wire:  # most values: a string, told without unpacking the pair
        return wire["S"]
    ((tag, raw),) = wire.items()
    if tag == "M":
        return {k: v["S"] if "S" in v else decode_value(v) for k, v in raw.items()}
    if tag == "N":
        return int(raw)
    if tag == "L":
        return [v["S"] if "S" in v else decode_value(v) for v in raw]
    if tag == "BOOL":
        return bool(raw)
    if tag == "NULL":
        return None
    raise TypeError(f"unexpected attribute type {tag}")


def encode(item: Item) -> Wire:
    return {name: encode_value(value) for name, value in item.items()}


def decode(wire: Wire) -> Item:
    # Strings inline, here and in maps and lists: a call less for most values.
    return {name: v["S"] if "S" in v else decode_value(v) for name, v in wire.items()}
