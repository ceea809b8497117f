"""graphql-transport-ws on `/graphql`'s websocket: Strawberry's handler with this API's
limits (`WebSocketHandler`), the close codes it sends, and the checks of a message before
Strawberry reads it. The view that builds it is `graph_api.http.endpoint`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from graphql import GraphQLError
from starlette.websockets import WebSocketDisconnect

from graph_api.errors import BadRequest, BadUserInput, ForbiddenDocument, PersistedQueryNotFound
from graph_api.events.hub import Group
from graph_api.graph.engine.context import Context
from graph_api.http.graphql_http import is_request_error_response
from graph_api.http.persisted import Documents, Resolved, read_id
from graph_api.internals.strawberry import (
    BaseGraphQLTransportWSHandler,
    ConnectionInitMessage,
    Message,
    Operation,
    SubscribeMessage,
)

NO_DOCUMENT = "send payload.query, or name a document by documentId or extensions.persistedQuery"
CONNECTION_INIT_SECONDS = 10.0  # a websocket that never says connection_init is closed
# Close codes (RFC 6455's registry), both of which graphql-ws's client treats as worth a
# reconnection, not as fatal (its `isFatalInternalCloseCode`):
IDLE_CLOSE = 1000  # Normal Closure: its purpose is over; a lazy client reconnects on demand
BEHIND_CLOSE = 1013  # Try Again Later: "a temporary condition", the server sheds a client
# Message Too Big (RFC 6455), what uvicorn's own cap (`ws_max_size`, which `serve` sets to
# the same limit) sends, so a client hears one code whichever layer refused; graphql-ws's
# client takes it as fatal: sending the same message again would not help.
TOO_BIG_CLOSE = 1009
# graphql-transport-ws's codes: a message the protocol does not allow (Strawberry sends it
# for bad JSON or an unknown type), and a connection whose `connection_init` is refused.
BAD_MESSAGE_CLOSE = 4400
FORBIDDEN_CLOSE = 4403
# The connection's token expired (graphql-ws's 4401 Unauthorized): its events are no longer
# the caller's to receive; a client reconnects with a fresh token.
EXPIRED_CLOSE = 4401
# How long the subscriptions of a connection that fell behind get to send their error and
# `complete` before the close: they queue behind what the client has not read yet, and the
# close could not overtake them on the wire anyway. A bound, for an operation that hangs.
ERRORS_BEFORE_CLOSE_SECONDS = 30.0


class _Operations(dict[str, Operation[Context, None]]):
    """A connection's operations, telling it whenever one is added or removed (Strawberry
    adds and removes them in several places)."""

    def __init__(self, changed: Callable[[], None]) -> None:
        super().__init__()
        self._changed = changed

    def __setitem__(self, key: str, value: Operation[Context, None]) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._changed()

    def pop(self, key: str, *default: Any) -> Any:
        value = super().pop(key, *default)
        self._changed()
        return value


class MessageTooBig(Exception):
    """A websocket message over the byte cap, refused before it is decoded."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"message over the limit of {limit} bytes (GRAPH_API_MAX_BODY_BYTES)")


class Refused(Exception):
    """`connection_init` refused: the close code and reason."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


def over(text: str | bytes, limit: int) -> bool:
    """Whether `text` takes more than `limit` bytes as UTF-8 (encoded only when it may)."""
    if len(text) > limit:
        return True
    if isinstance(text, bytes) or len(text) * 4 <= limit:
        return False
    return len(text.encode("utf-8", "surrogatepass")) > limit


def close_reason(text: str) -> str:
    """A close frame's reason holds at most 123 bytes (RFC 6455)."""
    return text.encode()[:123].decode(errors="ignore")


