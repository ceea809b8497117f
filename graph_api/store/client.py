"""The one place that talks to DynamoDB: a boto3 client, awaited by the event loop, accounted.

boto3 is synchronous. On an endpoint our transport serves (plain HTTP: the embedded backend,
DynamoDB Local, Alternator) a call runs on the loop's thread in a greenlet, its network
waits awaited (store/greenlets.py); on any other (AWS, over HTTPS) it runs on a bounded
thread pool that the loop awaits. Each call names the `Ledger` of the GraphQL request it
serves; a botocore hook counts every HTTP attempt (retries included) against it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

from graph_api import __version__
from graph_api.errors import Unavailable
from graph_api.settings import Settings
from graph_api.store import greenlets, request_serializer
from graph_api.store.direct import DirectCalls
from graph_api.store.ledger import Call, Ledger
from graph_api.store.response_parser import DynamoResponseParserFactory
from graph_api.store.retry import THROTTLE_CODES, RetryBudget
from graph_api.store.transport import Transport

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
# Errors that mean "DynamoDB is busy or unreachable" (botocore makes one attempt).
_UNAVAILABLE_CODES = THROTTLE_CODES | {"InternalServerError", "ServiceUnavailable"}

_active_ledger: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar(
    "graph_api_ledger", default=None
)


def _user_agent() -> str:
    """Ours and botocore's, built once: left to itself botocore builds its User-Agent from
    about twenty parts twice a call (~0.1 ms of a Query's ~1.1 ms of client CPU)."""
    return f"graph-api/{__version__} {botocore.session.get_session().user_agent()}"


USER_AGENT = _user_agent()
CONNECT_TIMEOUT = 2  # seconds
READ_TIMEOUT = 5


def _config(settings: Settings, connections: int) -> Config:
    return Config(
        region_name=settings.region,
        # Deliberate: botocore does not retry (1 attempt). Its backoff sleeps on the
        # worker thread for up to seconds and cannot see the request's deadline; our one
        # retry policy (store/retry.py: one count a request, the deadline, the client's
        # retry budget) is used by every loop that sends a request again.
        retries={"mode": "standard", "total_max_attempts": 1},
        max_pool_connections=connections,
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        # Our requests are built from validated inputs by store/ alone; botocore's walk
        # of every parameter against its shape model costs ~0.5 ms of CPU a call.
        parameter_validation=False,
        user_agent=USER_AGENT,
    )


def _session() -> boto3.session.Session:
    """A boto3 session whose clients parse successful responses without botocore's walk
    over every attribute value (store/response_parser.py): items, and stream images."""
    session = botocore.session.get_session()
    session.register_component("response_parser_factory", DynamoResponseParserFactory())
    return boto3.session.Session(botocore_session=session)


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


class Dynamo:
    """A shared, thread-safe DynamoDB client; for endpoints our transport does not serve, an
    executor sized for `max_concurrency`."""

    def __init__(self, settings: Settings) -> None:
        workers = max(4, settings.max_concurrency)
        kwargs: dict[str, Any] = {"config": _config(settings, workers)}
        if settings.endpoint_url:
            kwargs.update(endpoint_url=settings.endpoint_url, **LOCAL_CREDENTIALS)
        self.client = _session().client("dynamodb", **kwargs)
        self.client.meta.events.register("before-send.dynamodb", self._count_attempt)
        request_serializer.install(self.client)
        # A plain-HTTP endpoint (embedded, DynamoDB Local, Alternator): our lean transport.
        # The endpoint botocore resolved: ours, or AWS_ENDPOINT_URL_DYNAMODB's, or AWS's.
        self.transport = Transport.for_endpoint(
            self.client.meta.endpoint_url, CONNECT_TIMEOUT, READ_TIMEOUT, workers
        )
        if self.transport is not None:
            self.transport.install(self.client)
        # On that transport, reads skip botocore's per-call pipeline (store/direct.py).
        self.direct = DirectCalls.for_client(
            self.client, self.transport, counters=(self._count_attempt,)
        )
        # Shared by every request on this client, as botocore's retry quota is.
        self.budget = RetryBudget()
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dynamodb")
        # Calls in flight on our transport, per event loop (a semaphore belongs to one): as
        # many as the pool would run and the transport keeps connections for.
        self._in_flight = workers
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.client.close()
        if self.transport is not None:
            self.transport.close()

    @staticmethod
    def _count_attempt(**_: Any) -> None:
        ledger = _active_ledger.get()
        if ledger is not None:
            ledger.count_request()

    async def call(self, operation: str, params: dict[str, Any], ledger: Ledger | None) -> Any:
        """One DynamoDB operation, its response awaited: on this thread when our transport
        sends it (its network waits awaited, store/greenlets.py), else on the thread pool."""
        loop = asyncio.get_running_loop()
        if self.transport is not None:
            gate = self._gates.get(loop)
            if gate is None:
                gate = self._gates[loop] = asyncio.Semaphore(self._in_flight)
            async with gate:
                return await greenlets.run(self.call_sync, operation, params, ledger)
        work: Callable[[], Any] = partial(self.call_sync, operation, params, ledger)
        return await loop.run_in_executor(self._executor, work)

    def call_sync(self, operation: str, params: dict[str, Any], ledger: Ledger | None) -> Any:
        if operation in _DATA_OPERATIONS:
            params = {"ReturnConsumedCapacity": "TOTAL", **params}
        token = _active_ledger.set(ledger)
        started = time.perf_counter()
        response: Any = None
        try:
            if self.direct is not None:
                response = self.direct.call(operation, params)
            if response is None:  # not a direct call: boto3's own path
                response = getattr(self.client, _snake(operation))(**params)
            return response
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in _UNAVAILABLE_CODES:
                log.warning("DynamoDB %s failed: %s", operation, code)
                raise Unavailable("DynamoDB is busy; try again shortly") from error
            raise
        except (ConnectionError, HTTPClientError) as error:  # refused, reset, timed out
            log.warning("DynamoDB %s unreachable: %s", operation, error)
            raise Unavailable("DynamoDB did not answer; try again shortly") from error
        finally:
            _active_ledger.reset(token)
            if ledger is not None:
                consumed = response.get("ConsumedCapacity") if response else None
                ledger.record(Call(operation, started, time.perf_counter()), consumed)


class Streams:
    """The DynamoDB Streams client of the change stream reader (`graph_api/events/reader.py`).

    Made as `Dynamo` makes its client (region, timeouts, no botocore retries: the reader backs
    off itself); an endpoint this process started (`settings.endpoint_url`) serves Streams too
    and is reached with the same throwaway credentials, otherwise botocore resolves the
    endpoint (`AWS_ENDPOINT_URL_DYNAMODB_STREAMS`, `AWS_ENDPOINT_URL`, or AWS). Its calls run
    on a small executor of its own, so that polling shards never holds a thread a GraphQL
    request waits for.
    """

    def __init__(
        self, settings: Settings, *, workers: int = 4, endpoint_url: str | None = None
    ) -> None:
        kwargs: dict[str, Any] = {"config": _config(settings, workers)}
        endpoint = endpoint_url or settings.endpoint_url  # an emulator may serve it elsewhere
        if endpoint:
            kwargs.update(endpoint_url=endpoint, **LOCAL_CREDENTIALS)
        self.client = _session().client("dynamodbstreams", **kwargs)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="streams")

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    async def call(self, operation: str, params: dict[str, Any]) -> Any:
        """Run one Streams operation on this client's executor and await its response."""
        loop = asyncio.get_running_loop()
        work: Callable[[], Any] = partial(self.call_sync, operation, params)
        return await loop.run_in_executor(self._executor, work)

    def call_sync(self, operation: str, params: dict[str, Any]) -> Any:
        """One call; busy or unreachable is `Unavailable` (as for `Dynamo`), other refusals
        (an expired iterator, trimmed data) stay the `ClientError` they are."""
        try:
            return getattr(self.client, _snake(operation))(**params)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in _UNAVAILABLE_CODES:
                log.warning("DynamoDB Streams %s failed: %s", operation, code)
                raise Unavailable("DynamoDB Streams is busy; try again shortly") from error
            raise
        except (ConnectionError, HTTPClientError) as error:
            log.warning("DynamoDB Streams %s unreachable: %s", operation, error)
            raise Unavailable("DynamoDB Streams did not answer; try again shortly") from error
