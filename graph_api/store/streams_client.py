"""The change stream reader's DynamoDB Streams client: aiobotocore's `dynamodbstreams`.

DynamoDB Streams is another API than DynamoDB's (aiodynamo does not speak it), read off the
request path (`graph_api/events/reader.py`): it keeps a library client of its own, here, and
nothing on the request path imports this module. One aiobotocore client per running event
loop (an aiohttp session belongs to its loop), closed by `aclose` or when the loop's runner
ends; botocore's own retries off (the reader backs off itself, store/retry.py's `STREAM`).
Its calls are accounted and mapped as the DynamoDB client's are (`client.accounted`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import weakref
from collections.abc import Callable
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession

from graph_api.settings import Settings
from graph_api.store.client import (
    CONNECTIONS,
    LOCAL_CREDENTIALS,
    USER_AGENT,
    _loader,
    accounted,
    endpoint_of,
    streams_endpoint,
)
from graph_api.store.wire import CONNECT_TIMEOUT, READ_TIMEOUT


@functools.cache  # a few operation names, each spelled out once rather than every call
def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


def _session() -> AioSession:
    session = AioSession()
    session.register_component("data_loader", _loader())
    return session


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


class Streams:
    """The DynamoDB Streams client of the change stream reader (`graph_api/events/reader.py`).

    Made with the DynamoDB client's region and timeouts, no botocore retries, at
    `streams_endpoint(settings)` unless `endpoint_url` names another (an emulator may serve
    it elsewhere); an endpoint this process started is reached with throwaway credentials,
    any other with botocore's.
    """

    def __init__(self, settings: Settings, *, endpoint_url: str | None = None) -> None:
        ours = endpoint_url or settings.endpoint_url
        self._endpoint = ours or streams_endpoint(settings)
        self._kwargs: dict[str, Any] = {}
        if self._endpoint:
            self._kwargs["endpoint_url"] = self._endpoint
        if ours:
            self._kwargs.update(LOCAL_CREDENTIALS)
        self._config = AioConfig(
            region_name=settings.region,
            retries={"mode": "legacy", "total_max_attempts": 1},
            max_pool_connections=max(CONNECTIONS, settings.max_concurrency),
            connect_timeout=CONNECT_TIMEOUT,
            read_timeout=READ_TIMEOUT,
            user_agent=USER_AGENT,
        )
        self.region = settings.region
        self._session = _session()
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Open] = (
            weakref.WeakKeyDictionary()
        )
        self._hooks: list[tuple[str, Callable[..., Any]]] = []

    @property
    def endpoint(self) -> str:
        """The endpoint the calls go to (as botocore resolves it)."""
        return self._endpoint or endpoint_of("dynamodbstreams", self.region)

    def register(self, event: str, handler: Callable[..., Any]) -> None:
        """A botocore event handler on every client of these Streams, now and later."""
        self._hooks.append((event, handler))
        for opened in list(self._by_loop.values()):
            if opened.client is not None:
                opened.client.meta.events.register(event, handler)

    def _hook(self, client: Any) -> Any:
        for event, handler in self._hooks:
            client.meta.events.register(event, handler)
        return client

    async def _current(self) -> Any:
        loop = asyncio.get_running_loop()
        opened = self._by_loop.get(loop)
        if opened is None:
            opened = self._by_loop[loop] = _Open()
            context = self._session.create_client(
                "dynamodbstreams", config=self._config, **self._kwargs
            )
            # A context of its own: the task outlives the call that happens to open it.
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
        opened = self._by_loop.pop(asyncio.get_running_loop(), None)
        if opened is not None:
            await opened.close()
            self._session = _session()

    def close(self) -> None:
        """Nothing to close off a loop: loops' clients close with their loop."""

    async def call(self, operation: str, params: dict[str, Any]) -> Any:
        """One call; busy or unreachable is `Unavailable` (as for `Dynamo`), other refusals
        (an expired iterator, trimmed data) stay the `ClientError` they are."""
        with accounted(
            operation, None, "DynamoDB Streams", params=params, region=self.region
        ) as answer:
            client = await self._current()
            answer.append(await getattr(client, _snake(operation))(**params))
        return answer[0]
