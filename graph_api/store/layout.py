"""What a process knows of the table's location layout: whether `graph-api migrate` is moving
students' location entries from their country's partition into its shards.

`migrate` puts its marker item (`keys.location_migration`) before it moves any student, waits
MIGRATION_NOTICE (longer than LAYOUT_TTL) so that every serving process has seen it, and
deletes it once no student is left on the key before shards. While the marker is there, a
location page also reads the country's unsharded partition and merges it in, so pages stay
exact however far the move has gone. A process reads the marker at most once every
LAYOUT_TTL seconds, outside any request's count (`extensions.dynamodb`): it is the
process's knowledge, as a key set is, not a read of the page.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from graph_api.model import keys
from graph_api.store import codec
from graph_api.store.table import Table

LAYOUT_TTL = 30.0  # seconds a process trusts what it read of the marker
MIGRATION_NOTICE = LAYOUT_TTL + 5.0  # what migrate waits after putting the marker


class Layout:
    """One process's view of the location migration marker, read again every `ttl` s."""

    def __init__(self, ttl: float = LAYOUT_TTL, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self._clock = clock
        self._migrating = False
        self._until = float("-inf")

    async def migrating(self, table: Table) -> bool:
        """Whether students may still be on their country's unsharded location key."""
        started = self._clock()
        if started < self._until:
            return self._migrating
        params = {
            "TableName": table.name,
            "Key": codec.encode(keys.location_migration().as_item()),
            "ProjectionExpression": "#pk",
            "ExpressionAttributeNames": {"#pk": keys.PK},
        }
        # On the request's slots, retries and deadline, but not in its ledger: see the module.
        found = await table.call("GetItem", params, recorded=False)
        self._migrating = "Item" in found
        # Trusted from when the read began, not when its answer came: an answer that took
        # retries to come is as old as the read, and migrate's notice counts from its put.
        self._until = started + self.ttl
        return self._migrating
