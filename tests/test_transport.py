"""The lean HTTP transport under boto3 (`store/transport.py`): what botocore would have
answered through urllib3, on the real backend and on an HTTP server that misbehaves."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import gc
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSRequest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.httpsession import URLLib3Session
from support import HTTPServer, Reply, free_port

from graph_api.graph.context import Services
from graph_api.settings import Settings
from graph_api.store import greenlets
from graph_api.store import transport as transport_module
from graph_api.store.client import Dynamo
from graph_api.store.transport import Transport

# -- on the backend --------------------------------------------------------------------------


def test_a_plain_http_endpoint_is_reached_through_it(services: Services) -> None:
    transport = services.dynamo.transport
    assert transport is not None
    assert services.dynamo.client._endpoint.http_session is transport


@pytest.mark.parametrize(
    ("url", "used"), [("http://127.0.0.1:8999", True), ("https://dynamodb.example:443", False)]
)
def test_an_endpoint_set_for_botocore_is_reached_through_it(
    monkeypatch: pytest.MonkeyPatch, url: str, used: bool
) -> None:
    """A remote backend named by botocore's own AWS_ENDPOINT_URL_DYNAMODB (DynamoDB Local,
    Alternator), not by our settings."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", url)
    dynamo = Dynamo(Settings(backend="remote", cursor_secret=b"x"))
    try:
        assert dynamo.client.meta.endpoint_url.startswith(url.rsplit(":", 1)[0])
        assert (dynamo.client._endpoint.http_session is dynamo.transport) is used
    finally:
        dynamo.close()


