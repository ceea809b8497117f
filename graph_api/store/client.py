"""The one place that talks to DynamoDB: an aiobotocore client awaited on the event loop,
accounted; and boto3 for the command line.

The API's calls (`Dynamo.call`) go through aiobotocore: botocore's serializer, signer,
endpoints, credentials and error handling, on aiohttp (HTTP, TLS, `AWS_CA_BUNDLE`), awaited
on the loop with no thread. Two components of theirs are ours: the response parser
(store/response_parser.py, through the session's `response_parser_factory`) and the HTTP
session class (store/http_session.py: a response's body capped at 16 MB). The command
line's synchronous work (store/admin.py: tables, seeding, the Scan) calls `call_sync`,
through a boto3 client made the same way.

An aiohttp session belongs to the event loop it was made on, so `Dynamo` makes one
aiobotocore client per running loop, when the loop first calls, and closes it:
- explicitly, `await dynamo.aclose()` (the app's lifespan, at shutdown), or
- when the loop's runner ends (`asyncio.run`, uvicorn, the test client's portal cancel the
  tasks left at their end: a small task kept per client closes it then).

Each call names the `Ledger` of the GraphQL request it serves; a `before-send` hook counts
every HTTP attempt against it. Hooks registered with `register` (the ledger's, a test's
faults, a bench's clock) apply to every client, the ones made later included.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import botocore.loaders
import botocore.session
from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession
from botocore.config import Config
from botocore.exceptions import ChecksumError, ClientError, ConnectionError, HTTPClientError
from botocore.parsers import ResponseParserError

from graph_api import __version__, telemetry
from graph_api.errors import Unavailable
from graph_api.settings import Settings
from graph_api.store.http_session import CappedAIOHTTPSession
from graph_api.store.item_locks import ItemLocks
from graph_api.store.ledger import Call, Ledger, capacity_units
from graph_api.store.response_parser import (
    AioDynamoResponseParserFactory,
    DynamoResponseParserFactory,
)
from graph_api.store.retry import (
    THROTTLE_CODES,
    Failure,
    RetryBudget,
    error_code,
    failure_of,
    not_dynamodb,
)

log = logging.getLogger(__name__)

# Credentials for an endpoint this process started (moto, a test's DynamoDB Local): any do.
LOCAL_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}

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
# moto (tests/test_faults.py pins each).
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
# Errors that mean "DynamoDB is busy or unreachable" (botocore makes one attempt).
_UNAVAILABLE_CODES = THROTTLE_CODES | {"InternalServerError", "ServiceUnavailable"}
# Answers that are not DynamoDB's JSON (refused by our parser), or fail its checksum.
_UNREADABLE = (ResponseParserError, ChecksumError)

_active_ledger: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar(
    "graph_api_ledger", default=None
)


def _user_agent() -> str:
    """Ours and botocore's, built once: left to itself botocore builds its User-Agent from
    about twenty parts twice a call."""
    return f"graph-api/{__version__} {botocore.session.get_session().user_agent()}"


USER_AGENT = _user_agent()


@functools.cache
def _loader() -> botocore.loaders.Loader:
    """botocore's data loader, shared by every session this process makes (its cache holds
    the service models and the 1.2 MB endpoints.json, parsed once instead of per session)."""
    return botocore.loaders.create_loader()


def _botocore_session() -> botocore.session.Session:
    """A plain botocore session with the shared loader (endpoint lookups; nothing sent)."""
    session = botocore.session.get_session()
    session.register_component("data_loader", _loader())
    return session


def _session(session: Any, parser_factory: Any) -> Any:
    """`session` (botocore's or aiobotocore's) with the shared loader and our parser."""
    session.register_component("data_loader", _loader())
    session.register_component("response_parser_factory", parser_factory)
    return session


CONNECT_TIMEOUT = 2  # seconds
READ_TIMEOUT = 5
CONNECTIONS = 16  # kept alive per client; at least `max_concurrency`


def _options(settings: Settings, connections: int) -> dict[str, Any]:
    return dict(
        region_name=settings.region,
        # Deliberate: botocore does not retry (1 attempt); our one retry policy
        # (store/retry.py: one count a request, the deadline, the retry budget) does. Legacy
        # mode, because its DynamoDB handler then still checks the answer's `x-amz-crc32`
        # and raises ChecksumError on a mismatch; standard mode skips that check once no
        # attempt is left (botocore/retries/standard.py: max attempts are checked first).
        retries={"mode": "legacy", "total_max_attempts": 1},
        max_pool_connections=connections,
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        # Our requests are built from validated inputs by store/ alone; botocore's walk
        # of every parameter against its shape model costs ~0.5 ms of CPU a call.
        parameter_validation=False,
        user_agent=USER_AGENT,
    )


@functools.cache  # a few operation names, each spelled out once rather than every call
def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


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


class _Clients:
    """Clients of one service: one aiobotocore client per running event loop, and one boto3
    client for synchronous callers, all with the same settings and hooks."""

    def __init__(
        self,
        service: str,
        settings: Settings,
        endpoint_url: str | None,
        *,
        local_credentials: bool = True,
    ) -> None:
        self.service = service
        self._kwargs: dict[str, Any] = {}
        if endpoint_url:
            self._kwargs["endpoint_url"] = endpoint_url
            if local_credentials:
                self._kwargs.update(LOCAL_CREDENTIALS)
        connections = max(CONNECTIONS, settings.max_concurrency)
        self._aio_config = AioConfig(
            **_options(settings, connections), http_session_cls=CappedAIOHTTPSession
        )
        self._config = Config(**_options(settings, connections))
        self._aio_session = _session(AioSession(), AioDynamoResponseParserFactory())
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Open] = (
            weakref.WeakKeyDictionary()
        )
        self._sync: Any = None
        self._hooks: list[tuple[str, Callable[..., Any]]] = []

    # -- hooks -------------------------------------------------------------------------

    def register(self, event: str, handler: Callable[..., Any]) -> None:
        self._hooks.append((event, handler))
        for client in self._every():
            client.meta.events.register(event, handler)

    def unregister(self, event: str, handler: Callable[..., Any]) -> None:
        """As botocore's: a handler not registered is no error."""
        if (event, handler) in self._hooks:
            self._hooks.remove((event, handler))
        for client in self._every():
            client.meta.events.unregister(event, handler)

    def _every(self) -> list[Any]:
        opened = [o.client for o in list(self._by_loop.values()) if o.client is not None]
        return opened + ([self._sync] if self._sync is not None else [])

    def _hook(self, client: Any) -> Any:
        for event, handler in self._hooks:
            client.meta.events.register(event, handler)
        return client

    # -- the clients ---------------------------------------------------------------------

    @property
    def sync(self) -> Any:
        """The boto3 client (made on first use)."""
        if self._sync is None:
            import boto3  # the command line's: an API process (Lambda's) never loads it

            session = _session(botocore.session.get_session(), DynamoResponseParserFactory())
            boto = boto3.session.Session(botocore_session=session)
            client: Any = boto.client  # typed per service name, ours is a variable
            self._sync = self._hook(client(self.service, config=self._config, **self._kwargs))
        return self._sync

    async def current(self) -> Any:
        """The running loop's aiobotocore client (made on its first call)."""
        loop = asyncio.get_running_loop()
        opened = self._by_loop.get(loop)
        if opened is None:
            opened = self._by_loop[loop] = _Open()
            context = self._aio_session.create_client(
                self.service, config=self._aio_config, **self._kwargs
            )
            # A context of its own: the task outlives the request that happens to open it.
            opened.ready = loop.create_task(
                opened.run(context, self._hook), context=contextvars.Context()
            )
        try:
            return await opened.client_of()
        except BaseException:
            # Opening failed (credentials not yet to be had, say): the next call tries again.
            if self._by_loop.get(loop) is opened:
                del self._by_loop[loop]
            raise

    async def aclose(self) -> None:
        """Close the running loop's client, if it has one. A later call makes another, from a
        new session: the credentials the old one resolved and cached are not reused (a
        SnapStart snapshot is taken after this, and restored where they may be stale)."""
        opened = self._by_loop.pop(asyncio.get_running_loop(), None)
        if opened is not None:
            await opened.close()
            self._aio_session = _session(AioSession(), AioDynamoResponseParserFactory())

    def close(self) -> None:
        """Close the boto3 client. Loops' clients close with their loop (module docstring)."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None


class _Open:
    """One loop's client, kept open by a task of that loop until `close`, or until the
    loop's runner cancels the tasks left at its end."""

    def __init__(self) -> None:
        self.client: Any = None
        self.ready: asyncio.Task[None] | None = None
        self._opened: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def run(self, context: Any, hook: Callable[[Any], Any]) -> None:
        try:
            async with context as client:
                self.client = hook(client)
                self._opened.set_result(client)
                await asyncio.Event().wait()  # until cancelled
        except BaseException as error:
            # The callers waiting in `client_of` get the error; the task ends quietly.
            if not self._opened.done():
                self._opened.set_exception(error)
        finally:
            self.client = None

    async def client_of(self) -> Any:
        return await asyncio.shield(self._opened)

    async def close(self) -> None:
        if self.ready is not None and not self.ready.done():
            self.ready.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.ready


