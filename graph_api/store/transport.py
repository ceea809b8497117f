"""A lean HTTP/1.1 transport for DynamoDB endpoints on plain HTTP, under boto3.

botocore sends a request through urllib3 and `http.client`: measured on a Query of a class's
partition, that is 0.57 ms of the call's 0.98 ms of client CPU (serializing, signing and
parsing are the rest), and a GraphQL request sends up to a handful of calls, one after the
other under the interpreter lock. The endpoints we reach over plain HTTP (the embedded
backend, DynamoDB Local, ScyllaDB Alternator in a cluster) need none of what that stack is
for: TLS, proxies, redirects, compression.

Under `greenlets.run` (the API's calls: `Dynamo.call`) the socket is non-blocking and a
read or write that would block waits on the event loop (`greenlets.wait`), so the call
needs no thread; anywhere else (the CLI, admin, a thread) it blocks, with the same
timeouts.

`Transport` takes the place of the client's HTTP session (`URLLib3Session`: botocore builds
it with no option to choose another, so `install` sets it on the client's endpoint). It
writes the request botocore serialized and signed to a kept-alive socket and hands back
the response, which botocore then parses, checks and turns into errors as it always does;
a `before-send` handler that answers a request (moto's mocks, our fault tests) still
answers instead of the network. It keeps urllib3's rules:
an idle socket is reused only if the server has not closed it, a request is never sent
twice, and failures raise botocore's own errors (`EndpointConnectionError`,
`ConnectTimeoutError`, `ReadTimeoutError`, `ConnectionClosedError`). HTTPS endpoints (AWS)
and endpoints behind a proxy keep botocore's transport (`for_endpoint` gives None).
"""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import urllib.request
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from graph_api.store import greenlets

CHUNK = 65536
MAX_HEAD = 65536  # a response's status line and headers; DynamoDB's are well under 1 KB


class _Body:
    """The `raw` of an AWSResponse: botocore reads the body with `stream()`."""

    def __init__(self, content: bytes) -> None:
        self.content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.content


def aws_response(url: str, status: int, headers: dict[str, str], body: bytes) -> AWSResponse:
    """A response as botocore's HTTP session hands it over."""
    raw_headers: Any = headers  # botocore wraps them in its case-insensitive HeadersDict
    return AWSResponse(url, status, raw_headers, _Body(body))


class _Closed(Exception):
    """The server closed the connection before a whole response."""


