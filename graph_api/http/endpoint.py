"""`/graphql`'s view: Strawberry's ASGI `GraphQL` with this API's gates and answers.

It speaks GraphQL over HTTP (`graph_api.http.graphql_http`: media types, statuses), streams
subscriptions as GraphQL over SSE (`graph_api.http.sse`), hands websockets to
`graph_api.http.websocket`'s handler, serves GraphiQL with its own assets
(`graph_api.http.graphiql`: no CDN), and resolves a document named by its id
(`graph_api.http.persisted`), the first gate of every request.
"""

from __future__ import annotations

from contextvars import ContextVar
from datetime import timedelta
from types import MappingProxyType
from typing import Any, cast

import orjson
from cross_web import AsyncHTTPRequestAdapter, HTTPException, StarletteRequestAdapter
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
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
    ForbiddenDocument,
    NotFound,
    PersistedQueryNotFound,
    error_body,
)
from graph_api.graph.auth.access import refusal
from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import build_schema, operation_type
from graph_api.http import graphiql, json_text
from graph_api.http.graphql_http import BAD_REQUEST, JSON, is_request_error, status_for
from graph_api.http.legacy_ws import LegacyProtocolRefusal
from graph_api.http.negotiation import Stream, negotiate, response_media_type
from graph_api.http.persisted import Documents, cache_control, read_id
from graph_api.http.sse import LineFeedSSETransport
from graph_api.http.websocket import (
    BEHIND_CLOSE,
    CONNECTION_INIT_SECONDS,
    FORBIDDEN_CLOSE,
    MessageTooBig,
    Refused,
    WebSocketHandler,
    over,
)
from graph_api.internals.starlette import header_fields
from graph_api.internals.strawberry import (
    BaseRequestProtocol,
    InvalidOperationTypeError,
    protocol_of,
    run_as,
)

STREAM_ONLY = (
    "a subscription runs over a websocket (graphql-transport-ws) or as GraphQL over SSE"
    " (send Accept: text/event-stream), not as a plain HTTP request"
)
GET_MUTATION = "mutations are not allowed when using GET"  # Strawberry's words, over a stream too
WWW_AUTHENTICATE = (b"www-authenticate", b"Bearer")  # on a 401 (RFC 6750)


# A POST's JSON body as `parse_json` decoded it, for `resolve_document` (the request's task
# only: set empty before Strawberry parses each request).
_body: ContextVar[object] = ContextVar("graph_api_request_body", default=None)


class _StreamIt(Exception):
    """A subscription asked over HTTP by a client that accepts a stream: it runs as one."""


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
            # The per-connection limit is the handler's (http/websocket.py); Strawberry's
            # own default (100) would refuse first, without a code, past it.
            max_subscriptions_per_connection=None,
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
        """The compact JSON Strawberry writes with `json.dumps`, written by orjson in far
        less time (bench/README.md); non-ASCII text comes as UTF-8, not `\\u` escapes.
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
