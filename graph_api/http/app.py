"""The HTTP surface: Starlette routes `/graphql` (GraphiQL in a browser), the probes
`/healthz` and `/readyz` (`graph_api.http.health`), and `/metrics` (Prometheus' text format,
graph_api/telemetry).

`/graphql` speaks GraphQL over HTTP (`graph_api.http.graphql_http`: media types, statuses) and
serves GraphiQL with its own assets (`graph_api.http.graphiql`: no CDN). A document may be
named by its id (`graph_api.http.persisted`), the first gate of every request.
The app borrows `Services`; whoever made them (the CLI, a test) closes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import timedelta
from types import MappingProxyType
from typing import Any, cast

import orjson
from cross_web import AsyncHTTPRequestAdapter, HTTPException, StarletteRequestAdapter
from graphql import GraphQLError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.subscriptions import (
    GRAPHQL_SSE_PROTOCOL,
    GRAPHQL_TRANSPORT_WS_PROTOCOL,
    GRAPHQL_WS_PROTOCOL,
)
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api import telemetry
from graph_api.errors import (
    ApiError,
    BadRequest,
    BadUserInput,
    ForbiddenDocument,
    NotFound,
    PersistedQueryNotFound,
    error_body,
)
from graph_api.events.hub import Group
from graph_api.graph.auth.access import refusal
from graph_api.graph.context import Context, Services
from graph_api.graph.schema import build_schema, operation_type
from graph_api.http import graphiql, health, json_text
from graph_api.http.cors import cors_middleware
from graph_api.http.graphql_http import (
    BAD_REQUEST,
    JSON,
    is_request_error,
    is_request_error_response,
    status_for,
)
from graph_api.http.legacy_ws import LegacyProtocolRefusal
from graph_api.http.middleware import RequestGuard
from graph_api.http.negotiation import Stream, negotiate, response_media_type
from graph_api.http.persisted import Documents, Resolved, cache_control, read_id
from graph_api.http.sse import LineFeedSSETransport
from graph_api.internals.starlette import header_fields
from graph_api.internals.strawberry import (
    BaseGraphQLTransportWSHandler,
    BaseRequestProtocol,
    ConnectionInitMessage,
    InvalidOperationTypeError,
    Message,
    Operation,
    SubscribeMessage,
    protocol_of,
    run_as,
)
from graph_api.writes import finisher

NO_DOCUMENT = "send payload.query, or name a document by documentId or extensions.persistedQuery"
STREAM_ONLY = (
    "a subscription runs over a websocket (graphql-transport-ws) or as GraphQL over SSE"
    " (send Accept: text/event-stream), not as a plain HTTP request"
)
GET_MUTATION = "mutations are not allowed when using GET"  # Strawberry's words, over a stream too
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
WWW_AUTHENTICATE = (b"www-authenticate", b"Bearer")  # on a 401 (RFC 6750)


# A POST's JSON body as `parse_json` decoded it, for `resolve_document` (the request's task
# only: set empty before Strawberry parses each request).
_body: ContextVar[object] = ContextVar("graph_api_request_body", default=None)


class _StreamIt(Exception):
    """A subscription asked over HTTP by a client that accepts a stream: it runs as one."""


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
        limit = self.max_subscriptions_per_connection
        if (
            self.connection_acknowledged
            and limit is not None
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
                view = cast(GraphQLEndpoint, self.view)
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
            cast(GraphQLEndpoint, self.view).documents.ran(self._registrations.pop(id_))
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


class _RequestAdapter(StarletteRequestAdapter):
    """Strawberry's adapter, with the request it adapts at hand (for its `state`)."""

    def __init__(self, request: Request) -> None:
        super().__init__(request)
        self.request = request


