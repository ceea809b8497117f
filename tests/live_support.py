"""Helpers for the subscription tests: an app whose event pipeline runs, graphql-transport-ws
subscribers whose every wait is bounded, the mutations the tests write with, and writes
made with plain boto3.

Every wait is for a condition, bounded by WAIT seconds for a busy machine; a test that
fails does so with a message, never by hanging on a receive that nothing answers.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import anyio
import boto3
from starlette.testclient import TestClient, WebSocketTestSession
from write_support import fresh_services

from graph_api.graph.context import Services
from graph_api.http.app import create_app
from graph_api.model import items
from graph_api.model.items import TEACHING
from graph_api.store import admin
from graph_api.store.client import LOCAL_CREDENTIALS
from graph_api.store.codec import Item, encode

WAIT = 60.0  # seconds: generous, for a busy machine; tests wait on conditions, not on time
WS = ["graphql-transport-ws"]


def until(condition: Callable[[], bool], what: str, wait: float = WAIT) -> None:
    deadline = time.monotonic() + wait
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


@contextlib.contextmanager
def live_app(services: Services) -> Iterator[TestClient]:
    """The app with its lifespan (the event pipeline) running, once its reader reads."""
    with TestClient(create_app(services)) as client:
        events = services.events
        until(lambda: events.reader is not None and events.reader.reading.is_set(), "the reader")
        yield client


@contextlib.contextmanager
def live(
    endpoint: str, seed: Sequence[Item] = (), **settings: Any
) -> Iterator[tuple[TestClient, Services]]:
    """A fresh table holding `seed`, services with `settings`, and the app over them.

    The seed is written before the reader starts, which begins at what is written next: its
    events never reach a subscription. (A write made while the app runs may still be on its
    way when a test subscribes, and then be heard first.)"""
    with fresh_services(endpoint, **settings) as services:
        if seed:
            admin.batch_write(services.dynamo, services.settings.table, list(seed))
        with live_app(services) as client:
            yield client, services


def mutate(
    client: TestClient,
    query: str,
    variables: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A mutation that must be written: no errors, no user errors."""
    body = client.post(
        "/graphql", json={"query": query, "variables": variables or {}}, headers=headers
    ).json()
    assert "errors" not in body, body
    for payload in body["data"].values():
        assert not (payload or {}).get("userErrors"), body
    return body["data"]  # type: ignore[no-any-return]


def refused(client: TestClient, query: str) -> list[str]:
    """A mutation refused with user errors: their codes (nothing was written)."""
    body = client.post("/graphql", json={"query": query}).json()
    assert "errors" not in body, body
    return [e["code"] for p in body["data"].values() for e in (p or {}).get("userErrors", [])]