class Dynamo:
    """The DynamoDB client of a process: `call` on the event loop, `call_sync` elsewhere."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._clients = _Clients("dynamodb", settings, settings.endpoint_url)
        self._clients.register("before-send.dynamodb", self._count_attempt)
        # Shared by every request on this client, as botocore's retry quota is.
        self.budget = RetryBudget()
        # One transaction in flight per item among this process's writers (transactions.py).
        self.item_locks = ItemLocks()

    @property
    def client(self) -> Any:
        """The command line's boto3 client (waiters, modeled exceptions, `call_sync`)."""
        return self._clients.sync

    def register(self, event: str, handler: Callable[..., Any]) -> None:
        """A botocore event handler on every client of this `Dynamo`, now and later."""
        self._clients.register(event, handler)

    def unregister(self, event: str, handler: Callable[..., Any]) -> None:
        self._clients.unregister(event, handler)

    async def open(self) -> None:
        """Open the running loop's client now, as its first call would (Lambda's init: the
        first request then finds botocore's models loaded and the credentials resolved)."""
        await self._clients.current()

    async def aclose(self) -> None:
        """Close the running loop's client (the app's lifespan calls this at shutdown)."""
        await self._clients.aclose()

    def close(self) -> None:
        self._clients.close()

    @staticmethod
    def _count_attempt(**_: Any) -> None:
        ledger = _active_ledger.get()
        if ledger is not None:
            ledger.count_request()

    async def call(self, operation: str, params: dict[str, Any], ledger: Ledger | None) -> Any:
        """One DynamoDB operation, awaited on this loop's client."""
        params = _asked(operation, params)
        with _accounted(
            operation, ledger, params=params, region=self.settings.region, missing_table=True
        ) as answer:
            client = await self._clients.current()
            answer.append(await getattr(client, _snake(operation))(**params))
            check_answer(operation, params, answer[0])
        return answer[0]

    def call_sync(self, operation: str, params: dict[str, Any], ledger: Ledger | None) -> Any:
        """One DynamoDB operation on the boto3 client, for the command line."""
        params = _asked(operation, params)
        with _accounted(operation, ledger, params=params, region=self.settings.region) as answer:
            answer.append(getattr(self.client, _snake(operation))(**params))
            check_answer(operation, params, answer[0])
        return answer[0]