class GraphQLEndpoint(GraphQL[Context, None]):
    graphql_transport_ws_handler_class = WebSocketHandler
    # The legacy subprotocol is accepted only to be refused with a reason (`legacy_ws`).
    graphql_ws_handler_class = LegacyProtocolRefusal  # type: ignore[assignment]
    request_adapter_class = _RequestAdapter
    stream_transport_classes_by_protocol = MappingProxyType(
        {GRAPHQL_SSE_PROTOCOL: LineFeedSSETransport}  # graph_api.http.sse
    )

    def __init__(self, services: Services, **kwargs: Any) -> None:
        settings = services.settings
        super().__init__(
            build_schema(settings),
            graphql_ide="graphiql" if settings.graphiql else None,
            # Subscriptions: graphql-transport-ws on the websocket, GraphQL over SSE
            # (distinct connections) on POST/GET with `Accept: text/event-stream`; the
            # legacy graphql-ws, when a client offers only it, to be refused in its words.
            # Strawberry's keep-alive is graphql-ws's (never run here): uvicorn pings every
            # websocket itself (`ws_ping_interval`, 20 s).
            subscription_protocols=(
                GRAPHQL_TRANSPORT_WS_PROTOCOL,
                GRAPHQL_SSE_PROTOCOL,
                GRAPHQL_WS_PROTOCOL,
            ),
            connection_init_wait_timeout=timedelta(seconds=CONNECTION_INIT_SECONDS),
            max_subscriptions_per_connection=settings.max_subscriptions_per_connection,
            **kwargs,
        )
        self.services = services
        # Read by every request: looked up once.
        self.max_body_bytes = settings.max_body_bytes
        self.documents_max_age = settings.documents_max_age
        self.documents = Documents.from_settings(settings)
        self.ide_html = graphiql.page() if settings.graphiql else ""
        # The embedded demo's role picker: its tokens are made afresh for each page served.
        self.ide_roles = settings.graphiql and graphiql.demo_roles(settings) is not None

    async def pick_websocket_subprotocol(self, request: WebSocket) -> str | None:
        """graphql-transport-ws whenever the client offers it, in whatever order (Strawberry
        takes the client's first): the legacy graphql-ws only from a client that speaks
        nothing else, to hear why it is refused."""
        offered = request.scope.get("subprotocols") or []
        for protocol in (GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL):
            if protocol in offered:
                return protocol
        return None

    async def get_context(self, request: Any, response: Any) -> Context:
        auth = await self.services.auth.authenticate(request.headers.get("authorization"))
        context = Context.create(self.services, request.state.request_id, auth)
        client = request.client  # a fresh Address at each look
        context.client = client.host if client else None
        context.response = response  # the rate limit's status and header fields
        if telemetry.tracing is not None:
            context.trace_headers = telemetry.tracing.trace_headers(request.headers)
        return context

    async def on_ws_connect(self, context: Context) -> None:
        # A browser cannot set headers on a websocket: its token comes in `connection_init`'s
        # payload, `{"Authorization": "Bearer ..."}` (the upgrade's header also counts).
        params = getattr(context, "connection_params", None)
        token = params.get("Authorization") if isinstance(params, dict) else None
        if isinstance(token, str):
            context.auth = await self.services.auth.authenticate(token)
        # When reads need a token, a connection without one is refused here, before any
        # of its documents is parsed (mutations alone are checked per operation).
        if refusal(context, OperationType.QUERY) is not None:
            problem = context.auth.problem or "no token was sent"
            # A JWKS that does not answer is ours to fix: the client may try again later.
            code = BEHIND_CLOSE if context.auth.unavailable else FORBIDDEN_CLOSE
            raise Refused(code, f"this API needs a token: {problem}")

    def decode_json(self, data: str | bytes) -> object:
        """A message's JSON (a websocket's; an HTTP body, capped before it got here; a GET's
        variables): one over the byte cap is refused undecoded, one nested too deep as bad
        JSON (`json_text`: a 400, a websocket's 4400)."""
        limit = self.max_body_bytes
        if over(data, limit):
            raise MessageTooBig(limit)
        return json_text.loads(data)

    # -- GraphQL over HTTP (graph_api.http.graphql_http) -------------------------------------

    def encode_json(self, data: object) -> str:
        """The compact JSON Strawberry writes with `json.dumps`, written by orjson in a tenth
        of the time (Q1's 13 KB answer); non-ASCII text comes as UTF-8, not `\\u` escapes.
        Text, not bytes: Strawberry sends bytes on a websocket as binary frames."""
        try:
            return orjson.dumps(data).decode()
        except TypeError:  # what orjson refuses (an int beyond 64 bits) json.dumps writes
            return str(super().encode_json(data))

    def parse_json(self, data: str | bytes) -> Any:
        """A request's JSON: anything but an object (or a batch's list) is a 400, never a 500."""
        try:
            value = self.decode_json(data)
        except ValueError as error:  # bad JSON or UTF-8, nesting too deep (`json_text`)
            raise HTTPException(400, "Unable to parse request body as JSON") from error
        if not isinstance(value, dict | list):
            raise HTTPException(400, "The request must be a JSON object")
        _body.set(value)  # for `resolve_document`'s `documentId`
        return value

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = await self.run(request)
        except HTTPException as error:
            # Strawberry answers these in plain text; clients expect a GraphQL response.
            response = self.refusal(request, error)
        except (PersistedQueryNotFound, ForbiddenDocument) as error:
            response = self.document_refusal(request, error)
        if request.method == "GET":
            self.cache_headers(request, response)
        await response(scope, receive, send)

    def document_refusal(self, request: Request, error: ApiError) -> Response:
        """A well-formed request for a document this server will not run: a GraphQL
        response, with the status of a request error (`graphql_http`)."""
        media_type = response_media_type(request.headers.get("accept"))
        body = error_body(error.message, error.code)
        return Response(
            self.encode_json(body),
            status_code=status_for(body, media_type),
            media_type=media_type,
        )

    def cache_headers(self, request: Request, response: Response) -> None:
        """A query by id over GET (GraphQL over HTTP's persisted documents, APQ's GET):
        cacheable by a CDN when anonymous and answered without error (`persisted`). Any
        other GET answer (a query's text, GraphiQL, a refusal) is `no-store`: a CDN's
        default TTL would otherwise keep it."""
        if isinstance(response, StreamingResponse):
            return  # GraphQL over SSE: its transport's own `no-cache`
        if not getattr(request.state, "by_id", False):
            response.headers["cache-control"] = "no-store"
            return
        success = response.status_code == 200 and getattr(request.state, "clean", False)
        authorized = "authorization" in request.headers
        max_age = self.documents_max_age
        response.headers["cache-control"] = cache_control(success, authorized, max_age)
        response.headers["vary"] = "Accept, Authorization"

    def refusal(self, request: Request, error: HTTPException) -> Response:
        """A request refused before it became an operation: its status, a coded error."""
        code = NotFound.code if error.status_code == 404 else BAD_REQUEST
        response = Response(
            self.encode_json(error_body(error.reason, code)),
            status_code=error.status_code,
            media_type=response_media_type(request.headers.get("accept")),
        )
        if error.status_code == 405:
            response.headers["allow"] = "POST"
        return response

    async def parse_http_body(
        self, request: AsyncHTTPRequestAdapter
    ) -> GraphQLRequestData | list[GraphQLRequestData]:
        # Strawberry streams whenever Accept names text/event-stream, whatever its quality;
        # a query or mutation streams only when the client prefers it (http.negotiation).
        # A subscription asked as "http" by a client that accepts a stream becomes one in
        # `execute_operation`.
        _body.set(None)
        data = await super().parse_http_body(request)
        if isinstance(data, GraphQLRequestData):
            preferred = negotiate(request.headers.get("accept")).stream is Stream.ALWAYS
            run_as(data, "sse" if preferred else "http")
            await self.resolve_document(request, data)
        return data

    async def resolve_document(
        self, request: AsyncHTTPRequestAdapter, data: GraphQLRequestData
    ) -> None:
        """The first gate (graph_api.http.persisted): the text to run, from the request's
        text or the id it names; both sent, they must name the same document (as over a
        websocket). A POST's body is not decoded again: `parse_json` kept it."""
        if request.method == "GET":
            document_id = read_id(request.query_params)
            if data.query is None:
                assert isinstance(request, _RequestAdapter)
                request.request.state.by_id = True
        else:
            body = _body.get()
            document_id = read_id(body) if isinstance(body, dict) else None
        try:
            resolved = self.documents.resolve(data.query, document_id, data.extensions)
        except BadRequest as error:
            raise HTTPException(400, error.message) from error
        data.query = None if resolved is None else resolved.text
        if resolved is not None and resolved.register is not None:
            assert isinstance(request, _RequestAdapter)
            request.request.state.registration = resolved  # for `process_result`

    async def execute_operation(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        request_data: GraphQLRequestData | list[GraphQLRequestData],
        context: Context,
        root_value: None,
        sub_response: Response,
    ) -> Any:
        arguments = (request, request_adapter, request_data, context, root_value, sub_response)
        if (
            request_adapter.method == "GET"
            and isinstance(request_data, GraphQLRequestData)
            and protocol_of(request_data) == "sse"
        ):
            # A stream's refusals come inside the stream (a 200); a mutation over GET is
            # refused before it starts, 405 as over plain HTTP (GraphQL over HTTP, "GET").
            asked = operation_type(
                request_data.query, request_data.operation_name, self.services.settings.max_tokens
            )
            if asked is OperationType.MUTATION:
                raise HTTPException(405, GET_MUTATION)
        try:
            return await super().execute_operation(*arguments)
        except _StreamIt:
            # Refused before validation (the document is parsed and cached): run it again as
            # a stream; `run` streams what the request data's protocol names.
            assert isinstance(request_data, GraphQLRequestData)
            run_as(request_data, "sse")
            return await super().execute_operation(*arguments)

    async def get_sub_response(self, request: Request | WebSocket) -> Response:
        sub_response = await super().get_sub_response(request)
        # The negotiated type rides on the sub-response to `create_response`, which is not
        # given the request.
        sub_response.media_type = response_media_type(request.headers.get("accept"))
        return sub_response

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        response = await super().process_result(request, result)
        request.state.clean = not result.errors
        registration = getattr(request.state, "registration", None)
        if registration is not None and not is_request_error(result):
            # An APQ text is kept once it ran: parsed, validated, allowed for this caller.
            self.documents.ran(registration)
        if is_request_error(result):
            # Nothing executed, so there is no `data` entry (GraphQL spec, "Response").
            response.pop("data", None)
        return response

    def create_response(
        self,
        response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse],
        sub_response: Response,
    ) -> Response:
        """Strawberry's response (the sub-response's status, header fields and background
        carried over), made once with its negotiated type and status (`graphql_http`)
        rather than made as JSON's 200 and its headers rewritten."""
        media_type = sub_response.media_type or JSON
        status = sub_response.status_code
        computed = not status and isinstance(response_data, dict)
        if computed:
            status = status_for(cast(GraphQLHTTPResponse, response_data), media_type)
        response = Response(
            self.encode_json(response_data), status_code=status or 200, media_type=media_type
        )
        fields = header_fields(response)
        fields.extend(header_fields(sub_response))
        if computed and status == 401:
            fields.append(WWW_AUTHENTICATE)
        if sub_response.background:
            response.background = sub_response.background
        return response

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        try:
            return await super().execute_single(
                request=request,
                request_adapter=request_adapter,
                sub_response=sub_response,
                context=context,
                root_value=root_value,
                request_data=request_data,
            )
        except HTTPException as error:
            refused = error.__cause__
            if isinstance(refused, InvalidOperationTypeError):
                if refused.operation_type == OperationType.SUBSCRIPTION:
                    if negotiate(request.headers.get("accept")).stream is Stream.SUBSCRIPTIONS:
                        raise _StreamIt from error
                    raise HTTPException(400, STREAM_ONLY) from error
                # A mutation over GET is 405, not Strawberry's 400 (GraphQL over HTTP, "GET").
                if request_adapter.method == "GET":
                    raise HTTPException(405, GET_MUTATION) from error
            raise

    # -- GraphiQL (graph_api.http.graphiql) --------------------------------------------------

    def should_render_graphql_ide(self, request: BaseRequestProtocol) -> bool:
        # A document by id is run, not GraphiQL shown, whatever a browser's Accept says.
        # (Strawberry's test first: a POST's query string is never parsed for it.)
        wanted = super().should_render_graphql_ide(request) and not (
            "documentId" in request.query_params or "extensions" in request.query_params
        )
        if wanted and self.graphql_ide is None:
            raise HTTPException(404, "GraphiQL is turned off on this server (GRAPH_API_GRAPHIQL)")
        return wanted

    async def render_graphql_ide(self, request: Request) -> Response:
        if self.ide_roles:
            return HTMLResponse(graphiql.page(roles=graphiql.demo_roles(self.services.settings)))
        return HTMLResponse(self.ide_html)


