"""The table as the operator's tools handle it: its definition, creating it and turning its
stream on, writing items in bulk, and the one Scan (`graph-api check` and `migrate`; tests
read their tables back with it).

Coroutines, which each command runs under `asyncio.run` (cli.py): one caller, progress on a
terminal. Each call is the API's own client (`Dynamo.call`) and the API requests' own retry
policy (`store/retry.py`). Nothing on the request path imports this; a GraphQL request's
reads and writes go through `store/table.py`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from graph_api.errors import Unavailable
from graph_api.model.keys import GSI1, GSI2, INDEX_KEYS, PK, SK, stream_lease
from graph_api.store import codec
from graph_api.store.client import Dynamo
from graph_api.store.codec import Item
from graph_api.store.retry import OFFLINE, Failure, Retries, error_code, failure_of, resend

BATCH_WRITE_LIMIT = 25  # requests per BatchWriteItem (DynamoDB's limit)
# The change stream feeds subscriptions (`graph_api.events`): both images, so a reader can
# tell what an update changed without reading the table again.
STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}

Progress = Callable[[int, int], None]


# A Scan page that times out or is throttled is sent again, at most SCAN_ATTEMPTS times in all,
# under the retry policy's OFFLINE figures (an offline tool can wait longer than a request:
# 250 ms doubling to 4 s, full jitter); each retry asks for half the items of the last try,
# RETRY_PAGE first when the page had no Limit (DynamoDB's 1 MB), SMALLEST_PAGE at least.
SCAN_ATTEMPTS = OFFLINE.max_retries + 1
RETRY_PAGE = 1000
SMALLEST_PAGE = 10


def index_definition(index: str) -> dict[str, Any]:
    """A global secondary index of the table: its keys (`keys.INDEX_KEYS`), every attribute."""
    pk, sk = INDEX_KEYS[index]
    return {
        "IndexName": index,
        "KeySchema": [
            {"AttributeName": pk, "KeyType": "HASH"},
            {"AttributeName": sk, "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "ALL"},
    }


INDEXES = (GSI1, GSI2)  # GSI1: catalogs, locations, inverse edges; GSI2: search by name


def attribute_definitions(indexes: Sequence[str] = INDEXES) -> list[dict[str, str]]:
    names = [PK, SK, *(name for index in indexes for name in INDEX_KEYS[index])]
    return [{"AttributeName": attr, "AttributeType": "S"} for attr in names]


def definition(name: str) -> dict[str, Any]:
    """CreateTable parameters: the single source of the table's shape."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": attribute_definitions(),
        "KeySchema": [
            {"AttributeName": PK, "KeyType": "HASH"},
            {"AttributeName": SK, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [index_definition(index) for index in INDEXES],
        "StreamSpecification": dict(STREAM),
    }


UNPROCESSED = "DynamoDB kept items unprocessed; seed again to finish"


async def call(dynamo: Dynamo, operation: str, params: dict[str, Any], retries: Retries) -> Any:
    """One call for the command line's tools: `Table.call`'s loop (`retry.resend`), no
    ledger. A missing table stays DynamoDB's refusal."""

    def send() -> Awaitable[Any]:
        return dynamo.call(operation, params, None, missing_table=False)

    return await resend(send, retries)


async def batch_write(
    dynamo: Dynamo,
    name: str,
    items: Sequence[Item],
    progress: Progress | None = None,
) -> None:
    """Put items 25 a BatchWriteItem, retrying `UnprocessedItems` with backoff: each chunk
    is a request of its own for the retry policy (no deadline: a terminal waits)."""
    requests = [{"PutRequest": {"Item": codec.encode(item)}} for item in items]
    await _batch_write(dynamo, name, requests, progress)


async def _batch_write(
    dynamo: Dynamo, name: str, requests: Sequence[dict[str, Any]], progress: Progress | None
) -> None:
    done = 0
    for i in range(0, len(requests), BATCH_WRITE_LIMIT):
        chunk = requests[i : i + BATCH_WRITE_LIMIT]
        request: dict[str, Any] = {name: list(chunk)}
        retries, cost = Retries(dynamo.budget), 0
        while True:
            response = await call(dynamo, "BatchWriteItem", {"RequestItems": request}, retries)
            request = response.get("UnprocessedItems") or {}
            if not request:
                retries.recovered(cost)
                break
            cost = await retries.pause(Failure.THROTTLED, UNPROCESSED)
        done += len(chunk)
        if progress:
            progress(done, len(requests))


def _is_lease(key: dict[str, Any]) -> bool:
    return bool(codec.decode(key) == stream_lease().as_item())


async def holds_items(dynamo: Dynamo, name: str) -> bool:
    """Whether the table holds an item other than the stream reader's lease (which a table
    any `serve` has read holds). Two items a page: at most one of them is the lease."""
    params = {
        "TableName": name,
        "Limit": 2,
        "ConsistentRead": True,
        "ProjectionExpression": "#pk, #sk",
        "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
    }
    page = await call(dynamo, "Scan", params, Retries(dynamo.budget))
    return any(not _is_lease(key) for key in page.get("Items", []))


async def delete_items(
    dynamo: Dynamo, name: str, progress: Callable[[int], None] | None = None
) -> int:
    """Delete every item but the stream reader's lease (its checkpoints stay right), 25 a
    BatchWriteItem; the number deleted. Keys are read first, then deleted, so the Scan never
    pages over what it deletes."""
    params: dict[str, Any] = {
        "TableName": name,
        "ConsistentRead": True,
        "ProjectionExpression": "#pk, #sk",
        "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
    }
    found: list[dict[str, Any]] = []
    while True:  # each page a request of its own for the retry policy
        page = await call(dynamo, "Scan", params, Retries(dynamo.budget))
        found.extend(key for key in page.get("Items", []) if not _is_lease(key))
        if "LastEvaluatedKey" not in page:
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    requests = [{"DeleteRequest": {"Key": key}} for key in found]
    await _batch_write(
        dynamo, name, requests, (lambda done, _: progress(done)) if progress else None
    )
    return len(found)


async def create(dynamo: Dynamo, name: str) -> bool:
    """Create the table and wait until it is active; False if it already exists. Each call
    is retried as a request's are: a DynamoDB Local just started may time out its first."""
    try:
        await call(dynamo, "DescribeTable", {"TableName": name}, Retries(dynamo.budget))
        return False
    except ClientError as error:
        if error_code(error) != "ResourceNotFoundException":
            raise
    try:
        await call(dynamo, "CreateTable", definition(name), Retries(dynamo.budget))
    except ClientError as error:
        # In use: made by an attempt whose answer was lost (or by another creator): wait.
        if error_code(error) != "ResourceInUseException":
            raise
    await wait_active(dynamo, name)
    return True


async def _describe(dynamo: Dynamo, name: str) -> Any:
    """One DescribeTable, not retried (a wait polls again anyway); DynamoDB's refusal kept."""
    return await dynamo.call("DescribeTable", {"TableName": name}, None, missing_table=False)


class TableNotReady(Exception):
    """The table was not active within the wait."""


async def wait_active(dynamo: Dynamo, name: str, *, attempts: int = 60, poll: float = 1.0) -> None:
    """Wait until the table exists and is active (botocore's `table_exists` waiter's
    figures: every second, 60 times)."""
    for _ in range(attempts):
        try:
            described = (await _describe(dynamo, name))["Table"]
        except ClientError as error:
            if error_code(error) != "ResourceNotFoundException":
                raise
        else:
            if described.get("TableStatus") == "ACTIVE":
                return
        await asyncio.sleep(poll)
    raise TableNotReady(f"table {name} is not active after {attempts * poll:.0f} s")


class IndexNotReady(Exception):
    """An index added to the table was not active within the wait."""


INDEX_WAIT_SECONDS = 3600.0  # DynamoDB backfills a new index from the table: large ones take long


async def add_indexes(
    dynamo: Dynamo, name: str, *, wait: float = INDEX_WAIT_SECONDS, poll: float = 2.0
) -> list[str]:
    """Create the indexes `definition` has and the table lacks (a table made before them),
    one UpdateTable each (DynamoDB creates one index a call), each waited for until active;
    the names added. DynamoDB fills an index from the items' attributes: items without its
    keys are simply not in it (`graph-api migrate` writes them)."""
    described = await call(dynamo, "DescribeTable", {"TableName": name}, Retries(dynamo.budget))
    present = {i["IndexName"] for i in described["Table"].get("GlobalSecondaryIndexes") or []}
    added = []
    for index in INDEXES:
        if index in present:
            continue
        update = {
            "TableName": name,
            "AttributeDefinitions": attribute_definitions(),
            "GlobalSecondaryIndexUpdates": [{"Create": index_definition(index)}],
        }
        await call(dynamo, "UpdateTable", update, Retries(dynamo.budget))
        await _wait_for_index(dynamo, name, index, wait, poll)
        added.append(index)
    return added


async def _wait_for_index(dynamo: Dynamo, name: str, index: str, wait: float, poll: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        asked = {"TableName": name}
        described = (await call(dynamo, "DescribeTable", asked, Retries(dynamo.budget)))["Table"]
        status = {
            i["IndexName"]: i.get("IndexStatus")
            for i in described.get("GlobalSecondaryIndexes") or []
        }
        if status.get(index) == "ACTIVE" and described.get("TableStatus") == "ACTIVE":
            return
        if time.monotonic() > deadline:
            raise IndexNotReady(f"{index} of {name} is {status.get(index)} after {wait:.0f} s")
        await asyncio.sleep(poll)


class OtherStreamView(Exception):
    """The table's stream is on, with images other than the ones the reader needs."""

    def __init__(self, view: str) -> None:
        super().__init__(view)
        self.view = view


async def enable_stream(dynamo: Dynamo, name: str) -> bool:
    """Turn the table's change stream on if it is off (UpdateTable, then wait until the table
    is active again); False when it was on already. A stream that is on with other images
    raises `OtherStreamView` and is left alone: changing its view type means disabling it,
    which ends a stream that something else may be reading."""
    described = (await _describe(dynamo, name))["Table"]
    spec = described.get("StreamSpecification") or {}
    if spec.get("StreamEnabled"):
        view = str(spec.get("StreamViewType", ""))
        if view != STREAM["StreamViewType"]:
            raise OtherStreamView(view)
        return False
    await dynamo.call(
        "UpdateTable",
        {"TableName": name, "StreamSpecification": dict(STREAM)},
        None,
        missing_table=False,
    )
    await wait_active(dynamo, name)
    return True


class ScanGaveUp(Exception):
    """A Scan page failed for good: how far the scan got. The page's last error is the cause."""

    def __init__(self, scanned: int, pages: int, attempts: int) -> None:
        super().__init__(
            f"scan gave up after {scanned} items scanned in {pages} pages:"
            f" the next page failed {attempts} time(s)"
        )
        self.scanned = scanned
        self.pages = pages
        self.attempts = attempts


async def _scan_page(dynamo: Dynamo, params: dict[str, Any], scanned: int, pages: int) -> Any:
    """One Scan page, sent again (from the same ExclusiveStartKey, smaller) while it fails:
    a request of its own for the retry policy."""
    retries, cost = Retries(dynamo.budget, policy=OFFLINE), 0
    while True:
        try:
            page = await dynamo.call("Scan", params, None, missing_table=False)
        except (Unavailable, ClientError, BotoCoreError) as error:
            failure = failure_of(error)
            attempts = retries.count + 1
            if failure is None:
                raise ScanGaveUp(scanned, pages, attempts) from error
            try:
                cost = await retries.pause(failure, str(error))
            except Unavailable:
                raise ScanGaveUp(scanned, pages, attempts) from error
            limit = params.get("Limit")
            params["Limit"] = RETRY_PAGE if limit is None else max(SMALLEST_PAGE, limit // 2)
            continue
        retries.answered(cost)
        return page


async def scan(
    dynamo: Dynamo,
    table: str,
    progress: Callable[[int], None] | None = None,
    *,
    page_size: int | None = None,
) -> AsyncIterator[Item]:
    """Every item of the table, page by page (`page_size` items a page, or DynamoDB's 1 MB).

    A page that times out is retried and the scan pages on; ScanGaveUp when it cannot.
    """
    params: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    if page_size is not None:
        params["Limit"] = page_size
    seen = pages = 0
    while True:
        page = await _scan_page(dynamo, params, seen, pages)
        for wire in page.get("Items", []):
            yield codec.decode(wire)
        seen += page.get("Count", 0)
        pages += 1
        if progress:
            progress(seen)
        if "LastEvaluatedKey" not in page:
            return
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