def _asked(operation: str, params: dict[str, Any]) -> dict[str, Any]:
    if operation in _DATA_OPERATIONS:
        return {"ReturnConsumedCapacity": "TOTAL", **params}
    return params


@contextlib.contextmanager
def _accounted(
    operation: str,
    ledger: Ledger | None,
    service: str = "DynamoDB",
    *,
    params: dict[str, Any],
    region: str,
    missing_table: bool = False,
) -> Iterator[list[Any]]:
    """Around one call: its attempts counted against `ledger` (the `before-send` hook reads
    it here), its time and capacity recorded, its failure mapped once (`_unavailable`); and,
    when telemetry is on, the process's metrics and the call's span (graph_api/telemetry).
    A read of an index the table lacks is mapped here too (`_missing_index`), and, with
    `missing_table` (the API's calls), a table that does not exist (`_missing_table`).
    The call appends its answer to the list it is given."""
    token = _active_ledger.set(ledger)
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
        _active_ledger.reset(token)
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


class Streams:
    """The DynamoDB Streams client of the change stream reader (`graph_api/events/reader.py`).

    Made as `Dynamo` makes its client (region, timeouts, no botocore retries: the reader backs
    off itself), at `streams_endpoint(settings)` unless `endpoint_url` names another (an
    emulator may serve it elsewhere); an endpoint this process started is reached with the
    same throwaway credentials as its DynamoDB, any other with botocore's credentials.
    """

    def __init__(self, settings: Settings, *, endpoint_url: str | None = None) -> None:
        ours = endpoint_url or settings.endpoint_url
        endpoint = ours or streams_endpoint(settings)
        self._clients = _Clients(
            "dynamodbstreams", settings, endpoint, local_credentials=bool(ours)
        )
        self.region = settings.region

    @property
    def endpoint(self) -> str:
        """The endpoint the calls go to (as botocore resolved it)."""
        return str(self._clients.sync.meta.endpoint_url)

    def register(self, event: str, handler: Callable[..., Any]) -> None:
        """A botocore event handler on every client of these Streams, now and later."""
        self._clients.register(event, handler)

    async def aclose(self) -> None:
        await self._clients.aclose()

    def close(self) -> None:
        self._clients.close()

    async def call(self, operation: str, params: dict[str, Any]) -> Any:
        """One call; busy or unreachable is `Unavailable` (as for `Dynamo`), other refusals
        (an expired iterator, trimmed data) stay the `ClientError` they are."""
        with _accounted(
            operation, None, "DynamoDB Streams", params=params, region=self.region
        ) as answer:
            client = await self._clients.current()
            answer.append(await getattr(client, _snake(operation))(**params))
        return answer[0]