def create_app(services: Services) -> Starlette:
    async def home(_: Request) -> Response:
        return RedirectResponse("/graphql")

    async def metrics(_: Request) -> Response:
        assert telemetry.metrics is not None  # the route exists when the setting is on
        body, media_type = telemetry.metrics.exposition()
        return Response(body, media_type=media_type)

    endpoint = GraphQLEndpoint(services)
    routes: list[BaseRoute] = [
        Route("/graphql", endpoint, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", endpoint),
        Route("/healthz", health.healthz),
        Route("/readyz", health.Readiness(services).respond),
        Route("/", home),
    ]
    settings = services.settings
    if settings.metrics and not settings.metrics_port:  # else on a port of its own
        routes.append(Route("/metrics", metrics))
    if services.settings.graphiql and graphiql.assets_present():
        routes.append(Mount(f"/{graphiql.ASSETS_URL}", StaticFiles(directory=graphiql.ASSETS_DIR)))

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        stop_metrics = None
        if telemetry.metrics is not None and settings.metrics_port:
            stop_metrics = telemetry.metrics.serve(settings.metrics_host, settings.metrics_port)
        try:
            async with services.events.running(), finisher.running(services.settings):
                yield
        finally:
            if stop_metrics is not None:  # waits for its thread's loop: not on this one
                await asyncio.to_thread(stop_metrics)
            # The DynamoDB client of this loop: its connections end with the app.
            await services.dynamo.aclose()
            if services.limiter is not None:
                await services.limiter.aclose()
            if telemetry.metrics is not None:
                telemetry.metrics.process_exited()

    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            # Outermost: refusals and errors of the inner layers carry CORS headers too.
            *cors_middleware(services.settings),
            Middleware(RequestGuard, limit=services.settings.max_body_bytes),
        ],
    )
