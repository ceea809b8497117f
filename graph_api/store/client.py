"""The one place that talks to DynamoDB: aiodynamo's `Client.send_request` on aiohttp, awaited
on the event loop, accounted.

Every DynamoDB call, the API's and the command line's, is `Dynamo.call`: aiodynamo signs it
(SigV4) and sends it through our HTTP (store/wire.py: the 16 MB cap, the CRC32 check, orjson,
strict answers, `AWS_CA_BUNDLE`), with the key botocore's credential chain resolves
(store/credentials.py), to the endpoint botocore resolves (`endpoint_of`). aiodynamo's own
retries are off (one attempt): our one retry policy (store/retry.py) sends again. What
aiodynamo and aiohttp raise is mapped once (store/wire_errors.py), then into `Unavailable`
here (`accounted`). The command line runs the same client under `asyncio.run`, one loop a
command (cli.py).

An aiohttp session belongs to the event loop it was made on, so `Dynamo` makes one session
and client per running loop, when the loop first calls, and closes it:
- explicitly, `await dynamo.aclose()` (the app's lifespan, at shutdown), or
- when the loop's runner ends (`asyncio.run`, uvicorn, the test client's portal cancel the
  tasks left at their end: a small task kept per client closes it then).

Each call names the `Ledger` of the GraphQL request it serves; the wire counts every HTTP
attempt against it. Hooks registered with `register` (botocore's event names: a test's
faults, a bench's clock) apply to every loop's client, the ones made later included.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import logging
import os
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import botocore.loaders
import botocore.session
from aiodynamo.client import Client
from aiodynamo.models import RetryConfig, RetryTimeout
from botocore.config import Config
from botocore.exceptions import ChecksumError, ClientError, ConnectionError, HTTPClientError
from botocore.parsers import ResponseParserError
from yarl import URL

from graph_api import __version__, telemetry
from graph_api.errors import Unavailable
from graph_api.settings import Settings
from graph_api.store import ledger as ledgers
from graph_api.store.credentials import (
    LOCAL_CREDENTIALS,
    BotocoreCredentials,
    StaticKey,
    local_key,
)
from graph_api.store.item_locks import ItemLocks
from graph_api.store.ledger import Call, Ledger, capacity_units
from graph_api.store.retry import (
    THROTTLE_CODES,
    Failure,
    RetryBudget,
    error_code,
    failure_of,
    not_dynamodb,
)
from graph_api.store.wire import (
    CONNECT_TIMEOUT,
    READ_TIMEOUT,
    Hooks,
    Model,
    Wire,
    answer_slot,
    proxy_for,
    signed_host,
)
from graph_api.store.wire import ssl_context as _ssl_context
from graph_api.store.wire_errors import mapping

__all__ = ["LOCAL_CREDENTIALS", "Dynamo", "configured_endpoint", "endpoint_of"]

log = logging.getLogger(__name__)

# Operations that read or write items, and so can report consumed capacity.
_DATA_OPERATIONS = frozenset(
    {
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "TransactGetItems",
    }
)
# What DynamoDB's successful answer always holds, by operation, when ReturnConsumedCapacity
# is TOTAL (as `call` asks for every data operation): an answer without it is not DynamoDB's
# (a proxy's `{}`), and taking it as an empty page or a done write would be a lie. GetItem
# of a missing item is `{"ConsumedCapacity": ...}` alone. Checked on DynamoDB Local and
# moto (tests/store/test_faults.py pins each).
REQUIRED = {
    "GetItem": ("ConsumedCapacity",),
    "BatchGetItem": ("Responses", "UnprocessedKeys", "ConsumedCapacity"),
    "Query": ("Count", "ScannedCount", "ConsumedCapacity"),  # no Items with Select=COUNT
    "Scan": ("Count", "ScannedCount", "ConsumedCapacity"),
    "PutItem": ("ConsumedCapacity",),
    "UpdateItem": ("ConsumedCapacity",),
    "DeleteItem": ("ConsumedCapacity",),
    "BatchWriteItem": ("UnprocessedItems", "ConsumedCapacity"),
    "TransactWriteItems": ("ConsumedCapacity",),
    "TransactGetItems": ("Responses", "ConsumedCapacity"),
    "DescribeTable": ("Table",),
    "CreateTable": ("TableDescription",),
    "UpdateTable": ("TableDescription",),
    "DeleteTable": ("TableDescription",),
}
# Errors that mean "DynamoDB is busy or unreachable" (one attempt is made).
_UNAVAILABLE_CODES = THROTTLE_CODES | {"InternalServerError", "ServiceUnavailable"}
# Answers that are not DynamoDB's JSON (refused by the wire), or fail its checksum.
_UNREADABLE = (ResponseParserError, ChecksumError)

USER_AGENT = f"graph-api/{__version__} aiodynamo aiohttp/{aiohttp.__version__}"
CONNECTIONS = 16  # kept alive per loop's session; at least `max_concurrency`


@dataclasses.dataclass(frozen=True)
class _OneAttempt(RetryConfig):
    """aiodynamo's retries off: one attempt, whose failure it raises (its loop raises the
    last error once the attempts end with `RetryTimeout`). An iterator, not the base's async
    generator: one left unfinished by a success is finalized through the loop's self-pipe
    (`call_soon_threadsafe`), a wake-up and a task every call."""

    def delays(self) -> Iterator[float]:
        yield 0.0

    def attempts(self) -> AsyncIterator[None]:
        return _Once()


class _Once:
    def __init__(self) -> None:
        self.left = True

    def __aiter__(self) -> _Once:
        return self

    async def __anext__(self) -> None:
        if not self.left:
            raise RetryTimeout()
        self.left = False


ONE_ATTEMPT = _OneAttempt()


@functools.cache
def _loader() -> botocore.loaders.Loader:
    """botocore's data loader, shared by every session this process makes (its cache holds
    the 1.2 MB endpoints.json, parsed once instead of per session)."""
    return botocore.loaders.create_loader()


def _botocore_session() -> botocore.session.Session:
    """A plain botocore session with the shared loader (endpoints, credentials, config)."""
    session = botocore.session.get_session()
    session.register_component("data_loader", _loader())
    return session


def _unavailable(service: str, operation: str, error: Exception) -> Unavailable | None:
    """The `Unavailable` a failed call means, or None when DynamoDB refused it (the caller's
    error: a failed condition, a missing table). Busy, unreachable, 5xx, and answers that
    are not DynamoDB's (no error code, unreadable, a bad checksum, too large) are all
    "try again shortly"; store/retry.py retries them within the policy."""
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if not_dynamodb(error):
            log.error(
                "%s %s: the endpoint answered HTTP %s, not as %s",
                service,
                operation,
                status,
                service,
            )
            return Unavailable(
                f"the endpoint answered HTTP {status}, not as {service}: check"
                f" {ENDPOINT_SETTING[service]}"
            )
        if code in _UNAVAILABLE_CODES or status >= 500 or not code or code.isdigit():
            log.warning("%s %s failed: %s (HTTP %s)", service, operation, code, status)
            return Unavailable(f"{service} is busy; try again shortly")
        return None
    if isinstance(error, ConnectionError | HTTPClientError):  # refused, reset, timed out
        log.warning("%s %s unreachable: %s", service, operation, error)
        return Unavailable(f"{service} did not answer; try again shortly")
    if isinstance(error, _UNREADABLE):
        log.warning("%s %s answered unreadably: %s", service, operation, error)
        return Unavailable(f"{service} did not answer as {service}; try again shortly")
    return None


# The variable that names each service's endpoint (botocore's), for an endpoint that is not it.
ENDPOINT_SETTING = {
    "DynamoDB": "AWS_ENDPOINT_URL_DYNAMODB",
    "DynamoDB Streams": "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
}


def _missing_table(operation: str, params: dict[str, Any], error: Exception) -> Unavailable | None:
    """UNAVAILABLE, naming the table and the fix, when the API's table does not exist (not
    the client's error; the same call fails again: never retried, `retry.failure_of`). The
    command line's calls keep DynamoDB's refusal: `graph-api create-table` asks for it."""
    if isinstance(error, ClientError) and error_code(error) == "ResourceNotFoundException":
        table = params.get("TableName") or ", ".join(params.get("RequestItems", {})) or "?"
        log.error("%s: table %s does not exist", operation, table)
        return Unavailable(
            f"table {table} does not exist: its operator must run `graph-api create-table`"
            " (GRAPH_API_TABLE names it)"
        )
    return None


# DynamoDB's refusal of a read of an index the table lacks (ValidationException); the
# embedded backend answers the same (`embedded/partitions.py`).
NO_SUCH_INDEX = "The table does not have the specified index"


def _missing_index(operation: str, params: dict[str, Any], error: Exception) -> Unavailable | None:
    """UNAVAILABLE, naming the fix, when a read names an index the table lacks: a table made
    before the index was (GSI2, search by name) until `graph-api migrate` adds it. Not the
    client's error, and the same read fails again: never retried (`retry.failure_of`)."""
    index = params.get("IndexName")
    if (
        index
        and isinstance(error, ClientError)
        and error.response.get("Error", {}).get("Code") == "ValidationException"
        and NO_SUCH_INDEX in str(error.response.get("Error", {}).get("Message", ""))
    ):
        log.error("%s of %s: the table has no index %s", operation, params.get("TableName"), index)
        return Unavailable(
            f"the table has no index {index}: its operator must run `graph-api migrate`",
            index=index,
        )
    return None


