"""What a websocket message may be: at most GRAPH_API_MAX_BODY_BYTES (else 1009, undecoded),
and a graphql-transport-ws message of the right shape (else 4400, never an exception). A
15 MB document costs the server nothing but reading it: refused at once, while /healthz
keeps answering.

No DynamoDB here: the app runs without its event pipeline, over an endpoint nothing
listens on, so a message that got as far as a read would fail loudly.
"""

from __future__ import annotations

import json
import statistics
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import WAIT, WS, make_settings, until
from uvicorn_thread import uvicorn_in_thread
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.http.json_text import MAX_DEPTH
from graph_api.http.websocket import BAD_MESSAGE_CLOSE, TOO_BIG_CLOSE

NOWHERE = "http://127.0.0.1:9"  # the discard port: any DynamoDB call would fail
LIMIT = 2_000  # bytes, a small GRAPH_API_MAX_BODY_BYTES for the cap's tests


@pytest.fixture
def client() -> Iterator[TestClient]:
    services = Services.create(make_settings(NOWHERE, max_body_bytes=LIMIT))
    try:
        yield TestClient(create_app(services))  # not entered: no lifespan, no pipeline
    finally:
        services.close()


def closed_by(client: TestClient, *messages: str) -> dict[str, Any]:
    """Send `messages` (raw text) after `connection_init` was acknowledged; the close."""
    with client.websocket_connect("/graphql", subprotocols=WS) as ws:
        ws.send_json({"type": "connection_init"})
        assert ws.receive_json()["type"] == "connection_ack"
        for message in messages:
            ws.send_text(message)
        received = ws.receive()
    assert received["type"] == "websocket.close", received
    return dict(received)


def subscribe(payload: Any, id_: Any = "1") -> str:
    return json.dumps({"id": id_, "type": "subscribe", "payload": payload})


# -- the byte cap -------------------------------------------------------------------------------


def padded(size: int, pad: str = " ") -> str:
    """A subscribe message of `size` bytes as UTF-8: a document padded with a comment."""
    message = subscribe({"query": "subscription { teacherChanged(id: 1) { kind } } #"})
    room, end = size - len(message.encode()), message.rindex('"')  # the comment's end
    many, rest = divmod(room, len(pad.encode()))
    return message[:end] + pad * many + " " * rest + message[end:]


def test_a_message_at_the_cap_is_read(client: TestClient) -> None:
    message = padded(LIMIT)
    assert len(message.encode()) == LIMIT
    with client.websocket_connect("/graphql", subprotocols=WS) as ws:
        ws.send_json({"type": "connection_init"})
        assert ws.receive_json()["type"] == "connection_ack"
        ws.send_text(message)
        answer = ws.receive_json()  # parsed, validated, refused for want of a pipeline
    assert answer["id"] == "1"
    assert answer["payload"]["errors"][0]["extensions"] == {"code": "UNAVAILABLE"}


@pytest.mark.parametrize("pad", [" ", "é"], ids=["ascii", "two-byte characters"])
def test_a_message_over_the_cap_closes_the_connection_with_1009(
    client: TestClient, pad: str
) -> None:
    message = padded(LIMIT + 1, pad)
    assert len(message.encode()) == LIMIT + 1
    assert len(message) <= LIMIT or pad == " "  # bytes are counted, not characters
    closed = closed_by(client, message)
    assert closed["code"] == TOO_BIG_CLOSE == 1009
    assert closed["reason"] == f"message over the limit of {LIMIT} bytes (GRAPH_API_MAX_BODY_BYTES)"


# -- malformed messages -------------------------------------------------------------------------

QUERY = "subscription { teacherChanged(id: 1) { kind } }"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("[1, 2]", "a message must be a JSON object"),
        ('"subscribe"', "a message must be a JSON object"),
        ("{not json", "WebSocket message must be valid JSON"),
        # Nested past the bound (`json_text.MAX_DEPTH`): refused undecoded, as bad JSON. Past
        # Python's recursion limit this was a RecursionError and a close with 1006.
        ("[" * 1500, "WebSocket message must be valid JSON"),
        ("[" * 990 + "]" * 990, "WebSocket message must be valid JSON"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "WebSocket message must be valid JSON"),
        ("[" * MAX_DEPTH + "]" * MAX_DEPTH, "a message must be a JSON object"),  # decoded
        ('{"q": "' + "[" * 1500 + '"}', "a message needs a string type"),  # inside a string
        # A string never closed after deep nesting, full of escaped quotes: refused at once
        # (the depth count once rescanned the rest of the text from every escaped quote).
        ("[" * (MAX_DEPTH + 2) + '"' + '\\"' * 400, "WebSocket message must be valid JSON"),
        ('{"id": "1"}', "a message needs a string type"),
        ('{"type": 7}', "a message needs a string type"),
        ('{"type": "unheard-of"}', "Unknown message type: unheard-of"),
        (subscribe({"query": QUERY}, id_=["1"]), "a subscribe message needs a string id"),
        ('{"type": "complete", "id": {}}', "a complete message needs a string id"),
        (subscribe("query"), "a subscribe message's payload must be an object"),
        (subscribe([QUERY]), "a subscribe message's payload must be an object"),
        (subscribe({}), "payload.query must be a string"),
        (subscribe({"query": ["{ a }"]}), "payload.query must be a string"),
        (subscribe({"query": 12}), "payload.query must be a string"),
        (subscribe({"query": QUERY, "variables": [1]}), "payload.variables must be an object"),
        (subscribe({"query": QUERY, "variables": "x"}), "payload.variables must be an object"),
        (subscribe({"query": QUERY, "operationName": 1}), "payload.operationName must be a string"),
        (subscribe({"query": QUERY, "extensions": []}), "payload.extensions must be an object"),
    ],
)
def test_a_malformed_message_closes_with_4400(
    client: TestClient, message: str, reason: str
) -> None:
    closed = closed_by(client, message)
    assert (closed["code"], closed["reason"]) == (BAD_MESSAGE_CLOSE, reason)


