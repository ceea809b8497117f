"""Optimistic locking: the version a client read, checked against the node's own."""

from __future__ import annotations

from graph_api.errors import Conflict
from graph_api.store.codec import Item


def expect_version(node: Item, expected: int | None) -> None:
    """Optimistic locking: the client's `expectedVersion`, when given, must be current."""
    if expected is not None and node["version"] != expected:
        raise Conflict(
            f"{node['type']} {node['id']} is at version {node['version']}, not {expected}:"
            " read it again and reapply your change",
            field="expectedVersion",
            version=node["version"],
        )
