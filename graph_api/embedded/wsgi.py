"""What the embedded server adds in front of moto's WSGI app, at the wire.

- Isolation: writes run one at a time (`isolation.writers`); reads run together and are
  held back (`isolation.tables`) only while a write changes stored items: a single-item
  write whole, a transaction only for the swap at its end (`transactions`).
- Idempotency: DynamoDB answers a `TransactWriteItems` resent with the same
  `ClientRequestToken` within 10 minutes as it answered the first (without writing again),
  or with `IdempotentParameterMismatchException` if the request differs. moto ignores the
  token, so a retry after a lost response would apply twice; the server keeps the token.
- Streams: DynamoDB Streams requests are answered by `streams` (no table lock), and the
  records of each write are published once it is visible.
- Connections: kept open between a client's requests (`KeepAlive`).
"""

from __future__ import annotations

import hashlib
import io
import json
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from moto.moto_server.werkzeug_app import MotoRequestHandler

from graph_api.embedded import heap, isolation, streams

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

WRITES = frozenset(
    {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "CreateTable",
        "UpdateTable",
        "DeleteTable",
        "ExecuteStatement",
        "BatchExecuteStatement",
        "ExecuteTransaction",
        "RestoreTableFromBackup",
        "RestoreTableToPointInTime",
        "ImportTable",
    }
)
TOKEN_LIFETIME = 600.0  # seconds DynamoDB keeps a ClientRequestToken
MAX_TOKENS = 100_000  # a bound on memory, far above what 10 minutes of a demo sends


@dataclass(frozen=True, slots=True)
class _Answer:
    request: str  # a digest of the request body, to tell a resend from a reuse
    at: float
    status: str
    headers: list[tuple[str, str]]
    body: bytes


class _Tokens:
    """Answers to `TransactWriteItems` by `ClientRequestToken`, for 10 minutes."""

    def __init__(self) -> None:
        self._answers: OrderedDict[str, _Answer] = OrderedDict()

    def get(self, token: str, now: float) -> _Answer | None:
        self._expire(now)
        return self._answers.get(token)

    def put(self, token: str, answer: _Answer) -> None:
        self._answers[token] = answer
        self._expire(answer.at)
        while len(self._answers) > MAX_TOKENS:
            self._answers.popitem(last=False)

    def _expire(self, now: float) -> None:
        while self._answers:
            oldest = next(iter(self._answers.values()))
            if now - oldest.at < TOKEN_LIFETIME:
                return
            self._answers.popitem(last=False)


def _mismatch() -> tuple[str, list[tuple[str, str]], bytes]:
    body = json.dumps(
        {
            "__type": "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
            "message": "The request uses the same client token as a previous, but non-identical"
            " request. Do not reuse a client token with different requests, unless the"
            " requests are identical.",
        }
    ).encode()
    headers = [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))]
    return "400 Bad Request", headers, body


class Serialized:
    """A WSGI wrapper: writes alone, reads together, transactions idempotent by token."""

    def __init__(self, app: WSGIApp, clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.tokens = _Tokens()
        self.clock = clock

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        serving = threading.get_ident()
        heap.state.serving.add(serving)  # the heap's keeper freezes when no one is served
        try:
            return self._serve(environ, start_response)
        finally:
            heap.state.serving.discard(serving)

    def _serve(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target.startswith(streams.TARGET_PREFIX):
            return streams.serve(target[len(streams.TARGET_PREFIX) :], environ, start_response)
        operation = target.rpartition(".")[2]
        if operation not in WRITES:
            with isolation.tables.read():
                return list(self.app(environ, start_response))  # the whole answer, locked
        with isolation.writers:
            try:
                if operation == "TransactWriteItems":  # takes `tables` for its swap only
                    return self._transaction(environ, start_response)
                with isolation.tables.write():
                    return list(self.app(environ, start_response))
            finally:
                # Once readers can see the write, before its answer: a stream reader never
                # sees a change the table does not show yet.
                streams.publish()

    def _transaction(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(body)
        try:
            token = json.loads(body).get("ClientRequestToken")
        except ValueError:
            token = None
        if not isinstance(token, str):
            return list(self.app(environ, start_response))
        digest = hashlib.sha256(body).hexdigest()
        now = self.clock()
        previous = self.tokens.get(token, now)
        if previous is not None:
            if previous.request != digest:
                status, headers, answer = _mismatch()
                start_response(status, headers)
                return [answer]
            start_response(previous.status, previous.headers)
            return [previous.body]

        seen: dict[str, Any] = {}

        def keep(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
            seen.update(status=status, headers=list(headers))
            return start_response(status, headers, *args)

        chunks = list(self.app(environ, keep))
        if str(seen.get("status", "")).startswith("200"):  # only a committed write repeats
            self.tokens.put(
                token, _Answer(digest, now, seen["status"], seen["headers"], b"".join(chunks))
            )
        return chunks


class KeepAlive(MotoRequestHandler):
    """moto's request handler, keeping a client's connection open for its next request.

    werkzeug closes every connection after its answer (it cannot tell where a body the app
    left unread ends and the next request begins), so each DynamoDB call paid for a TCP
    connection and a thread on both sides: a fifth of a Query's CPU in the server, in the
    process every read shares with every write. Here the body is read whole before the app
    runs, so nothing is left unread. Requests that do not say their length, or that wait
    for `100 Continue`, are answered as werkzeug does, closing.
    """

    _keep = False

    def setup(self) -> None:
        super().setup()
        # An answer is written in pieces: without this, the next one on the connection
        # waits for the client's delayed ACK (40 ms).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def run_wsgi(self) -> None:
        length = self.headers.get("Content-Length", "0")
        self._keep = (
            length.isdigit()
            and "Transfer-Encoding" not in self.headers
            and "Expect" not in self.headers
        )
        if not self._keep:
            return super().run_wsgi()
        connection = self.rfile
        self.rfile = io.BytesIO(connection.read(int(length)))  # what werkzeug gives the app
        try:
            super().run_wsgi()
        finally:
            self.rfile = connection

    def send_header(self, keyword: str, value: str) -> None:
        if self._keep and not self.close_connection and keyword.lower() == "connection":
            return  # werkzeug's `close`, on every answer (a client that asked to close, closes)
        super().send_header(keyword, value)