def malformed(message: object) -> str | None:
    """Why a graphql-transport-ws message is not one this server handles, or None.
    Strawberry reads fields without checking their types; an unknown type and a bad
    `connection_init` payload it refuses itself."""
    if not isinstance(message, dict):
        return "a message must be a JSON object"
    kind = message.get("type")
    if not isinstance(kind, str):
        return "a message needs a string type"
    if kind in ("subscribe", "complete") and not isinstance(message.get("id"), str):
        return f"a {kind} message needs a string id"
    if kind != "subscribe":
        return None
    payload = message.get("payload")
    if not isinstance(payload, dict):
        return "a subscribe message's payload must be an object"
    if payload.get("query") is None:  # a persisted document's id instead (`persisted`),
        # judged by `Documents.resolve` in `handle_subscribe`: a bad one is a coded error of
        # the operation, not a close of the connection and all its subscriptions.
        extensions = payload.get("extensions")
        if read_id(payload) is None and not (
            isinstance(extensions, dict) and "persistedQuery" in extensions
        ):
            return "payload.query must be a string"
    elif not isinstance(payload.get("query"), str):
        return "payload.query must be a string"
    for name, kind_ in (("operationName", str), ("variables", dict), ("extensions", dict)):
        if payload.get(name) is not None and not isinstance(payload[name], kind_):
            what = "a string" if kind_ is str else "an object"
            return f"payload.{name} must be {what}"
    return None


class _View(Protocol):
    """What the handler reads of the view that built it (`endpoint.GraphQLEndpoint`)."""

    documents: Documents


class WebSocketHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """graphql-transport-ws, with the limits of this API:

    - a message over GRAPH_API_MAX_BODY_BYTES closes the connection (1009) undecoded, and a
      malformed one (not an object, a query that is not a string, ...) with 4400;
    - when reads need auth, `connection_init` without a valid token closes it (4403), so
      no document of an anonymous client is ever parsed;
    - the per-connection limit refused with a coded error (Strawberry's has no code);
    - a `subscribe` may name its document by `documentId` (graph_api.http.persisted), and
      under GRAPH_API_DOCUMENTS=trusted must: refused with a coded error before parsing;
    - a connection with no operation for `GRAPH_API_WS_IDLE_SECONDS` is closed (1000);
    - a connection whose token expires is closed then (4401): nothing is sent after the
      token stops being accepted (`Principal.expires`: its `exp` plus the leeway);
    - when one of its subscriptions falls `GRAPH_API_SUBSCRIPTION_QUEUE` events behind (a
      client that does not read: the socket's buffers fill, sends wait, events queue up),
      every subscription of the connection ends with UNAVAILABLE (`hub.Group`) and the
      connection is closed (1013): a client that cannot keep up is shed, with a reason.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = self.context.services.settings
        self.idle_seconds = settings.ws_idle_seconds
        self.queue_limit = settings.subscription_queue
        # Ours, not Strawberry's `max_subscriptions_per_connection`: its refusal has no code.
        self.operations_limit = settings.max_subscriptions_per_connection
        # APQ texts to register once their operation runs, by operation id (`_registered`).
        self._registrations: dict[str, Resolved] = {}
        self.operations = _Operations(self._operations_changed)
        self.context.subscriptions = Group(self._fell_behind)
        self._idle: asyncio.TimerHandle | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None
        self._closed = False

    def on_request_accepted(self) -> None:
        super().on_request_accepted()
        self._operations_changed()  # idle from the start

    async def handle(self) -> None:
        try:
            await super().handle()
        except MessageTooBig as error:
            self._closed = True
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await self.websocket.close(code=TOO_BIG_CLOSE, reason=str(error))

    async def handle_message(self, message: Message) -> None:
        problem = malformed(message)
        if problem is not None:
            await self.handle_invalid_message(problem)
            return
        await super().handle_message(message)

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        try:
            await super().handle_connection_init(message)
        except Refused as refused:
            await self.websocket.close(code=refused.code, reason=close_reason(refused.reason))
            return
        principal = self.context.auth.principal
        if principal is not None and principal.expires is not None and self._expiry is None:
            delay = max(0.0, principal.expires - time.time())
            self._expiry = asyncio.get_running_loop().call_later(delay, self._token_expired)

    async def shutdown(self) -> None:
        self._closed = True
        for timer in (self._idle, self._expiry):
            if timer is not None:
                timer.cancel()
        await super().shutdown()
        if self._closing is not None:
            self._closing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._closing

    async def handle_subscribe(self, message: SubscribeMessage) -> None:
        if self._closed or self._closing is not None:
            return  # closing: nothing new starts
        limit = self.operations_limit
        if (
            self.connection_acknowledged
            and len(self.operations) >= limit
            and message["id"] not in self.operations  # a duplicate id: Strawberry's 4409
        ):
            error = GraphQLError(
                f"this connection holds its limit of {limit} operations;"
                " complete one first, or open another connection",
                extensions={"code": BadUserInput.code, "limit": limit},
            )
            await self.send_message(
                {"id": message["id"], "type": "error", "payload": [error.formatted]}
            )
            return
        if self.connection_acknowledged and message["id"] not in self.operations:
            payload = message["payload"]
            try:
                view = cast(_View, self.view)
                resolved = view.documents.resolve(
                    payload.get("query"), read_id(payload), payload.get("extensions")
                )
                if resolved is None:  # e.g. `"persistedQuery": null`: no text, no id
                    raise BadRequest(NO_DOCUMENT)
            except (BadRequest, PersistedQueryNotFound, ForbiddenDocument) as refused:
                coded = GraphQLError(refused.message, extensions={"code": refused.code})
                await self.send_message(
                    {"id": message["id"], "type": "error", "payload": [coded.formatted]}
                )
                return
            payload["query"] = resolved.text
            if resolved.register is not None:
                self._registrations[message["id"]] = resolved
        await super().handle_subscribe(message)

    async def send_message(self, message: Message) -> None:
        self._registered(message)
        if not self._closed:  # after the close, an operation's last words have nowhere to go
            await super().send_message(message)

    def _registered(self, message: Message) -> None:
        """An APQ text sent with an operation is registered with its first result that is
        not a request error (`persisted.Documents.ran`); an error or a `complete` first
        drops it."""
        id_ = message.get("id")
        if not isinstance(id_, str) or id_ not in self._registrations:
            return
        if message["type"] == "next":
            if is_request_error_response(cast(dict[str, Any], message.get("payload") or {})):
                return  # refused: its `complete` follows
            cast(_View, self.view).documents.ran(self._registrations.pop(id_))
        elif message["type"] in ("error", "complete"):
            del self._registrations[id_]

    def _operations_changed(self) -> None:
        # An operation ended without a result (the client completed it first): its text
        # waits no longer, so a connection holds at most one per operation it holds.
        for id_ in self._registrations.keys() - self.operations.keys():
            del self._registrations[id_]
        if self.operations or self._closed or self._closing is not None:
            if self._idle is not None:
                self._idle.cancel()
                self._idle = None
        elif self._idle is None:
            self._idle = asyncio.get_running_loop().call_later(self.idle_seconds, self._idled)

    def _idled(self) -> None:
        self._idle = None
        reason = f"idle: no subscription for {self.idle_seconds:g} s (GRAPH_API_WS_IDLE_SECONDS)"
        self._closing = asyncio.create_task(self._close(IDLE_CLOSE, reason))

    def _token_expired(self) -> None:
        self._expiry = None
        if self._closed:
            return
        self._closed = True  # from now on nothing is sent: not even an event resolved already
        if self._closing is not None:
            self._closing.cancel()  # an idle or a shedding close: this one says why
        reason = "the token expired: connect again with a fresh one"
        self._closing = asyncio.create_task(self._send_close(EXPIRED_CLOSE, reason))

    def _fell_behind(self) -> None:
        """Called by the hub, on the event loop, when a subscription of ours fell behind."""
        if self._closing is None and not self._closed:
            self._closing = asyncio.create_task(self._close_behind())

    async def _close_behind(self) -> None:
        tasks = [operation.task for operation in self.operations.values() if operation.task]
        if tasks:
            await asyncio.wait(tasks, timeout=ERRORS_BEFORE_CLOSE_SECONDS)
        reason = (
            f"a subscription fell {self.queue_limit} events behind"
            " (GRAPH_API_SUBSCRIPTION_QUEUE); subscribe again and read the current state"
        )
        await self._close(BEHIND_CLOSE, reason)

    async def _close(self, code: int, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        await self._send_close(code, reason)

    async def _send_close(self, code: int, reason: str) -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):  # already gone
            await self.websocket.close(code=code, reason=reason)
