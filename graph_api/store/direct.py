"""The API's reads sent straight to our transport: botocore's events, parser and errors,
without its per-call request pipeline.

A Query through `client.query(...)` costs about 335 µs of client CPU on this machine, for a
request whose shape never changes: POST `/`, a JSON body, five headers. Most of that is
botocore's generic pipeline run anew on every call: endpoint rules evaluated, the request
built twice through `email.message`-based header maps, signed by the same route, event
hooks for retries, user agents and checksums that a one-attempt DynamoDB read never uses.
A GraphQL request sends up to a handful of reads (Q3 of `make bench`: seven), one after the
other on the event loop's thread.

`DirectCalls.call` sends `GetItem`, `BatchGetItem` and `Query` on an endpoint our transport
serves (plain HTTP: the embedded backend, DynamoDB Local, Alternator) with what the client
already has: its credentials (refreshed as botocore refreshes them), region, user agent and
response parser (`response_parser.py`). It keeps what callers and tools observe of a call:

- the events `provide-client-params`, `before-parameter-build`, `before-call`,
  `before-send`, `before-parse` and `after-call` of the operation, with botocore's
  arguments, so handlers still edit parameters, count attempts, answer a request instead of
  the network (moto's stubs, the fault tests), time calls or edit what was parsed;
- the parsed response, `ResponseMetadata` included (one attempt: `RetryAttempts` 0,
  `MaxAttemptsReached`), and on an HTTP error botocore's own `ClientError` subclass with the
  same fields (`client.exceptions.from_code`).

What it leaves out: the `request-created` handlers (botocore's signer, which `signing.Signer`
replaces, checked against it in tests; the `amz-sdk-invocation-id` and `amz-sdk-request`
headers, which DynamoDB does not read), `choose-signer` and `before-sign` (nothing of ours
or of botocore's chooses another signer for DynamoDB), `needs-retry` (the client makes one
attempt: `for_client` insists) and `response-received`. Header values reach `before-send`
handlers as text, not bytes. Writes, and every operation on other endpoints, keep boto3's
whole path: they are rarer, and some rely on botocore's hooks (a transaction's idempotency
token when none is given).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable, MutableMapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import orjson
from botocore import handlers
from botocore.awsrequest import AWSPreparedRequest, AWSResponse, HeadersDict
from botocore.discovery import block_endpoint_discovery_required_operations
from botocore.hooks import first_non_none_response
from botocore.model import OperationModel
from botocore.retries.standard import RetryQuotaChecker

from graph_api.store.signing import Signer, timestamp
from graph_api.store.transport import Transport, aws_response

OPERATIONS = frozenset({"GetItem", "BatchGetItem", "Query"})
SERVICE_ID = "dynamodb"  # in event names: botocore's hyphenized service id
_EVENTS = (
    "provide-client-params",
    "before-parameter-build",
    "before-call",
    "before-send",
    "before-parse",
    "after-call",
)


class _Operation(NamedTuple):
    """What every call of one operation shares, worked out on its first call."""

    model: OperationModel
    target: str  # X-Amz-Target
    events: dict[str, str]  # botocore's event kind -> its name for this operation
    idle: frozenset[int]  # botocore's handlers of its events that do nothing for it (`_idle`)


# Private in botocore (its stubs do not declare it); absent, it is not registered either.
_VALIDATION_MODE: Any = getattr(handlers, "_handle_request_validation_mode_member", None)


class _Plain(NamedTuple):
    """How a plain call goes (`DirectCalls._plain`)."""

    watch_params: bool  # `before-parameter-build` has observers to call
    watch_answer: bool  # so has `after-call`
    counters: tuple[Any, ...]  # our `before-send` counters registered, in botocore's order


def _identity(handler: Any) -> int:
    """A handler by identity, its function's for a bound method: botocore takes any
    callable, a handler that cannot be hashed too."""
    return id(getattr(handler, "__func__", handler))


def _idle(model: OperationModel) -> frozenset[int]:
    """The handlers botocore registers on a client's events that do nothing for calls of
    `model` (a read), by identity: no idempotency token or checksum mode to fill in, no API
    version header, no endpoint discovery required, no retry quota to give back (the client
    makes one attempt, so it never takes any), and no trace header outside AWS Lambda
    (`_plain` checks where it runs on every call, as that handler does)."""
    idle: set[Any] = {
        RetryQuotaChecker.release_retry_quota,
        handlers.add_recursion_detection_header,
    }
    if not model.idempotent_members:
        idle.add(handlers.generate_idempotent_uuid)
    if not model.http_checksum.get("requestValidationModeMember"):
        idle.add(_VALIDATION_MODE)
    if not model.is_endpoint_discovery_operation:
        idle.add(handlers.inject_api_version_header_if_needed)
    discovery: Any = model.endpoint_discovery  # a dict of the model's trait, or None
    if not (discovery or {}).get("required"):
        idle.add(block_endpoint_discovery_required_operations)
    return frozenset(id(handler) for handler in idle)


def _response_dict(model: OperationModel, status: int, headers: Any, body: bytes) -> dict[str, Any]:
    """A response as botocore's endpoint hands it to its parser."""
    return {
        "headers": headers,
        "status_code": status,
        "body": body,
        "context": {"operation_name": model.name},
    }


