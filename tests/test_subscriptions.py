"""Subscriptions end to end: a write to the table, read from its change stream, reaches a
subscriber over graphql-transport-ws or SSE with the subscriber's own selection. Both
backends: DynamoDB Local's Streams, and the embedded backend's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient, WebSocketTestSession

from graph_api import items
from graph_api.app import create_app
from graph_api.graph.context import Services
from graph_api.store import codec

WAIT = 60.0  # seconds: generous, for a busy machine; tests wait on conditions, not on time


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def app(empty_services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(empty_services)) as client:
        events = empty_services.events
        until(lambda: events.reader is not None and events.reader.reading.is_set(), "the reader")
        yield client


def mutate(client: TestClient, query: str) -> dict[str, Any]:
    body = client.post("/graphql", json={"query": query}).json()
    assert "errors" not in body, body
    return body["data"]  # type: ignore[no-any-return]


class Subscriber:
    """One graphql-transport-ws connection and its subscriptions' messages."""

    def __init__(self, ws: WebSocketTestSession, services: Services) -> None:
        self.ws, self.services = ws, services
        ws.send_json({"type": "connection_init"})
        assert ws.receive_json()["type"] == "connection_ack"

    def subscribe(self, id_: str, query: str) -> None:
        before = self.services.events.hub.size
        self.ws.send_json({"id": id_, "type": "subscribe", "payload": {"query": query}})
        until(lambda: self.services.events.hub.size > before, "the subscription")

    def next(self) -> dict[str, Any]:
        while True:
            message = self.ws.receive_json()
            if message["type"] != "ping":
                return message  # type: ignore[no-any-return]


@pytest.fixture
def subscriber(app: TestClient, empty_services: Services) -> Iterator[Subscriber]:
    with app.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
        yield Subscriber(ws, empty_services)


def test_an_enrolment_reaches_the_rosters_subscriber_with_its_own_selection(
    app: TestClient, subscriber: Subscriber
) -> None:
    mutate(app, 'mutation { createTeacher(input: {id: "t1", name: "Ada"}) { teacher { id } } }')
    mutate(
        app,
        'mutation { createClass(input: {id: "c1", subject: "Maths", teacherId: "t1"})'
        " { class { id } } }",
    )
    mutate(
        app,
        'mutation { createStudent(input: {id: "s1", name: "Sam", email: "sam@example.org",'
        ' home: {country: "France", state: "IDF", city: "Paris"}}) { student { id } } }',
    )
    subscriber.subscribe(
        "1",
        'subscription { rosterChanged(classId: "c1") { kind studentId'
        " student { name home { city } } class { studentCount teacher { name } } } }",
    )
    mutate(app, 'mutation { enrollStudent(studentId: "s1", classId: "c1") { student { id } } }')
    message = subscriber.next()
    assert message["type"] == "next", message
    assert message["payload"]["data"] == {
        "rosterChanged": {
            "kind": "JOINED",
            "studentId": "s1",
            "student": {"name": "Sam", "home": {"city": "Paris"}},
            "class": {"studentCount": 1, "teacher": {"name": "Ada"}},
        }
    }


def test_sse_delivers_an_event_then_completes_when_the_server_stops(
    app: TestClient, empty_services: Services
) -> None:
    hub = empty_services.events.hub
    got: list[str] = []

    def listen() -> None:
        query = 'subscription { teacherChanged(id: "t9") { kind teacher { name } } }'
        with app.stream(
            "POST", "/graphql", json={"query": query}, headers={"accept": "text/event-stream"}
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                got.append(line)
                if line.startswith("event: complete"):
                    return

    listener = threading.Thread(target=listen)
    listener.start()
    until(lambda: hub.size == 1, "the SSE subscription")
    mutate(app, 'mutation { createTeacher(input: {id: "t9", name: "Bo"}) { teacher { id } } }')
    until(lambda: any(line.startswith("data: {") for line in got), "the event")
    app.portal.call(hub.end_all)  # as a server that stops
    listener.join(WAIT)
    data = next(line for line in got if line.startswith("data: {"))
    assert '"teacherChanged":{"kind":"CREATED","teacher":{"name":"Bo"}}' in data
    assert "event: complete" in got


def test_subscribers_of_one_event_share_its_reads(
    app: TestClient, subscriber: Subscriber, empty_services: Services
) -> None:
    for n in range(3):
        subscriber.subscribe(
            str(n), 'subscription { classChanged(id: "c1") { kind class { subject } } }'
        )
    client, table = empty_services.dynamo.client, empty_services.settings.table
    sent: list[str] = []

    def count(**kwargs: Any) -> None:
        sent.append(kwargs["event_name"].rsplit(".", 1)[-1])

    client.meta.events.register("before-send.dynamodb", count)
    try:
        # Another writer, not the API: nothing of ours reads before the event does.
        klass = items.school_class("c1", "Maths", items.teacher("t1", "Ada"))
        client.put_item(TableName=table, Item=codec.encode(klass))
        answers = [subscriber.next() for _ in range(3)]
    finally:
        client.meta.events.unregister("before-send.dynamodb", count)
    for answer in answers:
        assert answer["payload"]["data"] == {
            "classChanged": {"kind": "CREATED", "class": {"subject": "Maths"}}
        }
    # Three subscribers, one event: the class is read once, not three times (the reader's
    # own calls go to Streams, or are lease writes).
    reads = [name for name in sent if name in ("BatchGetItem", "Query", "GetItem")]
    assert reads == ["BatchGetItem"], sent


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_subscription_as_a_plain_request_is_refused_saying_where_it_runs(
    app: TestClient, method: str
) -> None:
    query = 'subscription { teacherChanged(id: "t1") { kind } }'
    if method == "GET":
        response = app.get("/graphql", params={"query": query}, headers={"accept": "*/*"})
    else:
        response = app.post("/graphql", json={"query": query})
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["extensions"]["code"] == "BAD_REQUEST"
    assert "websocket" in error["message"] and "text/event-stream" in error["message"]
