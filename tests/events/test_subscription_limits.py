"""What bounds a subscription: the query limits on its document, subscriptions per
connection and per process, auth for reads, idle websockets, clients that stop reading, and
a server without its event pipeline. Both backends.

Each refusal is a coded error (`extensions.code`) and leaves nothing subscribed on the
server (`hub.size`); each close of a websocket has a code and a reason that names the limit.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import uvicorn
from starlette.testclient import TestClient
from subscription_writes import SSE
from support import (
    AUTH,
    WAIT,
    WS,
    Subscriber,
    awaited,
    boto_client,
    fresh_services,
    hs256,
    live,
    live_app,
    mutate,
    refusal,
    school,
    subscriber,
    until,
)
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from graph_api.events import derive
from graph_api.events.changes import Event, Position
from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.http.websocket import BEHIND_CLOSE, FORBIDDEN_CLOSE, IDLE_CLOSE
from graph_api.model import items, keys
from graph_api.model.items import ENROLMENT, TEACHING
from graph_api.model.keys import Kind
from graph_api.settings import Settings, SettingsError
from graph_api.store import admin
from graph_api.store.codec import Item, encode, encode_value

CHEAP = 'subscription { teacherChanged(id: "t1") { kind teacher { name } } }'
CREATE_T1 = 'mutation { createTeacher(input: {id: "t1", name: "Ada"}) { teacher { id } } }'
RENAME_T1 = """mutation($name: String!) {
  updateTeacher(id: "t1", input: {name: $name}) { teacher { id } } }"""


def still_serves(client: TestClient, sub: Subscriber, services: Services) -> None:
    """The connection works after a refusal: a subscription within the limits gets events."""
    sub.subscribe("ok", CHEAP)
    mutate(client, CREATE_T1)
    assert sub.event("ok") == {"teacherChanged": {"kind": "CREATED", "teacher": {"name": "Ada"}}}


# -- the document's limits ----------------------------------------------------------------------


def test_the_depth_limit_refuses_a_subscription_before_it_subscribes(endpoint: str) -> None:
    with live(endpoint, max_depth=2) as (client, services), subscriber(client, services) as sub:
        sub.send("deep", 'subscription { classChanged(id: "c1") { class { teacher { name } } } }')
        kind, error = refusal(sub, "deep")
        assert (kind, error["extensions"]) == ("error", {"code": "BAD_USER_INPUT", "limit": 2})
        assert services.events.hub.size == 0
        still_serves(client, sub, services)


def test_the_cost_limit_refuses_a_subscription_before_it_subscribes(endpoint: str) -> None:
    with live(endpoint, max_cost=10) as (client, services), subscriber(client, services) as sub:
        # Each event would read the class and 50 students: 1 + 50.
        sub.send(
            "costly",
            'subscription { classChanged(id: "c1")'
            " { class { students(first: 50) { edges { node { name } } } } } }",
        )
        _, error = refusal(sub, "costly")
        assert error["extensions"] == {
            "code": "QUERY_TOO_COSTLY",
            "cost": {"requested": 51, "limit": 10},
        }
        assert services.events.hub.size == 0
        still_serves(client, sub, services)


# -- how many ----------------------------------------------------------------------------------


def test_the_per_connection_limit_is_a_coded_error(endpoint: str) -> None:
    limits = {"max_subscriptions_per_connection": 2}
    with live(endpoint, **limits) as (client, services), subscriber(client, services) as sub:
        sub.subscribe("a", 'subscription { studentChanged(id: "a") { kind } }')
        sub.subscribe("b", 'subscription { studentChanged(id: "b") { kind } }')
        sub.send("c", 'subscription { studentChanged(id: "c") { kind } }')
        kind, error = refusal(sub, "c")
        assert (kind, error["extensions"]) == ("error", {"code": "BAD_USER_INPUT", "limit": 2})
        assert "limit of 2" in error["message"]
        assert services.events.hub.size == 2
        sub.complete("a")  # a place freed is a place taken
        until(lambda: services.events.hub.size == 1, "the completed subscription to end")
        still_serves(client, sub, services)


def test_the_per_process_limit_is_unavailable(endpoint: str) -> None:
    with (
        live(endpoint, max_subscriptions=1) as (client, services),
        subscriber(client, services) as first,
        subscriber(client, services) as second,
    ):
        first.subscribe("1", CHEAP)
        second.send("2", CHEAP)
        _, error = refusal(second, "2")
        assert error["extensions"] == {"code": "UNAVAILABLE"}
        assert "limit of 1 subscriptions" in error["message"]
        stream = SSE(client, CHEAP)
        stream.join()
        (refused,) = stream.data
        assert refused["errors"][0]["extensions"] == {"code": "UNAVAILABLE"}
        assert services.events.hub.size == 1
        mutate(client, CREATE_T1)  # the one held still hears
        assert first.event("1")["teacherChanged"]["kind"] == "CREATED"


def test_a_second_instance_with_the_in_process_broker_says_it_cannot_deliver(
    endpoint: str,
) -> None:
    """Two single-worker instances on one table, each with the in-process broker: the one
    without the stream's lease would never hear an event. Its subscribers are told so
    (UNAVAILABLE, with the reason), not left waiting; once the reader stops, it reads and
    its subscriptions hear writes."""
    with (
        fresh_services(endpoint, stream_lease_seconds=3.0) as first,
        contextlib.closing(Services.create(first.settings)) as second,
        contextlib.ExitStack() as first_running,
    ):
        first_running.enter_context(live_app(first))  # the first holds the lease
        with TestClient(create_app(second)) as other:
            until(lambda: second.events.reader is not None, "the second's reader")
            reader = second.events.reader
            assert reader is not None
            until(lambda: reader.standby, "the second to find the lease held")
            with subscriber(other, second) as sub:
                sub.send("1", CHEAP)
                _, error = refusal(sub, "1")
            assert error["extensions"] == {"code": "UNAVAILABLE"}
            assert "another server instance reads this table's change stream" in error["message"]
            assert second.events.hub.size == 0

            # The first stops and gives the lease up: the second takes it and reads.
            first_running.close()
            until(lambda: reader.reading.is_set(), "the second to read the stream")
            with subscriber(other, second) as sub:
                sub.subscribe("2", CHEAP)
                mutate(other, CREATE_T1)
                assert sub.event("2")["teacherChanged"]["kind"] == "CREATED"


def test_a_server_without_its_pipeline_refuses_subscriptions(endpoint: str) -> None:
    """No lifespan ran (as on Lambda): nothing reads the stream, nothing is subscribed."""
    with fresh_services(endpoint) as services:
        client = TestClient(create_app(services))  # not entered: no lifespan
        with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
            sub = Subscriber(ws, services)
            sub.send("1", CHEAP)
            _, error = refusal(sub, "1")
            assert error["extensions"] == {"code": "UNAVAILABLE"}
            assert "does not run the event pipeline" in error["message"]
        stream = SSE(client, CHEAP)
        stream.join()
        assert stream.data[0]["errors"][0]["extensions"] == {"code": "UNAVAILABLE"}


# -- auth for reads ---------------------------------------------------------------------------


def test_with_auth_for_reads_a_subscription_needs_a_token(endpoint: str) -> None:
    bearer = {"Authorization": f"Bearer {hs256()}"}
    with live(endpoint, **AUTH, auth_reads=True) as (client, services):
        hub = services.events.hub
        # A websocket without a valid token is closed at `connection_init`: the subscribe
        # sent right behind it is never parsed.
        for init, problem in (
            ({}, "no token was sent"),
            ({"payload": {"Authorization": "Bearer not-a-jwt"}}, "invalid token"),
        ):
            with client.websocket_connect("/graphql", subprotocols=WS) as ws:
                ws.send_json({"type": "connection_init", **init})
                ws.send_json({"id": "1", "type": "subscribe", "payload": {"query": CHEAP}})
                closed = ws.receive()
            assert (closed["type"], closed["code"]) == ("websocket.close", FORBIDDEN_CLOSE)
            assert closed["reason"].startswith(f"this API needs a token: {problem}")
            assert hub.size == 0
        stream = SSE(client, CHEAP)
        stream.join()
        assert stream.data[0]["errors"][0]["extensions"] == {"code": "UNAUTHENTICATED"}
        assert hub.size == 0

        # A browser cannot set headers on a websocket: the token in `connection_init`.
        with subscriber(client, services, payload=bearer) as signed_in:
            signed_in.subscribe("1", CHEAP)
            mutate(client, CREATE_T1, headers=bearer)
            assert signed_in.event("1") == {
                "teacherChanged": {"kind": "CREATED", "teacher": {"name": "Ada"}}
            }


# -- idle connections ---------------------------------------------------------------------------

IDLE = 0.5  # seconds


def test_an_idle_websocket_is_closed_with_a_reason(endpoint: str) -> None:
    with live(endpoint, ws_idle_seconds=IDLE) as (client, services):
        with subscriber(client, services) as idle:
            closed = idle.closed()  # never subscribed
        assert closed.code == IDLE_CLOSE == 1000
        assert closed.reason == "idle: no subscription for 0.5 s (GRAPH_API_WS_IDLE_SECONDS)"

        with subscriber(client, services) as busy:
            busy.subscribe("1", CHEAP)
            # Held while subscribed: events keep arriving over several idle periods.
            started, n = time.monotonic(), 0
            while time.monotonic() - started < 4 * IDLE:
                n += 1
                name = f"Ada {n}"
                if n == 1:
                    mutate(client, CREATE_T1.replace("Ada", name))
                else:
                    mutate(client, RENAME_T1, {"name": name})
                assert busy.event("1")["teacherChanged"]["teacher"] == {"name": name}
            busy.complete("1")  # idle from here
            closed = busy.closed()
        assert closed.code == IDLE_CLOSE
        assert services.events.hub.size == 0


def test_the_idle_time_is_a_setting() -> None:
    assert Settings.from_env({}).ws_idle_seconds == 300.0
    assert Settings.from_env({"GRAPH_API_WS_IDLE_SECONDS": "2.5"}).ws_idle_seconds == 2.5
    with pytest.raises(SettingsError, match="GRAPH_API_WS_IDLE_SECONDS"):
        Settings.from_env({"GRAPH_API_WS_IDLE_SECONDS": "0"})


# -- clients that do not read -----------------------------------------------------------------

QUEUE = 2  # events that may wait for one subscriber
BIG = """subscription { classChanged(id: "c1") {
  kind class { subject students(first: 100) { edges { node { name } } } } } }"""


def big_class() -> list[Item]:
    """Class c1 with 40 students of long names: each event of BIG is ~5 KB of JSON."""
    teacher = items.teacher("t1", "Ada")
    klass = items.school_class("c1", "Maths", teacher)
    students = [
        items.student(f"s{n:02d}", f"Student {n:02d} " + "x" * 100, f"s{n}@example.org")
        for n in range(40)
    ]
    return school((TEACHING, teacher, klass), *[(ENROLMENT, s, klass) for s in students])


def renames(endpoint: str, services: Services, ended: Callable[[], bool]) -> int:
    """Rename c1 with plain UpdateItems until `ended()`: how many writes it took. Each
    write's change is handed to the hub, and taken by the subscriber unless it waits on its
    client, before the next is written: the queue fills because the client does not read,
    not because many came in one batch or the server (a busy machine) resolved slowly."""
    boto = boto_client(endpoint)
    reader = services.events.reader
    assert reader is not None
    hub = services.events.hub

    def taken() -> bool:
        try:
            held = hub.subscriptions()
        except RuntimeError:  # changed under this thread's read: ask again
            return False
        return ended() or all(s.backlog == 0 or s.waiting_on_client for s in held)

    deadline = time.monotonic() + WAIT
    n = 0
    while not ended():
        assert time.monotonic() < deadline, f"the subscriber was not ended after {n} events"
        n += 1
        published = reader.published
        boto.update_item(
            TableName=services.settings.table,
            Key=encode(keys.node(Kind.CLASS, "c1").as_item()),
            UpdateExpression="SET subject = :s",
            ExpressionAttributeValues={":s": encode_value(f"Subject {n}")},
        )
        until(lambda: reader.published > published, f"write {n} to be published")  # noqa: B023
        until(taken, f"write {n} to be taken")
    return n


@contextlib.contextmanager
def uvicorn_serving(services: Services, send_buffer: int) -> Iterator[int]:
    """The app on uvicorn on a loopback port, in a thread; yields the port.

    The listening socket's send buffer is small (accepted sockets inherit it), as over a slow
    network: a client that stops reading stalls the server's sends after ~100 KB instead of
    the few MB loopback would buffer. uvicorn's own pings are off: they would end a
    connection that does not answer after 20 + 20 s, which is not what is tested here."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        create_app(services), log_level="warning", ws_ping_interval=None, lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]})
    thread.start()
    try:
        until(lambda: server.started or not thread.is_alive(), "uvicorn")
        assert server.started
        events = services.events
        until(lambda: events.reader is not None and events.reader.reading.is_set(), "the reader")
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(WAIT)
        listener.close()