def test_a_malformed_connection_init_closes_with_4400(client: TestClient) -> None:
    for init in ('[{"type": "connection_init"}]', '{"type": "connection_init", "payload": []}'):
        with client.websocket_connect("/graphql", subprotocols=WS) as ws:
            ws.send_text(init)
            assert ws.receive()["code"] == BAD_MESSAGE_CLOSE


def test_null_variables_and_operation_name_are_well_formed(client: TestClient) -> None:
    with client.websocket_connect("/graphql", subprotocols=WS) as ws:
        ws.send_json({"type": "connection_init"})
        assert ws.receive_json()["type"] == "connection_ack"
        ws.send_text(subscribe({"query": QUERY, "variables": None, "operationName": None}))
        answer = ws.receive_json()
        assert answer["payload"]["errors"][0]["extensions"] == {"code": "UNAVAILABLE"}


# -- a 15 MB document, on uvicorn as `serve` and the image configure it -------------------------

HUGE = 15_000_000  # bytes: a comment, which graphql-core's token limit does not count
CLIENTS = 6
BASELINE = 20  # quiet /healthz answers, the reference for those during the refusals


@pytest.fixture
def port() -> Iterator[int]:
    """The app on uvicorn with the options `serve` gives it (`uvicorn_limits`; the image
    sets the same). No lifespan: no event pipeline."""
    services = Services.create(make_settings(NOWHERE))
    try:
        with uvicorn_in_thread(services) as port:
            yield port
    finally:
        services.close()


def huge_frame_start() -> bytes:
    """The start of a masked text frame that carries a 15 MB subscribe message: its header
    (the length) and the first 64 KB of the message (mask key 0: the bytes as they are)."""
    message = subscribe({"query": QUERY + " #" + "x" * HUGE}).encode()
    return b"\x81\xff" + struct.pack("!Q", len(message)) + b"\0\0\0\0" + message[:65536]


def test_a_15_mb_document_is_refused_at_once_and_healthz_keeps_answering(port: int) -> None:
    """Refused from the frame's header: the close comes while all but 64 KB of the message is
    still unsent (a server that read it first would wait forever), and `/healthz` answers as
    fast during the refusals as before them (within a generous factor: the clients share the
    machine). Its figures are in bench/README.md."""
    start = huge_frame_start()
    latencies: list[float] = []
    refused: list[bool] = []
    done = threading.Event()

    def healthz() -> None:
        while not done.is_set():
            started = time.perf_counter()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=WAIT) as r:
                assert r.status == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.005)

    def send_huge() -> None:
        with connect(f"ws://127.0.0.1:{port}/graphql", subprotocols=WS) as ws:  # type: ignore[arg-type]
            ws.send(json.dumps({"type": "connection_init"}))
            assert json.loads(ws.recv(timeout=WAIT))["type"] == "connection_ack"
            ws.socket.sendall(start)  # the rest never needs to be sent
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=WAIT)  # a server that waits for the 15 MB waits forever
            assert closed.value.rcvd is not None and closed.value.rcvd.code == TOO_BIG_CLOSE
            refused.append(True)

    poller = threading.Thread(target=healthz)
    poller.start()
    try:
        until(lambda: len(latencies) >= BASELINE, "/healthz")
        before = len(latencies)
        senders = [threading.Thread(target=send_huge) for _ in range(CLIENTS)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(WAIT)
        until(lambda: len(latencies) > before, "/healthz after the refusals")
    finally:
        done.set()
        poller.join(WAIT)
    assert len(refused) == CLIENTS
    # Compared with the same server's quiet answers, with room for a busy machine (a few
    # times slower under the clients' load): reading and parsing the 15 MB on the event loop
    # held every request for seconds, over a thousand times a quiet answer.
    quiet, during = latencies[:before], latencies[before:]
    assert statistics.median(during) < 50 * statistics.median(quiet), (quiet, during)


def test_a_string_never_closed_is_one_string_to_the_depth_count() -> None:
    """What follows an unclosed quote is inside a string (as a decoder reads it), counted in
    one pass: counting from each escaped quote again rescanned the text quadratically."""
    from graph_api.http.json_text import depth

    assert depth('[[{"a": "[[[' + '\\"[' * 1000) == 3
    assert depth(b'[[{"a": "[[[' + b'\\"[' * 1000 + b"\\") == 3
