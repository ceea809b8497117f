"""The HTTP under aiodynamo: one aiohttp session, and what we promise of every answer.

aiodynamo's `Client` takes its HTTP as a callable (`aiodynamo.http.types.HttpImplementation`,
its documented seam): `Wire` is ours, on aiohttp. Per attempt it

- counts the request against the GraphQL request's `Ledger` (`ledger.active`);
- runs the hooks registered on the client (`Hooks`: tests' faults, a bench's clock), which
  may answer for DynamoDB;
- sends it (`AWS_CA_BUNDLE`'s certificates trusted, botocore's timeouts), and reads the body
  within `MAX_BODY` (16 MB, the most DynamoDB sends: a larger answer is refused as soon as it
  says or shows it, `ResponseTooLarge`);
- checks the body against its `x-amz-crc32` (`ChecksumError` on a mismatch);
- decodes a successful answer with orjson, refusing one that is not a JSON object
  (`ResponseParserError`: a proxy's HTML, a cut body). The decoded answer goes to the caller
  through `answer_slot` (aiodynamo gets `{}` to decode, which costs it nothing), so it is
  decoded once, by orjson.

Its errors are aiohttp's, mapped with aiodynamo's at one boundary (store/wire_errors.py).
"""

from __future__ import annotations

import contextvars
import json
import ssl
import urllib.parse
import urllib.request
import zlib
from collections.abc import Awaitable
from typing import Any

import aiohttp
import orjson
from aiodynamo.http.types import Request, Response
from botocore.exceptions import ChecksumError, HTTPClientError
from botocore.hooks import HierarchicalEmitter
from botocore.parsers import ResponseParserError

from graph_api.store import ledger

MAX_BODY = 16 * 1024 * 1024  # bytes: the largest answer DynamoDB sends (BatchGetItem)
CONNECT_TIMEOUT = 2  # seconds
READ_TIMEOUT = 5
_EMPTY = Response(200, b"{}")
TARGET = "X-Amz-Target"  # DynamoDB_20120810.<Operation>


class ResponseTooLarge(HTTPClientError):
    fmt = "The answer from {endpoint_url} is larger than DynamoDB sends ({limit} bytes)"


# The decoded successful answer of the call running in this context (store/client.py).
answer_slot: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "graph_api_answer", default=None
)


def json_object(body: bytes) -> dict[str, Any]:
    """A successful answer's body as DynamoDB writes it, a JSON object; else
    `ResponseParserError` (botocore's error for an answer it cannot read)."""
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:  # NaN, a lone surrogate: JSON that the stdlib reads
            decoded = json.loads(body.decode("utf-8"))
        except ValueError:  # not UTF-8, not JSON, empty
            decoded = None
    if not isinstance(decoded, dict):
        raise ResponseParserError(f"not DynamoDB's JSON: {body[:80]!r}")
    return decoded


def check_crc32(headers: Any, body: bytes) -> None:
    """`ChecksumError` when DynamoDB's `x-amz-crc32` of the body does not match it."""
    expected = headers.get("x-amz-crc32")
    if expected is not None and str(zlib.crc32(body) & 0xFFFFFFFF) != str(expected):
        raise ChecksumError(
            checksum_type="crc32",
            expected_checksum=str(expected),
            actual_checksum=str(zlib.crc32(body) & 0xFFFFFFFF),
        )


def ssl_context(ca_bundle: str | None) -> ssl.SSLContext | bool:
    """The TLS trust of the calls: `ca_bundle`'s certificates (botocore's `AWS_CA_BUNDLE`
    or the profile's `ca_bundle`), else the system's."""
    if not ca_bundle:
        return True
    return ssl.create_default_context(cafile=ca_bundle)


def proxy_for(url: str) -> str | None:
    """The proxy botocore would send `url` through (`HTTPS_PROXY`/`HTTP_PROXY`, unless
    `NO_PROXY` names the host), looked up once per session: aiohttp's own lookup
    (`trust_env`) reads the environment and `.netrc` on a worker thread every request."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def signed_host(url: str) -> str | None:
    """The Host header to send to `url` when it names a port: aiodynamo's SigV4 signs the
    host without it (`host:<name>`), aiohttp would send `<name>:<port>`, and an endpoint that
    checks signatures (Alternator with authorization on, a signing proxy) would refuse the
    mismatch. None on the scheme's own port (AWS), where both agree."""
    parts = urllib.parse.urlsplit(url)
    return parts.hostname if parts.port is not None else None