def test_a_websocket_that_stops_reading_is_closed_with_1013(endpoint: str) -> None:
    with fresh_services(endpoint, subscription_queue=QUEUE) as services:
        awaited(admin.batch_write(services.dynamo, services.settings.table, big_class()))
        hub = services.events.hub
        with uvicorn_serving(services, send_buffer=4096) as port:
            client_socket = socket.create_connection(("127.0.0.1", port))
            client_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            with connect(
                f"ws://127.0.0.1:{port}/graphql",
                sock=client_socket,
                subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
                compression=None,  # the events' bytes as they are
                max_queue=1,  # read no further ahead than one frame
            ) as ws:
                ws.send(json.dumps({"type": "connection_init"}))
                assert json.loads(ws.recv(timeout=WAIT))["type"] == "connection_ack"
                ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": BIG}}))
                until(lambda: hub.size == 1, "the subscription")
                # From here the client reads nothing: its socket and the server's fill, the
                # server's sends wait, and events queue up for it until QUEUE wait.
                written = renames(endpoint, services, lambda: hub.size == 0)

                # The client reads again: what was sent before, the error, the close.
                messages = []
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        messages.append(json.loads(ws.recv(timeout=WAIT)))
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == BEHIND_CLOSE == 1013
        assert closed.value.rcvd.reason == (
            f"a subscription fell {QUEUE} events behind (GRAPH_API_SUBSCRIPTION_QUEUE);"
            " subscribe again and read the current state"
        )
        *events, error, complete = messages
        assert complete == {"id": "1", "type": "complete"}
        assert error["payload"]["errors"][0]["extensions"] == {"code": "UNAVAILABLE"}
        assert f"fell {QUEUE} events behind" in error["payload"]["errors"][0]["message"]
        assert all(m["type"] == "next" and m["payload"]["data"] for m in events)
        assert 0 < len(events) < written  # some were dropped, not buffered without bound
        assert hub.size == 0


