"""The table as one GraphQL request sees it: every call it sends (reads here, the write
path's transactions through `store/transactions.py`), bounded in flight, within the
request's deadline and retried, and the reads themselves: items by key, Query pages.

Request building lives here; key building lives in `graph_api.model.keys`. A `Table` is cheap and
made per GraphQL request: it carries that request's ledger and its bound on calls in flight.
The operator's synchronous work on the table (its definition, creating it, bulk writes, the
Scan) is `store/admin.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from graph_api.errors import Unavailable
from graph_api.model.keys import INDEX_KEYS, PK, SK, Key, Range
from graph_api.store import codec
from graph_api.store.client import Dynamo
from graph_api.store.codec import Item
from graph_api.store.ledger import Ledger
from graph_api.store.retry import Failure, Policy, Retries, resend

BATCH_GET_LIMIT = 100  # keys per BatchGetItem (DynamoDB's limit)
BUSY = "DynamoDB is busy; try again shortly"


def projection_parameters(attributes: frozenset[str]) -> dict[str, Any]:
    """A read's parameters that ask only for these top-level attributes and the key (which
    places each item of a BatchGetItem's answer), every name a placeholder: many are
    DynamoDB reserved words (`name`). What it saves: bench/README.md, *Projected reads*."""
    names = sorted({PK, SK, *attributes})
    return {
        "ProjectionExpression": ", ".join(f"#p{i}" for i in range(len(names))),
        "ExpressionAttributeNames": {f"#p{i}": name for i, name in enumerate(names)},
    }


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Item]
    last_key: dict[str, str] | None  # DynamoDB's LastEvaluatedKey, decoded


def key_names(index: str | None) -> tuple[str, ...]:
    """The attributes that make up an item's position in the table or index."""
    return (PK, SK, *INDEX_KEYS[index]) if index else (PK, SK)


