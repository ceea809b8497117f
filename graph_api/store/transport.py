"""A lean HTTP/1.1 transport for DynamoDB endpoints on plain HTTP, under boto3.

botocore sends a request through urllib3 and `http.client`: measured on a Query of a class's
partition, that is 0.57 ms of the call's 0.98 ms of client CPU (serializing, signing and
parsing are the rest), and a GraphQL request sends up to a handful of calls, one after the
other under the interpreter lock. The endpoints we reach over plain HTTP (the embedded
backend, DynamoDB Local, ScyllaDB Alternator in a cluster) need none of what that stack is
for: TLS, proxies, redirects, compression.

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

import select
import socket
import urllib.request
from collections import deque
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

CHUNK = 65536
MAX_HEAD = 65536  # a response's status line and headers; DynamoDB's are well under 1 KB


class _Body:
    """The `raw` of an AWSResponse: botocore reads the body with `stream()`."""

    def __init__(self, content: bytes) -> None:
        self.content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.content


class _Closed(Exception):
    """The server closed the connection before a whole response."""


class Transport:
    """Sends botocore's prepared requests to one `http://host:port` endpoint, keeping up to
    `max_idle` connections alive for reuse (botocore's `max_pool_connections`)."""

    def __init__(
        self, endpoint_url: str, connect_timeout: float, read_timeout: float, max_idle: int
    ) -> None:
        parts = urlsplit(endpoint_url)
        self.endpoint_url = endpoint_url
        self.address = (parts.hostname or "localhost", parts.port or 80)
        # As http.client writes it: the port only when it is not HTTP's.
        self.host = parts.hostname if parts.port in (None, 80) else f"{parts.hostname}:{parts.port}"
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
        while self._idle:
            self._idle.pop().close()

    def install(self, client: Any) -> None:
        """Send `client`'s requests through this transport instead of its urllib3 session."""
        endpoint = client._endpoint
        endpoint.http_session.close()
        endpoint.http_session = self

    # -- botocore's HTTP session interface ------------------------------------------------

    def send(self, request: AWSPreparedRequest) -> AWSResponse:
        message = self._message(request)
        sock = self._checkout()
        try:
            sock.sendall(message)
            status, headers, body, keep = self._read_response(sock, request.method)
        except TimeoutError as error:
            sock.close()
            raise ReadTimeoutError(endpoint_url=request.url, error=error) from error
        except (OSError, _Closed) as error:
            sock.close()
            raise ConnectionClosedError(endpoint_url=request.url, request=request) from error
        if keep and len(self._idle) < self.max_idle:
            self._idle.append(sock)
        else:
            sock.close()
        raw_headers: Any = headers  # botocore wraps them in its case-insensitive HeadersDict
        return AWSResponse(request.url, status, raw_headers, _Body(body))

    def _message(self, request: AWSPreparedRequest) -> bytes:
        parts = urlsplit(request.url)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        body = _bytes(request.body)
        lines = [f"{request.method} {target} HTTP/1.1", f"Host: {self.host}"]
        lines += [f"{name}: {_text(value)}" for name, value in request.headers.items()]
        if "Content-Length" not in request.headers and (body or request.method == "POST"):
            lines.append(f"Content-Length: {len(body)}")
        lines.append("Accept-Encoding: identity")  # as http.client: no compressed answers
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    # -- connections ----------------------------------------------------------------------

    def _checkout(self) -> socket.socket:
        while self._idle:
            try:
                sock = self._idle.pop()
            except IndexError:
                break
            if not _dropped(sock):
                return sock
            sock.close()
        try:
            sock = socket.create_connection(self.address, timeout=self.connect_timeout)
        except TimeoutError as error:
            raise ConnectTimeoutError(endpoint_url=self.endpoint_url, error=error) from error
        except OSError as error:
            raise EndpointConnectionError(endpoint_url=self.endpoint_url, error=error) from error
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.read_timeout)
        return sock

    # -- responses ------------------------------------------------------------------------

    @staticmethod
    def _read_response(sock: socket.socket, method: str) -> tuple[int, dict[str, str], bytes, bool]:
        """Status, headers, body, and whether the connection may be reused."""
        buffer = bytearray()
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > MAX_HEAD:
                raise _Closed("response head too long")
            _receive(sock, buffer)
        head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        del buffer[: end + 4]
        version, _, rest = head[0].partition(" ")
        status = int(rest[:3])
        headers: dict[str, str] = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip()] = value.strip()
        lower = {name.lower(): value.lower() for name, value in headers.items()}
        connection = lower.get("connection", "")
        keep = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return status, headers, b"", keep
        if "chunked" in lower.get("transfer-encoding", ""):
            return status, headers, _chunked(sock, buffer), keep
        if "content-length" in lower:
            length = int(lower["content-length"])
            while len(buffer) < length:
                _receive(sock, buffer)
            return status, headers, bytes(buffer[:length]), keep
        while _receive(sock, buffer, eof_ok=True):  # the body ends with the connection
            pass
        return status, headers, bytes(buffer), False


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


def _receive(sock: socket.socket, buffer: bytearray, *, eof_ok: bool = False) -> bool:
    data = sock.recv(CHUNK)
    if not data:
        if eof_ok:
            return False
        raise _Closed("connection closed mid-response")
    buffer += data
    return True


def _chunked(sock: socket.socket, buffer: bytearray) -> bytes:
    body = bytearray()
    while True:
        while (end := buffer.find(b"\r\n")) < 0:
            _receive(sock, buffer)
        size = int(bytes(buffer[:end]).split(b";")[0], 16)
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