def test_a_subscription_the_server_cannot_keep_up_with_ends_blaming_the_server(
    endpoint: str,
) -> None:
    """Events come faster than the server resolves them (here a burst of more than the
    queue holds, handed to the hub at once) while the client reads everything (the
    TestClient buffers without bound): that subscription ends with an error that blames
    the server, and the connection and its other subscriptions carry on."""
    with (
        live(endpoint, big_class(), subscription_queue=QUEUE) as (client, services),
        subscriber(client, services) as sub,
    ):
        hub = services.events.hub
        sub.subscribe("heavy", BIG)
        sub.subscribe("other", CHEAP.replace("t1", "t2"))
        burst = [
            Event(derive.topic(Kind.CLASS, "c1"), "UPDATED", "c1", None, Position("burst", n))
            for n in range(QUEUE + 3)
        ]
        sub.ws.portal.call(hub.deliver, burst)
        _, error = refusal(sub, "heavy")
        assert error["extensions"] == {"code": "UNAVAILABLE"}
        assert error["message"].startswith(
            "this server resolves this subscription's events more slowly than they come:"
            f" {QUEUE} waited (GRAPH_API_SUBSCRIPTION_QUEUE)"
        )
        assert "not your client's" in error["message"]
        assert hub.size == 1
        # Not closed: the other subscription still hears.
        mutate(client, CREATE_T1.replace("t1", "t2").replace("Ada", "Grace"))
        assert sub.event("other") == {
            "teacherChanged": {"kind": "CREATED", "teacher": {"name": "Grace"}}
        }


def test_an_sse_stream_that_stops_being_read_ends_with_the_error(endpoint: str) -> None:
    """The TestClient hands a response's body over only as it is read: a stream not read is
    a client that does not read (its websockets, unlike this, buffer without bound)."""
    with live(endpoint, big_class(), subscription_queue=QUEUE) as (client, services):
        hub = services.events.hub
        with client.stream(
            "POST", "/graphql", json={"query": BIG}, headers={"accept": "text/event-stream"}
        ) as response:
            until(lambda: hub.size == 1, "the subscription")
            written = renames(endpoint, services, lambda: hub.size == 0)
            lines = [line for line in response.iter_lines() if line]
        events = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
        *sent, error = events
        assert lines[-2:] == ["event: complete", "data: "]
        assert all(e["data"]["classChanged"]["kind"] == "UPDATED" for e in sent)
        assert error["errors"][0]["extensions"] == {"code": "UNAVAILABLE"}
        assert f"fell {QUEUE} events behind" in error["errors"][0]["message"]
        assert len(sent) < written
        assert hub.size == 0