@pytest.mark.parametrize(
    ("endpoint", "environ", "used"),
    [
        ("https://dynamodb.eu-west-1.amazonaws.com", {}, False),
        (None, {}, False),  # AWS, by botocore's own resolution
        ("http://127.0.0.1:8000", {}, True),
        ("http://dynamodb.internal:8000", {"HTTP_PROXY": "http://proxy:3128"}, False),
        (
            "http://dynamodb.internal:8000",
            {"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "dynamodb.internal"},
            True,
        ),
    ],
)
def test_tls_and_proxied_endpoints_keep_botocores_transport(
    monkeypatch: pytest.MonkeyPatch, endpoint: str | None, environ: dict[str, str], used: bool
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert (Transport.for_endpoint(endpoint, 1, 1, 4) is not None) is used


def test_answers_and_errors_are_botocores(services: Services, demo_items: list[Any]) -> None:
    """Every kind of call the API makes, through both transports: the same parsed answers,
    the same errors. Both clients send reads through botocore's pipeline too (the API's
    own reads skip it: tests/test_direct.py compares those with this path)."""
    ours = Dynamo(services.settings)
    ours.direct = None
    assert ours.transport is not None
    plain = Dynamo(services.settings)
    assert plain.transport is not None
    plain.transport.close()
    plain.client._endpoint.http_session = URLLib3Session(timeout=(2, 5), max_pool_connections=4)
    plain.direct = None  # reads too through botocore's pipeline and urllib3
    table = services.settings.table
    student = next(i for i in demo_items if i["type"] == "student")
    calls: list[tuple[str, dict[str, Any]]] = [
        (
            "GetItem",
            {"TableName": table, "Key": {"PK": {"S": student["PK"]}, "SK": {"S": student["SK"]}}},
        ),
        (
            "Query",
            {
                "TableName": table,
                "KeyConditionExpression": "PK = :pk",
                "ExpressionAttributeValues": {":pk": {"S": student["PK"]}},
            },
        ),
        (
            "BatchGetItem",
            {
                "RequestItems": {
                    table: {
                        "Keys": [
                            {"PK": {"S": i["PK"]}, "SK": {"S": i["SK"]}}
                            for i in demo_items
                            if i["type"] == "student"
                        ][:100]
                    }
                }
            },
        ),
        ("DescribeTable", {"TableName": table}),
    ]
    try:
        for operation, params in calls:
            a, b = ours.call_sync(operation, params, None), plain.call_sync(operation, params, None)
            for answer in (a, b):
                answer.pop("ResponseMetadata")
            assert a == b, operation
        refused = {"TableName": "no-such-table", "Key": {"PK": {"S": "x"}, "SK": {"S": "x"}}}
        errors = []
        for client in (ours, plain):
            with pytest.raises(ClientError) as caught:
                client.call_sync("GetItem", refused, None)
            errors.append((caught.value.response["Error"], caught.value.operation_name))
        assert errors[0] == errors[1]
        assert errors[0][0]["Code"] == "ResourceNotFoundException"
    finally:
        plain.close()
        ours.close()


# -- on a server that misbehaves -------------------------------------------------------------

Send = Callable[[Transport, Any], Any]


@pytest.fixture(params=["blocking", "awaited"])
def sending(request: pytest.FixtureRequest) -> Send:
    """A request sent as the CLI sends it (a blocking socket), and as the API does (under
    `greenlets.run` on an event loop: the socket's waits awaited)."""
    if request.param == "blocking":
        return lambda transport, prepared: transport.send(prepared)
    return lambda transport, prepared: asyncio.run(greenlets.run(transport.send, prepared))


@pytest.fixture
def server_with() -> Iterator[Callable[[Reply], HTTPServer]]:
    servers: list[HTTPServer] = []

    def start(reply: Reply) -> HTTPServer:
        servers.append(HTTPServer(reply))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def send(port: int, body: bytes = b'{"x": 1}', read_timeout: float = 5) -> tuple[Transport, Any]:
    """A transport to the port, and a request as botocore prepares one."""
    transport = Transport(f"http://127.0.0.1:{port}", 2, read_timeout, 4)
    request = AWSRequest(
        method="POST",
        url=f"http://127.0.0.1:{port}/",
        data=body,
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": b"Dyn.Op"},
    ).prepare()
    return transport, request


def ok(conn: socket.socket, _: bytes) -> bool:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    )
    return True


def test_the_request_is_what_botocore_prepared(sending: Send, server_with: Any) -> None:
    server = server_with(ok)
    transport, request = send(server.port, body=b'{"TableName": "t"}')
    response = sending(transport, request)
    assert response.status_code == 200 and response.content == b"{}"
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST / HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}".encode() in lines
    assert b"X-Amz-Target: Dyn.Op" in lines  # bytes headers written as text
    assert body == b'{"TableName": "t"}'


def test_connections_are_kept_alive_and_reused(sending: Send, server_with: Any) -> None:
    server = server_with(ok)
    transport, request = send(server.port)
    for _ in range(5):
        assert sending(transport, request).status_code == 200
    assert server.connections == 1 and len(server.requests) == 5