class Closed(Exception):
    """The server closed the websocket."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"closed {code}: {reason}")
        self.code, self.reason = code, reason


async def _receive_within(ws: WebSocketTestSession, seconds: float) -> Any:
    with anyio.fail_after(seconds):
        return await ws._send_rx.receive()


class Subscriber:
    """One graphql-transport-ws connection of the TestClient, and its messages.

    The TestClient buffers what the server sends without bound, so this client never slows
    the server down (tests/test_subscription_limits.py has a real slow one)."""

    def __init__(self, ws: WebSocketTestSession, services: Services, payload: Any = None) -> None:
        self.ws, self.services = ws, services
        init: dict[str, Any] = {"type": "connection_init"}
        if payload is not None:
            init["payload"] = payload
        ws.send_json(init)
        assert self.next()["type"] == "connection_ack"

    def send(self, id_: str, query: str, variables: dict[str, Any] | None = None) -> None:
        payload = {"query": query, "variables": variables or {}}
        self.ws.send_json({"id": id_, "type": "subscribe", "payload": payload})

    def subscribe(self, id_: str, query: str) -> None:
        """Subscribe, and wait until the server holds the subscription."""
        hub = self.services.events.hub
        before = hub.size
        self.send(id_, query)
        until(lambda: hub.size > before, f"subscription {id_}")

    def complete(self, id_: str) -> None:
        self.ws.send_json({"id": id_, "type": "complete"})

    def next(self, wait: float = WAIT) -> dict[str, Any]:
        """The next message; `Closed` if the server closed the connection instead."""
        try:
            message = self.ws.portal.call(_receive_within, self.ws, wait)
        except TimeoutError:
            raise AssertionError(f"no message within {wait:g} s") from None
        if message["type"] == "websocket.close":
            raise Closed(message.get("code", 1000), message.get("reason") or "")
        return json.loads(message["text"])  # type: ignore[no-any-return]

    def event(self, id_: str) -> dict[str, Any]:
        """The next message, which must be an event of subscription `id_`: its data."""
        message = self.next()
        assert message.get("id") == id_ and message["type"] == "next", message
        assert "errors" not in message["payload"], message
        return message["payload"]["data"]  # type: ignore[no-any-return]

    def events(self, count: int) -> list[tuple[str, dict[str, Any]]]:
        """The next `count` messages, events each: (subscription id, data)."""
        got = []
        for _ in range(count):
            message = self.next()
            assert message["type"] == "next" and "errors" not in message["payload"], message
            got.append((message["id"], message["payload"]["data"]))
        return got

    def closed(self) -> Closed:
        """Read until the server closes the connection; how it closed it."""
        while True:
            try:
                self.next()
            except Closed as closed:
                return closed


@contextlib.contextmanager
def subscriber(client: TestClient, services: Services, payload: Any = None) -> Iterator[Subscriber]:
    with client.websocket_connect("/graphql", subprotocols=WS) as ws:
        yield Subscriber(ws, services, payload)


class SSE:
    """One GraphQL-over-SSE subscription read on a thread: its lines, as they come."""

    def __init__(
        self, client: TestClient, query: str, headers: dict[str, str] | None = None
    ) -> None:
        self.lines: list[str] = []
        self.status = 0
        self._thread = threading.Thread(target=self._listen, args=(client, query, headers or {}))
        self._thread.start()

    def _listen(self, client: TestClient, query: str, headers: dict[str, str]) -> None:
        with client.stream(
            "POST",
            "/graphql",
            json={"query": query},
            headers={"accept": "text/event-stream", **headers},
        ) as response:
            self.status = response.status_code
            for line in response.iter_lines():
                self.lines.append(line)
                if line.startswith("event: complete"):
                    return

    @property
    def data(self) -> list[dict[str, Any]]:
        """Every `next` event's payload so far."""
        return [json.loads(line[6:]) for line in self.lines if line.startswith("data: {")]

    def join(self) -> None:
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "the SSE stream did not end"


# -- plain boto3, as another service writes the table -----------------------------------------


def boto_client(endpoint: str) -> Any:
    """A boto3 DynamoDB client of its own: not the API's, which only shares the table."""
    return boto3.client(
        "dynamodb", endpoint_url=endpoint, region_name="us-east-1", **LOCAL_CREDENTIALS
    )


def put(boto: Any, services: Services, item: Item) -> None:
    boto.put_item(TableName=services.settings.table, Item=encode(item))


def school(*links: tuple[items.Relation, Item, Item], nodes: Sequence[Item] = ()) -> list[Item]:
    """Items as the mutations leave them: the nodes of `links` (and `nodes`), their entries,
    counts and edge items, and the students' email guards."""
    out: dict[tuple[str, str], Item] = {}
    edges = []
    for node in nodes:
        out[(node["PK"], node["SK"])] = node
    for relation, owner, target in links:
        out[(owner["PK"], owner["SK"])], out[(target["PK"], target["SK"])] = owner, target
        if (edge := relation.attach(owner, target)) is not None:
            edges.append(edge)
    guards = [items.email_guard(n) for n in out.values() if n["type"] == "student"]
    return [*out.values(), *edges, *guards]


# -- writes, as a client makes them ----------------------------------------------------------