class _Awaited:
    """A non-blocking socket under `greenlets.run`: a read or a write that would block
    waits on the event loop for the socket to be ready, within the timeout a blocking
    socket would have."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.timeout = timeout

    def recv(self, size: int) -> bytes:
        while True:
            try:
                return self.sock.recv(size)
            except BlockingIOError:  # nothing yet
                self.ready(writing=False)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:  # the socket's buffer is full
                self.ready(writing=True)

    def ready(self, *, writing: bool) -> None:
        """Wait until the socket can be read (or written); TimeoutError after the timeout."""
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        fd = self.sock.fileno()
        watch, unwatch = (
            (loop.add_writer, loop.remove_writer)
            if writing
            else (loop.add_reader, loop.remove_reader)
        )
        watch(fd, _settle, ready, None)
        timer = loop.call_later(self.timeout, _settle, ready, TimeoutError())
        try:
            greenlets.wait(ready)
        finally:
            timer.cancel()
            unwatch(fd)


def _settle(future: asyncio.Future[None], error: Exception | None) -> None:
    if not future.done():
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


_Socket = socket.socket | _Awaited  # what a request is written to, its response read from


class Transport:
    """Sends botocore's prepared requests to one `http://host:port` endpoint, keeping up to
    `max_idle` connections alive for reuse (botocore's `max_pool_connections`)."""

    def __init__(
        self, endpoint_url: str, connect_timeout: float, read_timeout: float, max_idle: int
    ) -> None:
        parts = urlsplit(endpoint_url)
        self.endpoint_url = endpoint_url
        hostname = parts.hostname or "localhost"
        self.address = (hostname, parts.port or 80)
        # As http.client writes it (and botocore signs it): an IPv6 address in brackets, the
        # port only when it is not HTTP's.
        host = f"[{hostname}]" if ":" in hostname else hostname
        self.host = host if parts.port in (None, 80) else f"{host}:{parts.port}"
        self._closed = False
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_idle = max_idle
        self._idle: deque[socket.socket] = deque()  # append/pop are atomic: no lock

    @classmethod
    def for_endpoint(
        cls, endpoint_url: str | None, connect_timeout: float, read_timeout: float, max_idle: int
    ) -> Transport | None:
        """A transport for a plain-HTTP endpoint reached without a proxy; None otherwise."""
        if not endpoint_url or urlsplit(endpoint_url).scheme != "http":
            return None
        host = urlsplit(endpoint_url).hostname or ""
        if "http" in urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
            return None
        return cls(endpoint_url, connect_timeout, read_timeout, max_idle)

    def close(self) -> None:
        self._closed = True  # a call still in flight closes its socket instead of pooling it
        while True:
            try:
                self._idle.pop().close()
            except IndexError:
                return

    def install(self, client: Any) -> None:
        """Send `client`'s requests through this transport instead of its urllib3 session."""
        endpoint = client._endpoint
        endpoint.http_session.close()
        endpoint.http_session = self

    # -- botocore's HTTP session interface ------------------------------------------------

    def send(self, request: AWSPreparedRequest) -> AWSResponse:
        status, headers, body = self._round_trip(
            self._message(request), request.method, request.url, request
        )
        return aws_response(request.url, status, headers, body)

    def exchange(
        self, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """A POST of `body` to the endpoint's `/` with these headers (`Host` is written here,
        and `Content-Length` if absent): its status, headers and body, without botocore's
        request and response objects (`store/direct.py`'s plain calls)."""
        message = self._written(
            "POST", "/", headers.items(), body, length="Content-Length" not in headers
        )
        return self._round_trip(message, "POST", self.endpoint_url.rstrip("/") + "/", None)

    def _round_trip(
        self, message: bytes, method: str, url: str, request: AWSPreparedRequest | None
    ) -> tuple[int, dict[str, str], bytes]:
        """`message` written to a kept-alive connection, its response read: status, headers
        (names as sent), body."""
        awaited = greenlets.waiting()
        sock = self._checkout(awaited)
        keep = False
        try:
            io: _Socket = _Awaited(sock, self.read_timeout) if awaited else sock
            io.sendall(message)
            if isinstance(io, _Awaited):
                # Read only once the loop has had its turn: every call started with this one
                # sends its request first. An answer already there (a loopback server, this
                # thread paused by a collection) would otherwise finish this call before the
                # next one is even sent, and calls meant to overlap would run one by one.
                io.ready(writing=False)
            status, headers, body, keep = self._read_response(io, method)
        except TimeoutError as error:
            raise ReadTimeoutError(endpoint_url=url, error=error) from error
        except Exception as error:  # closed, reset, or not HTTP: as urllib3's ProtocolError
            raise ConnectionClosedError(endpoint_url=url, request=request) from error
        finally:
            if keep and not self._closed and len(self._idle) < self.max_idle:
                self._idle.append(sock)
            else:
                sock.close()
        return status, headers, body

    def _message(self, request: AWSPreparedRequest) -> bytes:
        parts = urlsplit(request.url)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        body = _bytes(request.body)
        headers = ((name, _text(value)) for name, value in request.headers.items())
        length = "Content-Length" not in request.headers and (body or request.method == "POST")
        return self._written(request.method, target, headers, body, length=bool(length))

    def _written(
        self,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        *,
        length: bool,
    ) -> bytes:
        """A request's bytes as http.client writes them: `Host` first, `Content-Length`
        added when `length`, no compressed answers asked for."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}"]
        lines += [f"{name}: {value}" for name, value in headers]
        if length:
            lines.append(f"Content-Length: {len(body)}")
        lines.append("Accept-Encoding: identity")  # as http.client: no compressed answers
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    # -- connections ----------------------------------------------------------------------

    def _checkout(self, awaited: bool) -> socket.socket:
        """An idle connection the server has not closed, or a new one: non-blocking when
        `awaited`, else blocking within the read timeout."""
        sock = None
        while self._idle:
            try:
                idle = self._idle.pop()
            except IndexError:
                break
            if not _dropped(idle):
                sock = idle
                break
            idle.close()
        if sock is None:
            sock = self._connect_awaited() if awaited else self._connect()
        sock.settimeout(0.0 if awaited else self.read_timeout)
        return sock

    def _connect_awaited(self) -> socket.socket:
        """`_connect` on a thread (connecting is rare: connections are kept; a thread spares
        the loop the name lookup). A socket connected for a call that gave up meanwhile (its
        deadline) is closed, not left to the garbage collector."""
        lock = threading.Lock()
        connected: list[socket.socket] = []
        abandoned = False

        def connect() -> None:
            sock = self._connect()
            with lock:
                if abandoned:
                    sock.close()
                else:
                    connected.append(sock)

        try:
            greenlets.wait(asyncio.get_running_loop().run_in_executor(None, connect))
        except BaseException:
            with lock:
                abandoned = True
                for sock in connected:
                    sock.close()
            raise
        return connected[0]

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection(self.address, timeout=self.connect_timeout)
        except TimeoutError as error:
            raise ConnectTimeoutError(endpoint_url=self.endpoint_url, error=error) from error
        except OSError as error:
            raise EndpointConnectionError(endpoint_url=self.endpoint_url, error=error) from error
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    # -- responses ------------------------------------------------------------------------

    @staticmethod
    def _read_response(sock: _Socket, method: str) -> tuple[int, dict[str, str], bytes, bool]:
        """Status, headers, body, and whether the connection may be reused."""
        buffer = bytearray()
        while True:
            version, status, headers = _head(sock, buffer)
            if not 100 <= status < 200 or status == 101:
                break  # 1xx (100 Continue unasked) is interim: the answer follows, as http.client
        lower = {name.lower(): value.lower() for name, value in headers.items()}
        connection = lower.get("connection", "")
        keep = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
        if method == "HEAD" or status in (204, 304, 101):
            return status, headers, b"", keep and status != 101
        if "chunked" in lower.get("transfer-encoding", ""):
            return status, headers, _chunked(sock, buffer), keep
        if "content-length" in lower:
            length = _length(lower["content-length"])
            while len(buffer) < length:
                _receive(sock, buffer)
            # Bytes past the body were not asked for: the connection is not reused.
            return status, headers, bytes(buffer[:length]), keep and len(buffer) == length
        while _receive(sock, buffer, eof_ok=True):  # the body ends with the connection
            pass
        return status, headers, bytes(buffer), False


def _head(sock: _Socket, buffer: bytearray) -> tuple[str, int, dict[str, str]]:
    """A response's status line and headers, taken off the front of `buffer`; headers that
    repeat are joined with ", ", as urllib3 joins them."""
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        if len(buffer) > MAX_HEAD:
            raise _Closed("response head too long")
        _receive(sock, buffer)
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    del buffer[: end + 4]
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise _Closed(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    names: dict[str, str] = {}  # lower-cased → as first sent: names are case-insensitive
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise _Closed(f"not a header line: {line[:80]!r}")
        name = names.setdefault(name.strip().lower(), name.strip())
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return version, int(code), headers


def _length(value: str) -> int:
    """Content-Length: one non-negative integer (a repeat of the same value allowed)."""
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1 or not (only := values.pop()).isdigit():
        raise _Closed(f"bad Content-Length {value[:40]!r}")
    return int(only)


def _text(value: str | bytes) -> str:
    """A header value: botocore keeps some as bytes (`X-Amz-Target`, the signature)."""
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _bytes(body: Any) -> bytes:
    """A prepared request's body: DynamoDB's JSON comes as bytes (or a str or a file)."""
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    return _bytes(body.read())


def _receive(sock: _Socket, buffer: bytearray, *, eof_ok: bool = False) -> bool:
    data = sock.recv(CHUNK)
    if not data:
        if eof_ok:
            return False
        raise _Closed("connection closed mid-response")
    buffer += data
    return True


def _chunked(sock: _Socket, buffer: bytearray) -> bytes:
    body = bytearray()
    while True:
        while (end := buffer.find(b"\r\n")) < 0:
            _receive(sock, buffer)
        size_text = bytes(buffer[:end]).split(b";")[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise _Closed(f"bad chunk size {size_text[:20]!r}") from None
        if size < 0:
            raise _Closed("negative chunk size")
        del buffer[: end + 2]
        if size == 0:  # then optional trailers, up to an empty line
            while (end := buffer.find(b"\r\n")) != 0:
                if end > 0:
                    del buffer[: end + 2]
                else:
                    _receive(sock, buffer)
            return bytes(body)
        while len(buffer) < size + 2:
            _receive(sock, buffer)
        body += buffer[:size]
        del buffer[: size + 2]


def _dropped(sock: socket.socket) -> bool:
    """Whether an idle connection was closed (or sent something unasked) by the server:
    readable means either, as urllib3's `is_connection_dropped` reads it."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))