class Table:
    def __init__(
        self,
        dynamo: Dynamo,
        name: str,
        *,
        ledger: Ledger | None = None,
        max_in_flight: int = 16,
        deadline: float | None = None,
        policy: Policy | None = None,
    ) -> None:
        self.dynamo = dynamo
        self.name = name
        self.ledger = ledger
        # Every retry of this request, whichever loop takes it: one count, one deadline.
        self.retries = Retries(dynamo.budget, deadline, policy)
        # The nodes ("teacher t1") this request's writes saved but whose copies DynamoDB
        # stopped taking: their to-dos finish them (`writes/finisher.py`); the answer says so.
        self.unfinished: list[str] = []
        self._slots = asyncio.Semaphore(max_in_flight)

    def remaining(self) -> float:
        return self.retries.remaining()

    async def call(self, operation: str, params: dict[str, Any], *, recorded: bool = True) -> Any:
        """One DynamoDB call for this request: bounded in flight, within the deadline, and
        sent again unchanged (a transaction with its token) while the failure says it may
        pass next time: the one loop for throttles, timeouts, dropped connections and
        transaction conflicts, on the request's retries (store/retry.py). `recorded=False`
        keeps it out of the request's ledger (`extensions.dynamodb`): a read the process
        makes for itself on the request's way (store/layout.py), not one the request asked."""
        ledger = self.ledger if recorded else None
        return await resend(lambda: self._send(operation, params, ledger), self.retries)

    async def _send(self, operation: str, params: dict[str, Any], ledger: Ledger | None) -> Any:
        async with self._slots:
            remaining = self.remaining()
            if remaining <= 0:
                raise Unavailable("this request's deadline passed before DynamoDB answered")
            call = self.dynamo.call(operation, params, ledger)
            if remaining == float("inf"):
                return await call
            try:
                async with asyncio.timeout(remaining):  # no task of its own, as wait_for makes
                    return await call
            except TimeoutError:
                raise Unavailable(
                    "DynamoDB did not answer within this request's deadline"
                ) from None

    # -- reads ---------------------------------------------------------------------------

    async def get(self, key: Key, *, consistent: bool = False) -> Item | None:
        response = await self.call(
            "GetItem",
            {
                "TableName": self.name,
                "Key": codec.encode(key.as_item()),
                "ConsistentRead": consistent,
            },
        )
        wire = response.get("Item")
        return codec.decode(wire) if wire else None

    async def get_many(
        self,
        keys: Iterable[Key],
        *,
        consistent: bool = False,
        attributes: frozenset[str] | None = None,
    ) -> dict[Key, Item]:
        """Fetch items by key: deduplicated, 100 a BatchGetItem, chunks concurrently. With
        `attributes`, only those (and the key) of each item (`projection_parameters`)."""
        unique = list(dict.fromkeys(keys))
        if not unique:  # DynamoDB refuses a BatchGetItem without keys
            return {}
        asked = projection_parameters(attributes) if attributes is not None else {}
        if len(unique) <= BATCH_GET_LIMIT:  # one chunk: awaited here, no task for it
            return await self._get_chunk(unique, consistent, asked)
        chunks = [unique[i : i + BATCH_GET_LIMIT] for i in range(0, len(unique), BATCH_GET_LIMIT)]
        found: dict[Key, Item] = {}
        chunk_reads = (self._get_chunk(c, consistent, asked) for c in chunks)
        for result in await asyncio.gather(*chunk_reads):
            found.update(result)
        return found

    async def _get_chunk(
        self, keys: Sequence[Key], consistent: bool, asked: dict[str, Any]
    ) -> dict[Key, Item]:
        found: dict[Key, Item] = {}
        read: dict[str, Any] = {"ConsistentRead": consistent, **asked}
        # Both parts are strings: written as the codec would, without its walk.
        wire_keys = [{PK: {"S": k.pk}, SK: {"S": k.sk}} for k in keys]
        cost = 0
        while True:
            request = {self.name: {"Keys": wire_keys, **read}}
            response = await self.call("BatchGetItem", {"RequestItems": request})
            for wire in response.get("Responses", {}).get(self.name, []):
                item = codec.decode(wire)
                found[Key(item[PK], item[SK])] = item
            # Asked for again as first asked: DynamoDB's UnprocessedKeys repeat the
            # projection and consistency, but not every implementation's do (moto's).
            unprocessed = (response.get("UnprocessedKeys") or {}).get(self.name)
            if not unprocessed:
                self.retries.recovered(cost)
                return found
            wire_keys = unprocessed["Keys"]
            # DynamoDB's throttle by another name: the rest is asked for after a backoff.
            cost = await self.retries.pause(Failure.THROTTLED, BUSY)

    async def query(
        self,
        rng: Range,
        *,
        limit: int | None = None,
        start: dict[str, str] | None = None,
        consistent: bool = False,
        forward: bool = True,
    ) -> Page:
        """One Query page over one partition of the table or of an index; with `forward` false,
        from the end of the range backward (`ScanIndexForward: false`)."""
        values: dict[str, Any] = {":pk": {"S": rng.pk}}
        condition = f"{rng.pk_name} = :pk"
        if rng.prefix:
            condition += f" AND begins_with({rng.sk_name}, :prefix)"
            values[":prefix"] = {"S": rng.prefix}
        params: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if rng.index:
            params["IndexName"] = rng.index
        elif consistent:
            params["ConsistentRead"] = True
        if not forward:
            params["ScanIndexForward"] = False
        if limit is not None:
            params["Limit"] = limit
        if start:
            params["ExclusiveStartKey"] = codec.encode(start)
        response = await self.call("Query", params)
        last = response.get("LastEvaluatedKey")
        return Page(
            [codec.decode(w) for w in response.get("Items", [])],
            codec.decode(last) if last else None,
        )

    async def query_at_least(
        self,
        rng: Range,
        count: int,
        start: dict[str, str] | None = None,
        *,
        forward: bool = True,
    ) -> list[Item]:
        """The first `count` items of a range after `start`, or all there are (`forward`
        false: the last `count` before `start`, last first).

        Asks for exactly `count` items; follows `LastEvaluatedKey` only when a page came back
        short (1 MB read), so the extra requests are the ones DynamoDB forces.
        """
        items: list[Item] = []
        while True:
            page = await self.query(rng, limit=count - len(items), start=start, forward=forward)
            items.extend(page.items)
            if len(items) >= count or page.last_key is None:
                return items
            start = page.last_key

    async def query_all(self, rng: Range, *, consistent: bool = False) -> list[Item]:
        """Every item of a range, following `LastEvaluatedKey` to the end."""
        items: list[Item] = []
        start: dict[str, str] | None = None
        while True:
            page = await self.query(rng, start=start, consistent=consistent)
            items.extend(page.items)
            if page.last_key is None:
                return items
            start = page.last_key