def test_a_connection_the_server_closed_is_not_reused(sending: Send, server_with: Any) -> None:
    def close_after(conn: socket.socket, request: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        return False  # closed after each answer, without saying so

    server = server_with(close_after)
    transport, request = send(server.port)
    for _ in range(3):
        assert sending(transport, request).content == b"{}"
        _wait_for(lambda: server.closed == len(server.requests))
    assert server.connections == 3  # each request on a fresh connection, none sent twice


def _wait_for(condition: Callable[[], bool]) -> None:
    event = threading.Event()
    while not condition():
        event.wait(0.01)


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    "answer",
    [
        CHUNKED + b"5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n",  # an extension
        CHUNKED + b"5\r\nhello\r\n6\r\n world\r\n0\r\nT: v\r\n\r\n",  # a trailer
        b"HTTP/1.0 200 OK\r\n\r\nhello world",  # the body ends with the connection
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 11\r\n\r\nhello world",
    ],
)
def test_bodies_in_every_framing(sending: Send, server_with: Any, answer: bytes) -> None:
    def reply(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(answer)
        return b"chunked" in answer  # the others close

    server = server_with(reply)
    transport, request = send(server.port)
    assert sending(transport, request).content == b"hello world"
    assert sending(transport, request).content == b"hello world"


def test_a_server_that_never_answers_times_out(sending: Send, server_with: Any) -> None:
    release = threading.Event()

    def hang(conn: socket.socket, _: bytes) -> bool:
        release.wait(30)
        return False

    server = server_with(hang)
    transport, request = send(server.port, read_timeout=0.2)
    try:
        with pytest.raises(ReadTimeoutError):
            sending(transport, request)
    finally:
        release.set()


def test_nobody_listening_is_a_connection_error(
    sending: Send,
) -> None:
    transport, request = send(free_port())
    with pytest.raises(EndpointConnectionError):
        sending(transport, request)


@pytest.mark.parametrize(
    "answer",
    [
        b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"Items"',  # cut short
        b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    ],
)
def test_an_answer_cut_short_or_not_http_is_a_closed_connection(
    sending: Send, server_with: Any, answer: bytes
) -> None:
    """As urllib3 reports it (botocore's ConnectionClosedError, which the API's client turns
    into UNAVAILABLE), never an error of its own kind."""

    def reply(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(answer)
        return False

    server = server_with(reply)
    transport, request = send(server.port)
    with pytest.raises(ConnectionClosedError):
        sending(transport, request)


def test_an_interim_100_continue_is_skipped(sending: Send, server_with: Any) -> None:
    def reply(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        return ok(conn, _)

    server = server_with(reply)
    transport, request = send(server.port)
    response = sending(transport, request)
    assert (response.status_code, response.content) == (200, b"{}")


def test_repeated_headers_are_joined(sending: Send, server_with: Any) -> None:
    def reply(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 2\r\n\r\n{}")
        return True

    server = server_with(reply)
    transport, request = send(server.port)
    assert sending(transport, request).headers["x-a"] == "1, 2"


def test_an_ipv6_endpoint_is_named_as_botocore_signs_it() -> None:
    transport = Transport("http://[::1]:8000", 1, 1, 4)
    assert transport.host == "[::1]:8000" and transport.address == ("::1", 8000)
    assert Transport("http://[::1]", 1, 1, 4).host == "[::1]"


def test_a_large_request_is_written_whole(sending: Send, server_with: Any) -> None:
    """More than the socket's buffers hold: written as the server drains it."""
    body = b'{"x": "' + b"y" * 8_000_000 + b'"}'
    server = server_with(ok)
    transport, request = send(server.port, body=body)
    assert sending(transport, request).status_code == 200
    assert server.requests[0].endswith(body)


# -- on the event loop (greenlets.run): waits are awaited ------------------------------------


def test_calls_waiting_on_the_network_leave_the_loop_free(server_with: Any) -> None:
    """The server answers the first request only once the second has arrived: were the
    first call to block the loop's thread, the second could never be sent."""
    second_arrived = threading.Event()
    answered: list[bytes] = []

    def reply(conn: socket.socket, request: bytes) -> bool:
        if b'"n": 2' in request:
            second_arrived.set()
        elif not second_arrived.wait(30):
            return False  # closed unanswered: the first call fails
        answered.append(request)
        return ok(conn, request)

    servers = [server_with(reply), server_with(reply)]  # one connection each at a time
    first, request_1 = send(servers[0].port, body=b'{"n": 1}')
    second, request_2 = send(servers[1].port, body=b'{"n": 2}')

    async def both() -> list[Any]:
        return await asyncio.gather(
            greenlets.run(first.send, request_1), greenlets.run(second.send, request_2)
        )

    assert [r.status_code for r in asyncio.run(both())] == [200, 200]
    assert answered[0].endswith(b'{"n": 2}')  # the second was answered first


def test_calls_started_together_are_all_sent_before_one_reads_its_answer(
    server_with: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server answers at once and the first call pauses after sending (as a garbage
    collection or a busy machine pauses it), so its answer is there when it would read:
    the second request still goes out before the first call finishes, or the two calls,
    meant to overlap, would run one after the other."""
    events: list[str] = []
    send_whole = transport_module._Awaited.sendall

    def sendall(self: Any, data: bytes) -> None:
        send_whole(self, data)
        n = "1" if data.endswith(b'{"n": 1}') else "2"
        events.append(f"sent {n}")
        if n == "1":
            time.sleep(0.2)  # the answer arrives meanwhile

    monkeypatch.setattr(transport_module._Awaited, "sendall", sendall)
    servers = [server_with(ok), server_with(ok)]  # one connection each at a time
    first, request_1 = send(servers[0].port, body=b'{"n": 1}')
    second, request_2 = send(servers[1].port, body=b'{"n": 2}')

    async def call(transport: Transport, request: Any, n: str) -> None:
        await greenlets.run(transport.send, request)
        events.append(f"done {n}")

    async def both() -> None:
        await asyncio.gather(call(first, request_1, "1"), call(second, request_2, "2"))

    asyncio.run(both())  # connected now: the calls below start in their order, no connect
    events.clear()
    asyncio.run(both())
    assert events[:2] == ["sent 1", "sent 2"], events


def test_a_cancelled_call_closes_its_connection(server_with: Any) -> None:
    """A request's deadline cancels the call where it waits: the socket, in an unknown
    state, is closed, not pooled, and the next call opens another."""
    release = threading.Event()

    def reply(conn: socket.socket, request: bytes) -> bool:
        if b"slow" in request:
            release.wait(30)
            return False
        return ok(conn, request)

    server = server_with(reply)
    transport, slow = send(server.port, body=b'{"slow": 1}')
    _, fast = send(server.port)

    async def cancelled() -> None:
        async with asyncio.timeout(0.2):
            await greenlets.run(transport.send, slow)

    try:
        with pytest.raises(TimeoutError):
            asyncio.run(cancelled())
        assert not transport._idle
    finally:
        release.set()
    assert asyncio.run(greenlets.run(transport.send, fast)).status_code == 200
    assert server.connections == 2


def test_greenlets_run_code_as_a_task_runs_it() -> None:
    """Its result or its error, the caller's context variables, and `wait` only inside."""
    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen")

    def body(x: int) -> tuple[int, str, bool]:
        slept = greenlets.wait(asyncio.sleep(0, result=x + 1))
        return slept, seen.get(), greenlets.waiting()

    def fails() -> None:
        greenlets.wait(asyncio.sleep(0))
        raise LookupError("inside")

    async def main() -> Any:
        seen.set("the caller's")
        answer = await greenlets.run(body, 1)
        with pytest.raises(LookupError, match="inside"):
            await greenlets.run(fails)
        return answer

    assert asyncio.run(main()) == (2, "the caller's", True)
    assert not greenlets.waiting()
    outside = asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        greenlets.wait(outside)
    outside.close()


def test_greenlets_run_carries_nothing_from_one_run_to_the_next() -> None:
    """Runs share kept greenlets: each still sees only its caller's context variables, its
    result, its error and its caller's context are not held once the caller lets them go,
    and a run cancelled while it waits leaves the next runs their own answers, overlapping
    or not."""
    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")

    class Answer:
        pass

    class Refused(LookupError):
        pass

    def answers(tag: str) -> Answer:
        before = seen.get()
        seen.set(tag)
        greenlets.wait(asyncio.sleep(0))
        answer = Answer()
        answer.tag = (before, seen.get())  # type: ignore[attr-defined]
        return answer

    def fails() -> None:
        greenlets.wait(asyncio.sleep(0))
        raise Refused("inside")

    def hangs() -> None:
        greenlets.wait(asyncio.get_running_loop().create_future())

    def sleeps(seconds: float, tag: str) -> str:
        greenlets.wait(asyncio.sleep(seconds))
        return tag

    held: contextvars.ContextVar[Answer | None] = contextvars.ContextVar("held")

    async def main() -> list[Any]:
        first = await greenlets.run(answers, "first")
        gone = weakref.ref(first)
        assert first.tag == ("unset", "first")  # type: ignore[attr-defined]
        del first
        assert gone() is None
        # What the caller's context holds is not kept alive by an idle greenlet either.
        request = Answer()
        held.set(request)
        await greenlets.run(answers, "with a context")
        released = weakref.ref(request)
        held.set(None)
        del request
        assert released() is None
        with pytest.raises(Refused) as failure:
            await greenlets.run(fails)
        # Its traceback runs from the caller into `fails`, not through the greenlet's loop,
        # whose locals are the next call's by the time anyone reads them.
        frames = [entry.name for entry in failure.traceback]
        assert "fails" in frames and "_serve" not in frames, frames
        error = weakref.ref(failure.value)
        del failure
        assert error() is None
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await greenlets.run(hangs)
        second = await greenlets.run(answers, "second")
        overlapping = await asyncio.gather(
            *(greenlets.run(sleeps, 0.01 * (5 - n), f"call {n}") for n in range(5))
        )
        return [second.tag, overlapping, seen.get()]  # type: ignore[attr-defined]

    assert asyncio.run(main()) == [
        ("unset", "second"),
        [f"call {n}" for n in range(5)],
        "unset",
    ]


def test_greenlets_run_keeps_a_bounded_few_greenlets_and_frees_the_rest() -> None:
    """Many calls at once need many greenlets; once they are over, at most `_KEPT` stay per
    thread, and none once the thread has ended: memory does not grow with the peaks of
    concurrent calls, nor with the threads that ran an event loop."""

    def spawned() -> int:
        gc.collect()
        return sum(isinstance(o, greenlets._Spawned) for o in gc.get_objects())

    def pauses(n: int) -> int:
        greenlets.wait(asyncio.sleep(0))
        return n

    async def peaks() -> None:
        for _ in range(3):
            answers = await asyncio.gather(*(greenlets.run(pauses, n) for n in range(100)))
            assert answers == list(range(100))

    before = spawned()
    thread = threading.Thread(target=asyncio.run, args=(peaks(),))
    thread.start()
    thread.join()
    assert spawned() == before  # that thread's kept greenlets went with it
    asyncio.run(peaks())
    assert spawned() - before <= greenlets._KEPT


def test_a_connect_the_call_gave_up_on_is_closed(server_with: Any) -> None:
    """A connection that opens after its call's deadline passed is closed at once."""
    server = server_with(ok)
    transport, request = send(server.port)
    release = threading.Event()
    opened: list[socket.socket] = []
    connect = transport._connect

    def slow_connect() -> socket.socket:
        release.wait(30)
        opened.append(connect())
        return opened[-1]

    transport._connect = slow_connect  # type: ignore[method-assign]

    async def cancelled() -> None:
        async with asyncio.timeout(0.1):
            await greenlets.run(transport.send, request)

    threading.Timer(0.3, release.set).start()
    with pytest.raises(TimeoutError):
        asyncio.run(cancelled())  # returns once the loop's executor has finished the connect
    assert len(opened) == 1 and opened[0].fileno() == -1
    assert not transport._idle


def test_calls_in_flight_are_bounded_so_connections_are_kept(services: Services) -> None:
    """Bursts wider than the client's pool wait their turn on the connections it keeps,
    instead of opening (and then closing) one for every call beyond them."""
    dynamo = Dynamo(dataclasses.replace(services.settings, max_concurrency=4))
    assert dynamo.transport is not None
    connects = 0
    connect = dynamo.transport._connect

    def counted() -> socket.socket:
        nonlocal connects
        connects += 1
        return connect()

    dynamo.transport._connect = counted  # type: ignore[method-assign]
    params = {"TableName": services.settings.table}

    async def bursts() -> None:
        for _ in range(3):
            await asyncio.gather(*(dynamo.call("DescribeTable", params, None) for _ in range(24)))

    try:
        asyncio.run(bursts())
    finally:
        dynamo.close()
    assert connects <= 4