class Model:
    """What a hook learns of the operation (botocore's `OperationModel.name`)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class Hooks:
    """botocore-style event handlers on a client (`register`, botocore's event names):
    `before-parameter-build.dynamodb.<Op>` (params), `before-call` (model, params with the
    body), `before-send` (request; a handler's response, or awaitable of one, answers for
    DynamoDB), `after-call` (parsed, model) and `after-call-error` (exception)."""

    def __init__(self) -> None:
        self._emitter = HierarchicalEmitter()
        self._handlers: list[tuple[str, Any]] = []

    @property
    def any(self) -> bool:
        return bool(self._handlers)

    def register(self, event: str, handler: Any) -> None:
        self._handlers.append((event, handler))
        self._emitter.register(event, handler)

    def unregister(self, event: str, handler: Any) -> None:
        """As botocore's: a handler not registered is no error."""
        if (event, handler) in self._handlers:
            self._handlers.remove((event, handler))
        self._emitter.unregister(event, handler)

    def emit(self, event: str, **kwargs: Any) -> None:
        self._emitter.emit(event, **kwargs)

    async def answer(self, event: str, **kwargs: Any) -> Any:
        """The first handler's response to `event` (awaited if awaitable), or None."""
        _, response = self._emitter.emit_until_response(event, **kwargs)
        if isinstance(response, Awaitable):
            response = await response
        return response


class Wire:
    """aiodynamo's HTTP implementation on one aiohttp session (module docstring)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        hooks: Hooks,
        *,
        proxy: str | None = None,
        host: str | None = None,
        limit: int = MAX_BODY,
    ) -> None:
        self.session = session
        self.hooks = hooks
        self.proxy = proxy
        # The Host header sent, when it must differ from aiohttp's (`signed_host`).
        self.host = {"Host": host} if host else None
        self.limit = limit

    async def __call__(self, request: Request) -> Response:
        active = ledger.active.get()
        if active is not None:
            active.count_request()
        status, headers, body = await self._send(request)
        check_crc32(headers, body)
        if status != 200:
            return Response(status, body)
        answer = json_object(body)
        # As botocore reports it: traces name the request by it (telemetry/otel.py).
        answer["ResponseMetadata"] = {
            "RequestId": headers.get("x-amzn-RequestId", ""),
            "HTTPStatusCode": status,
        }
        slot = answer_slot.get()
        if slot is None:  # a caller of aiodynamo's own (none of ours): let it decode
            return Response(200, orjson.dumps(answer))
        slot.append(answer)
        return _EMPTY

    async def _send(self, request: Request) -> tuple[int, Any, bytes]:
        if self.hooks.any:
            operation = (request.headers or {}).get(TARGET, "").rpartition(".")[2]
            model = Model(operation)
            self.hooks.emit(
                f"before-call.dynamodb.{operation}",
                model=model,
                params={"body": request.body, "url": request.url, "headers": request.headers},
            )
            response = await self.hooks.answer(
                f"before-send.dynamodb.{operation}", request=request, model=model
            )
            if response is not None:
                return int(response.status_code), response.headers, bytes(response.content)
        headers = request.headers if self.host is None else {**(request.headers or {}), **self.host}
        async with self.session.post(
            request.url, headers=headers, data=request.body, proxy=self.proxy
        ) as response:
            return response.status, response.headers, await read_within(response, self.limit)


async def read_within(raw: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body of `raw`, or `ResponseTooLarge` as soon as it says or shows it holds more than
    `limit` bytes (the connection is then closed, not read to its end)."""
    url = str(raw.url)
    declared = raw.content_length
    if declared is not None:
        if declared > limit:
            raw.close()
            raise ResponseTooLarge(endpoint_url=url, limit=limit)
        return await raw.read()  # exactly what it declared
    body = bytearray()
    try:
        async for chunk in raw.content.iter_any():
            body += chunk
            if len(body) > limit:
                raise ResponseTooLarge(endpoint_url=url, limit=limit)
    except BaseException:  # a cancellation too: the connection is not reused
        raw.close()
        raise
    return bytes(body)
