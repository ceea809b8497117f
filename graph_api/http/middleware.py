"""ASGI middleware: request ids on every response, and caps on a request's headers and body."""

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


class RequestIdMiddleware:
    """Gives every request an id (the client's, when it sent a sane one) and echoes it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        sent = dict(scope["headers"]).get(REQUEST_ID_HEADER, b"").decode("latin-1")
        request_id = sent if _SANE_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        if scope["type"] == "websocket":  # one id for the connection and its operations
            token = logs.request_id.set(request_id)
            try:
                await self.app(scope, receive, send)
            finally:
                logs.request_id.reset(token)
            return
        token = logs.request_id.set(request_id)

        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [h for h in message.get("headers", []) if h[0] != REQUEST_ID_HEADER]
                message["headers"] = [*headers, (REQUEST_ID_HEADER, request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # Whatever escaped the app still gets a coded answer that names the request.
            log.exception("unexpected error outside GraphQL execution")
            if started:
                raise
            body = json.dumps(
                error_body(masked_message(request_id), INTERNAL_SERVER_ERROR, requestId=request_id)
            ).encode()
            await send_with_id(
                {
                    "type": "http.response.start",
                    "status": 500,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send_with_id({"type": "http.response.body", "body": body})
        finally:
            logs.request_id.reset(token)


class HeaderCountLimit:
    """Refuses a request with more than MAX_HEADERS headers: 431 (Request Header Fields Too
    Large, RFC 6585) and a coded GraphQL error, before anything reads them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or len(scope["headers"]) <= MAX_HEADERS:
            await self.app(scope, receive, send)
            return
        message = f"more than {MAX_HEADERS} request headers"
        body = json.dumps(error_body(message, BadUserInput.code, limit=MAX_HEADERS)).encode()
        accept = dict(scope["headers"]).get(b"accept", b"").decode("latin-1") or None
        await send(
            {
                "type": "http.response.start",
                "status": 431,
                "headers": [
                    (b"content-type", response_media_type(accept).encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class BodySizeLimit:
    """Refuses request bodies over `limit` bytes with 413 and a coded GraphQL error,
    whether the client declared the length or streamed the body; and a query string over
    it (a GET's document and variables), which the server may let through."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        media_type = response_media_type(headers.get(b"accept", b"").decode("latin-1") or None)
        if len(scope.get("query_string", b"")) > self.limit:
            await self._refuse(send, media_type, "query string")
            return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send, media_type)
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
            if size > self.limit:
                await self._refuse(send, media_type)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, media_type: str, what: str = "request body") -> None:
        body = json.dumps(
            error_body(
                f"{what} over the limit of {self.limit} bytes",
                BadUserInput.code,
                limit=self.limit,
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", media_type.encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