class DirectCalls:
    """`GetItem`, `BatchGetItem` and `Query` of one boto3 client, sent through `transport`.

    `counters`: handlers of ours on `before-send` that read nothing of the request (the
    ledger's count of attempts), which a plain call runs without one (`_plain`).
    """

    def __init__(self, client: Any, transport: Transport, counters: Iterable[Any] = ()) -> None:
        meta = client.meta
        self.client = client
        self.transport = transport
        self._events = meta.events
        # botocore's emitter behind the client's aliaser: what each event name calls, cached
        # until a handler is registered or unregistered (`_plain`).
        self._emitter = getattr(meta.events, "_emitter", None)
        self._counters = frozenset(_identity(c) for c in counters)
        # Per operation: the handlers botocore's cache held for its events when last looked
        # at, and how a call goes with them (`_plain`).
        self._verdicts: dict[str, tuple[tuple[Any, ...], _Plain | None]] = {}
        self._service = meta.service_model
        self._credentials = client._request_signer._credentials  # botocore's, refreshable
        self._parser = client._endpoint._response_parser_factory.create_parser("json")
        self._endpoint = client._endpoint
        self._signer = Signer(meta.region_name, self._service.signing_name)
        self._url = transport.endpoint_url.rstrip("/") + "/"
        metadata = self._service.metadata
        self._target_prefix = metadata["targetPrefix"]
        self._content_type = f"application/x-amz-json-{metadata['jsonVersion']}"
        self._user_agent = meta.config.user_agent  # the one the client was given, built once
        self._operations: dict[str, _Operation] = {}

    @classmethod
    def for_client(
        cls, client: Any, transport: Transport | None, counters: Iterable[Any] = ()
    ) -> DirectCalls | None:
        """Direct calls for `client`, when our transport serves its endpoint at `/`, it
        signs with credentials and makes one attempt a call (`client._config`: our retry
        policy is store/retry.py's); None otherwise (boto3 sends everything)."""
        if transport is None or client._request_signer._credentials is None:
            return None
        if client.meta.config.retries.get("total_max_attempts") != 1:
            return None  # botocore would retry them: its own path keeps the calls
        if urlsplit(transport.endpoint_url).path not in ("", "/"):
            return None
        return cls(client, transport, counters)

    def _operation(self, name: str) -> _Operation:
        known = self._operations.get(name)
        if known is None:
            model = self._service.operation_model(name)
            known = self._operations[name] = _Operation(
                model,
                f"{self._target_prefix}.{name}",
                {kind: f"{kind}.{SERVICE_ID}.{name}" for kind in _EVENTS},
                _idle(model),
            )
        return known

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The operation's parsed response, as `client.<operation>(**params)` returns it;
        None, with nothing sent, for an operation this path does not send."""
        if operation not in OPERATIONS:
            return None
        known = self._operation(operation)
        plain = self._plain(known)
        if plain is not None:
            return self._call_plain(known, params, plain)
        model, target, names, _ = known
        events = self._events
        context: dict[str, Any] = {"client_region": self.client.meta.region_name}
        # As botocore's `_emit_api_params`: a handler may replace or edit the parameters.
        given = events.emit_until_response(
            names["provide-client-params"],
            params=params,
            model=model,
            context=context,
        )[1]
        params = params if given is None else given
        events.emit(
            names["before-parameter-build"],
            params=params,
            model=model,
            context=context,
        )
        body = self._body(params, model)
        request_dict = {
            "url_path": "/",
            "query_string": "",
            "method": "POST",
            "headers": self._headers(target),
            "body": body,
            "url": self._url,
            "context": context,
        }
        _, answered = events.emit_until_response(
            names["before-call"],
            model=model,
            params=request_dict,
            request_signer=self.client._request_signer,
            context=context,
        )
        if answered is not None:  # a handler answered for the network (a stub)
            http, parsed = answered
        else:
            http, parsed = self._send(model, names, request_dict, context)
        events.emit(
            names["after-call"],
            http_response=http,
            parsed=parsed,
            model=model,
            context=context,
        )
        return self._answer(operation, http.status_code, parsed)

    def _plain(self, operation: _Operation) -> _Plain | None:
        """How a call goes out without botocore's objects (`_call_plain`), or None when a
        handler that may need them listens (to `provide-client-params`, `before-call`,
        `before-send` or `before-parse`): then the call takes `call`'s path. Only
        botocore's idle handlers and our counters may listen to those; handlers of
        `before-parameter-build` and `after-call` (observers that time or count calls)
        are still called. Inside AWS Lambda, always None: botocore's handler then adds the
        invocation's trace header.

        Read off botocore's own cache of what each event name calls, which registering or
        unregistering a handler empties: a name not looked up since says None, and the call
        takes the path that emits (and so caches) it. The verdict is worked out again only
        when one of the operation's entries in that cache is a new one.
        """
        emitter = self._emitter
        if emitter is None or "AWS_LAMBDA_FUNCTION_NAME" in os.environ:
            return None
        cache = emitter._lookup_cache
        handlers = tuple(cache.get(name) for name in operation.events.values())
        known = self._verdicts.get(operation.model.name)
        if known is not None and all(map(operator.is_, known[0], handlers)):
            return known[1]
        if None in handlers:
            return None
        verdict = self._verdict(operation, handlers)
        self._verdicts[operation.model.name] = (handlers, verdict)
        return verdict

    def _verdict(self, operation: _Operation, handlers: tuple[Any, ...]) -> _Plain | None:
        """`_plain`'s answer for these handlers of the operation's events (in `_EVENTS`'
        order): None if one that is neither idle nor an observer listens; else which
        observers to call, and our counters among `before-send`'s handlers, each as often as
        registered, as botocore would call them."""
        idle = operation.idle
        observed: set[str] = set()
        counters: tuple[Any, ...] = ()
        for kind, listening in zip(operation.events, handlers, strict=True):
            ours: frozenset[int] = frozenset()
            if kind == "before-send":
                ours = self._counters
                counters = tuple(h for h in listening if _identity(h) in ours)
            if all(_identity(h) in idle or _identity(h) in ours for h in listening):
                continue
            if kind not in ("before-parameter-build", "after-call"):
                return None
            observed.add(kind)
        return _Plain("before-parameter-build" in observed, "after-call" in observed, counters)

    def _call_plain(
        self, operation: _Operation, params: dict[str, Any], plain: _Plain
    ) -> dict[str, Any]:
        """The call as `call` sends it, when `_plain` allows: the same request, signed the
        same way, and the same parsed response, from plain headers and bytes; our counters
        run where `before-send` would have run them, observers where they always do."""
        model, target, names, _ = operation
        watch_params, watch_answer, counters = plain
        context: dict[str, Any] = {"client_region": self.client.meta.region_name}
        if watch_params:  # a handler may edit the parameters
            self._events.emit(
                names["before-parameter-build"], params=params, model=model, context=context
            )
        body = self._body(params, model)
        headers = self._headers(target)
        self._sign(headers, body)
        for count in counters:
            count()
        status, received, content = self.transport.exchange(headers, body)
        # Lower-cased, as botocore's parser looks headers up and reports them.
        lowered = {name.lower(): value for name, value in received.items()}
        parsed = self._parse(model, _response_dict(model, status, lowered, content), {})
        if watch_answer:
            http = aws_response(self._url, status, received, content)
            self._events.emit(
                names["after-call"], http_response=http, parsed=parsed, model=model, context=context
            )
        return self._answer(model.name, status, parsed)

    def _headers(self, target: str) -> dict[str, str]:
        """A read's headers before it is signed."""
        return {
            "X-Amz-Target": target,
            "Content-Type": self._content_type,
            "User-Agent": self._user_agent,
        }

    def _sign(self, headers: MutableMapping[str, str], body: bytes) -> None:
        """The date, the session token, the signature over them and the other headers, and
        the body's length, added to `headers` as botocore's signer adds them."""
        credentials = self._credentials.get_frozen_credentials()
        headers["X-Amz-Date"] = amz_date = timestamp()
        if credentials.token:
            headers["X-Amz-Security-Token"] = credentials.token
        headers["Authorization"] = self._signer.authorization(
            [*headers.items(), ("Host", self.transport.host)],
            body,
            access_key=credentials.access_key,
            secret_key=credentials.secret_key,
            amz_date=amz_date,
        )
        headers["Content-Length"] = str(len(body))

    def _body(self, params: dict[str, Any], model: OperationModel) -> bytes:
        try:
            return orjson.dumps(params)
        except TypeError:  # bytes (a binary attribute): botocore writes them as base64
            return self.client._serializer.serialize_to_request(params, model)["body"]  # type: ignore[no-any-return]

    def _answer(self, operation: str, status: int, parsed: dict[str, Any]) -> dict[str, Any]:
        if status >= 300:
            code = parsed.get("Error", {}).get("Code")
            raise self.client.exceptions.from_code(code)(parsed, operation)
        return parsed

    def _send(
        self,
        model: OperationModel,
        names: dict[str, str],
        request_dict: dict[str, Any],
        context: dict[str, Any],
    ) -> tuple[AWSResponse, dict[str, Any]]:
        body: bytes = request_dict["body"]
        # A before-call handler may have added some. botocore prepares requests with a
        # HeadersDict too (its stubs say HTTPHeaders).
        headers: Any = HeadersDict(request_dict["headers"])
        self._sign(headers, body)
        request = AWSPreparedRequest("POST", self._url, headers, body, False, context)
        events = self._events
        responses = events.emit(names["before-send"], request=request)
        http = first_non_none_response(responses)
        if http is None:
            http = self.transport.send(request)
        customized: dict[str, Any] = {}
        response_dict = _response_dict(model, http.status_code, http.headers, http.content)
        events.emit(
            names["before-parse"],
            operation_model=model,
            response_dict=response_dict,
            customized_response_dict=customized,
        )
        return http, self._parse(model, response_dict, customized)

    def _parse(
        self, model: OperationModel, response_dict: dict[str, Any], customized: dict[str, Any]
    ) -> dict[str, Any]:
        """The response parsed as botocore's endpoint parses it, for one attempt."""
        status = response_dict["status_code"]
        parsed: dict[str, Any] = self._parser.parse(response_dict, model.output_shape)
        parsed.update(customized)
        if "ResponseMetadata" in parsed:  # one attempt, as botocore's retry handler says
            parsed["ResponseMetadata"].update(RetryAttempts=0, MaxAttemptsReached=True)
        if status >= 300:  # modeled error fields, as botocore's endpoint adds them
            self._endpoint._add_modeled_error_fields(response_dict, parsed, model, self._parser)
        return parsed