def check_answer(operation: str, params: dict[str, Any], response: dict[str, Any]) -> None:
    """`ResponseParserError` when a successful answer lacks what DynamoDB always sends."""
    required = REQUIRED.get(operation, ())
    if params.get("ReturnConsumedCapacity", "TOTAL") != "TOTAL":
        required = tuple(name for name in required if name != "ConsumedCapacity")
    missing = [name for name in required if name not in response]
    if missing:
        raise ResponseParserError(f"{operation} answered without {', '.join(missing)}")


class _Open:
    """One loop's session and client, kept open by a task of that loop until `close`, or
    until the loop's runner cancels the tasks left at its end."""

    def __init__(self, client: Client, session: aiohttp.ClientSession) -> None:
        self.client = client
        self.session = session
        self.keeper: asyncio.Task[None] | None = None

    async def keep(self) -> None:
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            await self.session.close()

    async def close(self) -> None:
        if self.keeper is not None and not self.keeper.done():
            self.keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.keeper
        elif not self.session.closed:
            await self.session.close()


class Dynamo:
    """The DynamoDB client of a process: `call`, on whichever event loop awaits it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.hooks = Hooks()
        self.credentials: BotocoreCredentials | StaticKey = (
            StaticKey(local_key())
            if settings.endpoint_url
            else BotocoreCredentials(_botocore_session)
        )
        self._endpoint: str | None = settings.endpoint_url
        self._ssl: Any = None
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Open] = (
            weakref.WeakKeyDictionary()
        )
        # Shared by every request on this client, as botocore's retry quota is.
        self.budget = RetryBudget()
        # One transaction in flight per item among this process's writers (transactions.py).
        self.item_locks = ItemLocks()

    @property
    def endpoint(self) -> str:
        """Where the calls go: the settings' endpoint, else botocore's (its
        `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL`, the config file's, else AWS's)."""
        if self._endpoint is None:
            self._endpoint = endpoint_of("dynamodb", self.settings.region)
        return self._endpoint

    def register(self, event: str, handler: Callable[..., Any]) -> None:
        """A botocore-style event handler on every call of this `Dynamo` (store/wire.Hooks)."""
        self.hooks.register(event, handler)

    def unregister(self, event: str, handler: Callable[..., Any]) -> None:
        self.hooks.unregister(event, handler)

    def _open_now(self) -> _Open:
        loop = asyncio.get_running_loop()
        opened = self._by_loop.get(loop)
        if opened is None:
            if self._ssl is None:
                ca_bundle = _botocore_session().get_config_variable("ca_bundle")
                self._ssl = _ssl_context(ca_bundle)
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=max(CONNECTIONS, self.settings.max_concurrency), ssl=self._ssl
                ),
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT
                ),
                # As botocore asks: an answer's CRC32 is of the bytes as sent, never gzipped.
                headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
                trust_env=False,  # the proxy is looked up once (`proxy_for`)
                skip_auto_headers=("User-Agent",),
                auto_decompress=False,
            )
            client = Client(
                Wire(
                    session,
                    self.hooks,
                    proxy=proxy_for(self.endpoint),
                    host=signed_host(self.endpoint),
                ),
                self.credentials,
                self.settings.region,
                # botocore's URL for DynamoDB: the endpoint's root.
                endpoint=URL(self.endpoint.rstrip("/") + "/"),
                throttle_config=ONE_ATTEMPT,
            )
            opened = self._by_loop[loop] = _Open(client, session)
            # A context of its own: the task outlives the request that happens to open it.
            opened.keeper = loop.create_task(opened.keep(), context=contextvars.Context())
        return opened

    async def open(self) -> None:
        """Open the running loop's client now, and resolve the credentials, as its first
        call would (Lambda's init: the first request then finds them resolved)."""
        opened = self._open_now()
        await self.credentials.get_key(opened.client.http)

    async def aclose(self) -> None:
        """Close the running loop's client, if it has one. A later call makes another, and
        resolves the credentials again (a SnapStart snapshot is taken after this, and
        restored where they may be stale)."""
        opened = self._by_loop.pop(asyncio.get_running_loop(), None)
        if opened is not None:
            await opened.close()
        if isinstance(self.credentials, BotocoreCredentials):
            self.credentials.reset()

    async def call(
        self,
        operation: str,
        params: dict[str, Any],
        ledger: Ledger | None,
        *,
        missing_table: bool = True,
    ) -> Any:
        """One DynamoDB operation, awaited on this loop's client. A missing table is
        UNAVAILABLE (`_missing_table`) unless `missing_table` is False (the command line,
        whose `create-table` asks for DynamoDB's refusal)."""
        params = _asked(operation, params)
        hooks = self.hooks.any
        if hooks:
            self.hooks.emit(
                f"before-parameter-build.dynamodb.{operation}",
                params=params,
                model=Model(operation),
            )
        with accounted(
            operation,
            ledger,
            params=params,
            region=self.settings.region,
            missing_table=missing_table,
        ) as answer:
            opened = self._open_now()
            slot: list[Any] = []
            token = answer_slot.set(slot)
            try:
                with mapping(self.endpoint, operation):
                    await opened.client.send_request(action=operation, payload=params)
            except Exception as error:
                if hooks:
                    self.hooks.emit(f"after-call-error.dynamodb.{operation}", exception=error)
                raise
            finally:
                answer_slot.reset(token)
            answer.append(slot[-1])
            if hooks:
                self.hooks.emit(
                    f"after-call.dynamodb.{operation}",
                    parsed=answer[0],
                    model=Model(operation),
                    http_response=None,
                    context={},
                )
            check_answer(operation, params, answer[0])
        return answer[0]


def _asked(operation: str, params: dict[str, Any]) -> dict[str, Any]:
    if operation in _DATA_OPERATIONS:
        return {"ReturnConsumedCapacity": "TOTAL", **params}
    return params


@contextlib.contextmanager
def accounted(
    operation: str,
    ledger: Ledger | None,
    service: str = "DynamoDB",
    *,
    params: dict[str, Any],
    region: str,
    missing_table: bool = False,
) -> Iterator[list[Any]]:
    """Around one call: its attempts counted against `ledger` (the wire reads it here), its
    time and capacity recorded, its failure mapped once (`_unavailable`); and,
    when telemetry is on, the process's metrics and the call's span (graph_api/telemetry).
    A read of an index the table lacks is mapped here too (`_missing_index`), and, with
    `missing_table` (the API's calls), a table that does not exist (`_missing_table`).
    The call appends its answer to the list it is given."""
    token = ledgers.active.set(ledger)
    started = time.perf_counter()
    answer: list[Any] = []
    tracing = telemetry.tracing
    span = tracing.start_call(service, operation, params, region) if tracing else None
    failed: Exception | None = None
    try:
        yield answer
    except Exception as error:
        answer.clear()
        unavailable = (
            _unavailable(service, operation, error)
            or _missing_index(operation, params, error)
            or (_missing_table(operation, params, error) if missing_table else None)
        )
        failed = unavailable or error
        if unavailable is not None:
            raise unavailable from error
        raise
    finally:
        ledgers.active.reset(token)
        consumed = answer[0].get("ConsumedCapacity") if answer else None
        if ledger is not None:
            ledger.record(Call(operation, started, time.perf_counter()), consumed)
        if telemetry.metrics is not None:
            throttled = failed is not None and failure_of(failed) is Failure.THROTTLED
            telemetry.metrics.dynamodb_call(operation, capacity_units(consumed), throttled)
        if span is not None and tracing is not None:
            tracing.end_call(span, answer[0] if answer else None, failed)


def endpoint_of(
    service: str,
    region: str,
    session: botocore.session.Session | None = None,
    *,
    ignore_configured: bool = False,
) -> str:
    """The endpoint a client of `service` reaches, as botocore resolves it (its
    `AWS_ENDPOINT_URL_<ID>`, `AWS_ENDPOINT_URL`, the config file's `services` section, else
    AWS's own), or AWS's own with `ignore_configured`. Nothing is sent; throwaway
    credentials keep botocore from looking for real ones."""
    session = session or _botocore_session()
    # None, not False: False would override AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
    config = Config(  # type: ignore[call-arg]  # botocore-stubs lack this documented option
        region_name=region, ignore_configured_endpoint_urls=ignore_configured or None
    )
    client = session.create_client(
        service,
        config=config,
        aws_access_key_id=LOCAL_CREDENTIALS["aws_access_key_id"],
        aws_secret_access_key=LOCAL_CREDENTIALS["aws_secret_access_key"],
    )
    try:
        return str(client.meta.endpoint_url)
    finally:
        client.close()


def configured_endpoint(
    service: str, region: str, session: botocore.session.Session | None = None
) -> str | None:
    """The endpoint botocore's configuration names for `service`, None for AWS's own: a
    client as configured against one that ignores configured endpoints."""
    session = session or _botocore_session()
    configured = endpoint_of(service, region, session)
    aws = endpoint_of(service, region, session, ignore_configured=True)
    return None if configured == aws else configured


def streams_endpoint(settings: Settings) -> str | None:
    """Where the stream reader reaches DynamoDB Streams, None for AWS's own endpoint.

    An endpoint this process started serves Streams too. Otherwise botocore's rules, with one
    step added: a Streams endpoint configured for itself (`AWS_ENDPOINT_URL_DYNAMODB_STREAMS`,
    or `AWS_ENDPOINT_URL`) wins; with none, a configured DynamoDB endpoint
    (`AWS_ENDPOINT_URL_DYNAMODB`) is the Streams one too, since DynamoDB Local, moto and
    Alternator serve both at one URL (left to botocore, the reader would poll AWS's)."""
    if settings.endpoint_url:
        return settings.endpoint_url
    session = _botocore_session()  # one for the three lookups
    if os.environ.get("AWS_ENDPOINT_URL_DYNAMODB_STREAMS"):
        return configured_endpoint("dynamodbstreams", settings.region, session)
    return configured_endpoint("dynamodb", settings.region, session) or configured_endpoint(
        "dynamodbstreams", settings.region, session
    )