# The writers select `id` only: what a subscriber gets is its own selection (issue 15; the
# peers' complaint: AppSync sends subscribers what the mutating client selected).
ERRORS = "userErrors { code }"
CREATE_TEACHER = f"""mutation($id: ID!, $name: String!) {{
  createTeacher(input: {{id: $id, name: $name}}) {{ teacher {{ id }} {ERRORS} }} }}"""
RENAME_TEACHER = f"""mutation($id: ID!, $name: String!) {{
  updateTeacher(id: $id, input: {{name: $name}}) {{ teacher {{ id }} {ERRORS} }} }}"""
DELETE_TEACHER = f"mutation($id: ID!) {{ deleteTeacher(id: $id) {{ {ERRORS} }} }}"
CREATE_CLASS = f"""mutation($id: ID!, $subject: String!, $teacher: ID!) {{
  createClass(input: {{id: $id, subject: $subject, teacherId: $teacher}})
  {{ class {{ id }} {ERRORS} }} }}"""
UPDATE_CLASS = f"""mutation($id: ID!, $subject: String!, $version: Int) {{
  updateClass(id: $id, input: {{subject: $subject}}, expectedVersion: $version)
  {{ class {{ id }} {ERRORS} }} }}"""
DELETE_CLASS = f"mutation($id: ID!) {{ deleteClass(id: $id) {{ {ERRORS} }} }}"
CREATE_STUDENT = f"""mutation($id: ID!, $name: String!) {{
  createStudent(input: {{id: $id, name: $name, email: "{{}}@example.org",
    home: {{country: "France", state: "IDF", city: "Paris"}}}})
  {{ student {{ id }} {ERRORS} }} }}"""
RENAME_STUDENT = f"""mutation($id: ID!, $name: String!) {{
  updateStudent(id: $id, input: {{name: $name}}) {{ student {{ id }} {ERRORS} }} }}"""
DELETE_STUDENT = f"mutation($id: ID!) {{ deleteStudent(id: $id) {{ {ERRORS} }} }}"
ENROLL = f"""mutation($s: ID!, $c: ID!) {{
  enrollStudent(studentId: $s, classId: $c) {{ student {{ id }} {ERRORS} }} }}"""
UNENROLL = f"""mutation($s: ID!, $c: ID!) {{
  unenrollStudent(studentId: $s, classId: $c) {{ student {{ id }} {ERRORS} }} }}"""
CREATE_SPORT = f"""mutation($id: ID!, $name: String!) {{
  createSport(input: {{id: $id, name: $name}}) {{ sport {{ id }} {ERRORS} }} }}"""
RENAME_SPORT = f"""mutation($id: ID!, $name: String!) {{
  updateSport(id: $id, input: {{name: $name}}) {{ sport {{ id }} {ERRORS} }} }}"""
DELETE_SPORT = f"mutation($id: ID!) {{ deleteSport(id: $id) {{ {ERRORS} }} }}"
JOIN = f"""mutation($s: ID!, $p: ID!) {{
  joinSport(studentId: $s, sportId: $p) {{ student {{ id }} {ERRORS} }} }}"""
LEAVE = f"""mutation($s: ID!, $p: ID!) {{
  leaveSport(studentId: $s, sportId: $p) {{ student {{ id }} {ERRORS} }} }}"""


def teacher(client: TestClient, id_: str, name: str) -> None:
    mutate(client, CREATE_TEACHER, {"id": id_, "name": name})


def school_class(client: TestClient, id_: str, subject: str, teacher_id: str) -> None:
    mutate(client, CREATE_CLASS, {"id": id_, "subject": subject, "teacher": teacher_id})


def student(client: TestClient, id_: str, name: str) -> None:
    mutate(client, CREATE_STUDENT.replace("{}", id_), {"id": id_, "name": name})


def ada_maths_sam() -> list[Item]:
    """Teacher t1 teaching c1; student s1 (in no class), with a home in Paris."""
    ada = items.teacher("t1", "Ada")
    maths = items.school_class("c1", "Maths", ada)
    paris = items.Place("France", "IDF", "Paris")
    sam = items.student("s1", "Sam", "s1@example.org", paris)
    return school((TEACHING, ada, maths), nodes=[sam])
