"""What a request's head may carry, on uvicorn as `serve` and the image configure it
(`hosting.uvicorn_limits`): headers of at most MAX_HEAD_BYTES in all, refused unread past
that; at most MAX_HEADERS of them (431, under any host); and forwarded addresses, which count
only from the proxies FORWARDED_ALLOW_IPS names (none by default).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient
from support import WAIT, WS, fresh_services, make_settings, until
from uvicorn_thread import uvicorn_in_thread
from websockets.sync.client import ClientConnection, connect

from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.http.hosting import MAX_HEAD_BYTES
from graph_api.http.middleware import MAX_HEADERS

NOWHERE = "http://127.0.0.1:9"  # the discard port: any DynamoDB call would fail


@pytest.fixture
def bare() -> Iterator[Services]:
    """Services without a table or an event pipeline: enough for /healthz."""
    services = Services.create(make_settings(NOWHERE))
    try:
        yield services
    finally:
        services.close()


def healthz(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=WAIT) as response:
        return int(response.status)


# -- header bytes --------------------------------------------------------------------------


def status_of_huge_header(port: int, size: int) -> int | None:
    """Send GET /healthz with an Authorization header of `size` bytes; the status answered,
    or None when the server closed the connection without one reaching us (a reset: it
    stopped reading, so the kernel discarded what was left unread)."""
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
    head += b"x" * size + b"\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:

        def send() -> None:
            with contextlib.suppress(OSError):  # refused before we were done: the point
                sock.sendall(head)

        sender = threading.Thread(target=send)
        sender.start()
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
        sock.close()
        sender.join(WAIT)
    return int(answer.split()[1]) if answer.startswith(b"HTTP/1.1 ") else None


def test_a_1_mb_header_is_refused_and_healthz_keeps_answering(bare: Services) -> None:
    with uvicorn_in_thread(bare) as port:
        # Under the bound: answered. (The head is the header plus ~80 bytes.)
        assert status_of_huge_header(port, MAX_HEAD_BYTES - 200) == 200
        # A 67 MB header was read whole (8.6 s of CPU) and answered 200 by httptools.
        for _ in range(3):
            assert status_of_huge_header(port, 1_000_000) in (400, 431, None)
        assert healthz(port) == 200


def test_a_request_with_too_many_headers_is_refused_with_431(bare: Services) -> None:
    client = TestClient(create_app(bare))  # not entered: no lifespan; any host alike
    many = {f"x-header-{n}": "1" for n in range(MAX_HEADERS + 1)}
    refused = client.get("/healthz", headers=many)
    assert refused.status_code == 431
    body = refused.json()
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "limit": MAX_HEADERS}
    assert f"more than {MAX_HEADERS} request headers" in body["errors"][0]["message"]
    assert client.get("/healthz", headers=dict(list(many.items())[:50])).status_code == 200


# -- forwarded addresses -------------------------------------------------------------------

WATCH = 'subscription {{ studentChanged(id: "s{n}") {{ kind }} }}'
ONE_SLOT = {"max_subscriptions_per_principal": 1, "max_subscriptions_per_connection": 1}


@contextlib.contextmanager
def subscribed(port: int, forwarded_for: str) -> Iterator[ClientConnection]:
    """A websocket from loopback claiming to be `forwarded_for`, acknowledged."""
    with connect(
        f"ws://127.0.0.1:{port}/graphql",
        subprotocols=WS,  # type: ignore[arg-type]
        additional_headers={"X-Forwarded-For": forwarded_for},
    ) as ws:
        ws.send(json.dumps({"type": "connection_init"}))
        assert json.loads(ws.recv(timeout=WAIT))["type"] == "connection_ack"
        yield ws


def subscribe(ws: ClientConnection, n: int) -> None:
    message = {"id": str(n), "type": "subscribe", "payload": {"query": WATCH.format(n=n)}}
    ws.send(json.dumps(message))


def test_a_forged_forwarded_address_gets_no_fresh_slots(endpoint: str) -> None:
    with (
        fresh_services(endpoint, **ONE_SLOT) as services,
        uvicorn_in_thread(services, environ={}, pipeline=True) as port,
    ):
        hub = services.events.hub
        with (
            subscribed(port, "203.0.113.1") as first,
            subscribed(port, "203.0.113.2") as second,
        ):
            subscribe(first, 1)
            until(lambda: hub.size == 1, "the first subscription")
            # Both come from 127.0.0.1, which names no proxy: one caller, one slot. (Trusted
            # from loopback, as uvicorn does by default, each header was a new caller.)
            subscribe(second, 2)
            refused = json.loads(second.recv(timeout=WAIT))
            assert refused["id"] == "2"
            (error,) = (
                refused["payload"] if refused["type"] == "error" else refused["payload"]["errors"]
            )
            assert error["extensions"] == {"code": "BAD_USER_INPUT", "limit": 1}
            assert hub.size == 1


def test_forwarded_addresses_count_from_the_proxies_the_operator_names(endpoint: str) -> None:
    with (
        fresh_services(endpoint, **ONE_SLOT) as services,
        uvicorn_in_thread(
            services, environ={"FORWARDED_ALLOW_IPS": "127.0.0.1"}, pipeline=True
        ) as port,
    ):
        hub = services.events.hub
        with (
            subscribed(port, "203.0.113.1") as first,
            subscribed(port, "203.0.113.2") as second,
        ):
            subscribe(first, 1)
            subscribe(second, 2)  # another client behind the named proxy: its own slot
            until(lambda: hub.size == 2, "both subscriptions")
