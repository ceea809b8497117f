"""ASGI middleware: request ids on every response, and caps on a request's headers and body.

One pure ASGI layer does all three (`RequestGuard`): it reads the request's headers once,
builds nothing for a request it lets through but what it must (the id, the body it read),
and computes a refusal's media type only when it refuses.
"""

from __future__ import annotations

import json
import logging
import re
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graph_api import logs
from graph_api.errors import INTERNAL_SERVER_ERROR, BadUserInput, error_body, masked_message
from graph_api.http.negotiation import response_media_type

log = logging.getLogger("graph_api.middleware")  # its name before the move to http/: kept

REQUEST_ID_HEADER = b"x-request-id"
# Headers a request may have (Apache's LimitRequestFields); their bytes are bounded by the
# server (`hosting.MAX_HEAD_BYTES`), their number here, for every host alike.
MAX_HEADERS = 100
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_JSON_HEADERS = [(b"content-type", b"application/json")]
_TOO_MANY_HEADERS = f"more than {MAX_HEADERS} request headers"


async def _refuse(send: Send, status: int, accept: bytes | None, error: object) -> None:
    """A refusal: `error` as JSON, in the type the client's Accept asks for."""
    media_type = response_media_type(accept.decode("latin-1") if accept else None)
    body = json.dumps(error).encode()
    headers = [(b"content-type", media_type.encode()), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _over(declared: bytes, limit: int) -> bool:
    """Whether a Content-Length declares more than `limit` bytes. Its digits are counted
    before they are converted: `int()` refuses more than 4,300 of them (ValueError), and a
    number that long is over any limit. One that is not a number is left to the body's own
    count, as before."""
    if not declared.isdigit():
        return False
    digits = declared.lstrip(b"0")
    return len(digits) > len(str(limit)) or int(digits or b"0") > limit


class RequestGuard:
    """Every request, http or websocket, gets an id (the client's `X-Request-Id`, when it
    sent a sane one, else a fresh one) in `scope["state"]` and in the log's context, and
    an http answer carries it back. An http request is refused, with a coded GraphQL error
    and the id, when it has more than MAX_HEADERS headers (431, Request Header Fields Too
    Large, RFC 6585), or a body or query string over `limit` bytes (413), declared or
    streamed: its body is read up to the limit before the app sees it, then replayed.
    Whatever escapes the app before its answer started gets a masked 500 that names the
    request."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        sent_id = accept = declared = None
        for name, value in headers:  # one pass, for the three fields read here
            if name == REQUEST_ID_HEADER:
                sent_id = value
            elif name == b"accept":
                accept = value
            elif name == b"content-length":
                declared = value
        request_id = sent_id.decode("latin-1") if sent_id is not None else ""
        if not _SANE_REQUEST_ID.fullmatch(request_id):
            request_id = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        token = logs.request_id.set(request_id)
        try:
            if kind == "websocket":  # one id for the connection and its operations
                await self.app(scope, receive, send)
            else:
                await self._http(scope, receive, send, request_id, accept, declared)
        finally:
            logs.request_id.reset(token)

    async def _http(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        request_id: str,
        accept: bytes | None,
        declared: bytes | None,
    ) -> None:
        id_header = (REQUEST_ID_HEADER, request_id.encode())
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [h for h in message.get("headers", ()) if h[0] != REQUEST_ID_HEADER]
                headers.append(id_header)
                message["headers"] = headers
            await send(message)

        try:
            await self._bounded(scope, receive, send_with_id, accept, declared)
        except Exception:
            # Whatever escaped the app still gets a coded answer that names the request.
            log.exception("unexpected error outside GraphQL execution")
            if started:
                raise
            answer = json.dumps(
                error_body(masked_message(request_id), INTERNAL_SERVER_ERROR, requestId=request_id)
            ).encode()
            await send_with_id(
                {"type": "http.response.start", "status": 500, "headers": _JSON_HEADERS}
            )
            await send_with_id({"type": "http.response.body", "body": answer})

    async def _bounded(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        accept: bytes | None,
        declared: bytes | None,
    ) -> None:
        """The app, for a request within the bounds; else the refusal."""
        limit = self.limit
        if len(scope["headers"]) > MAX_HEADERS:
            error = error_body(_TOO_MANY_HEADERS, BadUserInput.code, limit=MAX_HEADERS)
            await _refuse(send, 431, accept, error)
            return
        if len(scope.get("query_string", b"")) > limit:
            await self._too_big(send, accept, "query string")
            return
        if declared is not None and _over(declared, limit):
            await self._too_big(send, accept, "request body")
            return
        # Read the body up to the limit, then replay it to the app.
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_big(send, accept, "request body")
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_big(self, send: Send, accept: bytes | None, what: str) -> None:
        message = f"{what} over the limit of {self.limit} bytes"
        await _refuse(send, 413, accept, error_body(message, BadUserInput.code, limit=self.limit))
