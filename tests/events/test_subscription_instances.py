"""Two API instances, one stream reader: real `graph-api serve` processes on DynamoDB Local
with a Redis broker (Debian's redis-server), a websocket subscriber on each.

A write reaches the subscribers of both instances exactly once while one instance reads the
stream. The reader's instance is then killed (SIGKILL: no lease given back): the other takes
the lease over once it expires, and its subscriber hears every write made before, during and
after the takeover, in order, none twice and none lost.

DynamoDB Local only: two instances must share one table and its stream, and on the embedded
backend each `serve` starts a moto of its own (a demo in one process), so they never could.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import WAIT, RedisServer, awaited, fresh_services, running_redis, until
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from graph_api.graph.engine.context import Services
from graph_api.model import items, keys
from graph_api.store import admin, codec
from graph_api.store.client import LOCAL_CREDENTIALS
from tools.api_server import Served, served

LEASE_SECONDS = 2  # short, so that a takeover happens within the test
SEQUENCE = [f"t{n:02d}" for n in range(30)]  # renamed 10 before, 10 during, 10 after the kill
OTHERS = ["once", "marker", "marker2"]
RENAME = """mutation($id: ID!, $name: String!) {
  updateTeacher(id: $id, input: {name: $name}) { teacher { id } userErrors { code } } }"""


@pytest.fixture
def redis(backend: str, tmp_path: Path) -> Iterator[RedisServer]:
    if not backend.startswith("dynamodb-local"):
        pytest.skip(
            "two instances must share one table and its stream: on the embedded backend each"
            " `serve` runs a moto of its own; run with --backend=dynamodb-local(-tls)"
        )
    with running_redis(tmp_path) as server:
        yield server


class Listener:
    """A graphql-transport-ws connection to one instance, read on a thread: every event's
    subscription id, in the order they came."""

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        self.heard: list[str] = []
        self.other: list[Any] = []  # anything but an event: errors, completes
        stack.callback(self.join)  # once the connection is closed (the stack unwinds)
        self.ws: ClientConnection = stack.enter_context(
            connect(
                url.replace("http://", "ws://") + "/graphql",
                subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
                open_timeout=WAIT,
            )
        )
        self.ws.send(json.dumps({"type": "connection_init"}))
        assert json.loads(self.ws.recv(timeout=WAIT))["type"] == "connection_ack"
        for id_ in OTHERS + SEQUENCE:  # 33 subscriptions, each to one teacher
            query = f'subscription {{ teacherChanged(id: "{id_}") {{ kind id }} }}'
            self.ws.send(json.dumps({"id": id_, "type": "subscribe", "payload": {"query": query}}))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                message = json.loads(self.ws.recv())
                if message["type"] == "next" and "errors" not in message["payload"]:
                    assert message["payload"]["data"]["teacherChanged"]["id"] == message["id"]
                    self.heard.append(message["id"])
                elif message["type"] != "ping":
                    self.other.append(message)

    def heard_all(self) -> bool:
        return set(self.heard) >= {*OTHERS, *SEQUENCE}

    def fence(self) -> None:
        """A write to `marker` comes next: what is heard after its event is what counts."""
        self._markers = self.heard.count("marker")
        self._start: int | None = None

    def fenced(self) -> bool:
        if self._start is None and self.heard.count("marker") > self._markers:
            markers = [n for n, id_ in enumerate(self.heard) if id_ == "marker"]
            self._start = markers[self._markers] + 1
        return self._start is not None

    def since_fence(self) -> list[str]:
        assert self._start is not None
        return self.heard[self._start :]

    def join(self) -> None:
        if hasattr(self, "_thread"):
            self._thread.join(WAIT)


def rename(server: Served, id_: str, name: str) -> None:
    body = json.dumps({"query": RENAME, "variables": {"id": id_, "name": name}}).encode()
    request = urllib.request.Request(
        f"{server.url}/graphql", body, {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        answer = json.load(response)
    assert answer["data"]["updateTeacher"]["userErrors"] == [], answer


def lease_holder(services: Services) -> int | None:
    """The pid of the process holding the stream's lease (None: nobody holds it now)."""
    wire = awaited(
        services.dynamo.call(
            "GetItem",
            {
                "TableName": services.settings.table,
                "Key": codec.encode(keys.stream_lease().as_item()),
                "ConsistentRead": True,
            },
            None,
            missing_table=False,
        )
    ).get("Item")
    lease = codec.decode(wire) if wire else {}
    if "token" not in lease or lease["expires"] < time.time() * 1000:
        return None
    return int(str(lease["owner"]).rpartition(":")[2])


def test_two_instances_deliver_once_and_a_takeover_loses_and_repeats_nothing(
    redis: RedisServer, endpoint: str
) -> None:
    with fresh_services(endpoint) as services, contextlib.ExitStack() as stack:
        teachers = [items.teacher(id_, id_.title()) for id_ in OTHERS + SEQUENCE]
        awaited(admin.batch_write(services.dynamo, services.settings.table, teachers))
        env = {
            "GRAPH_API_BACKEND": "remote",
            "AWS_ENDPOINT_URL": endpoint,  # DynamoDB and its Streams
            "AWS_ACCESS_KEY_ID": LOCAL_CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": LOCAL_CREDENTIALS["aws_secret_access_key"],
            "AWS_REGION": "us-east-1",
            "GRAPH_API_TABLE": services.settings.table,
            "GRAPH_API_EVENTS_BROKER": redis.url,
            "GRAPH_API_STREAM_LEASE_SECONDS": str(LEASE_SECONDS),
            "WEB_CONCURRENCY": "1",  # one process an instance: the lease names its pid
        }
        instances = [stack.enter_context(served(**env)) for _ in range(2)]
        listeners = [Listener(instance.url, stack) for instance in instances]

        # Ready when every subscription of both hears: each teacher renamed (again, until
        # all are heard), then a fence, the last of those writes in the stream.
        deadline = time.monotonic() + WAIT
        for n in range(1_000):
            assert time.monotonic() < deadline, "the subscriptions never all heard"
            for id_ in OTHERS + SEQUENCE:
                rename(instances[0], id_, f"{id_} {n}")
            with contextlib.suppress(AssertionError):
                until(lambda: all(li.heard_all() for li in listeners), "every probe", wait=5)
                break
        for listener in listeners:
            listener.fence()
        rename(instances[0], "marker", "Fence")
        until(lambda: all(li.fenced() for li in listeners), "the fence")

        # One reader: each write reaches each instance's subscriber exactly once.
        holder_pid = lease_holder(services)
        pids = [instance.process.pid for instance in instances]
        assert holder_pid in pids
        holder, survivor = sorted(instances, key=lambda i: i.process.pid != holder_pid)
        listener = listeners[instances.index(survivor)]
        rename(survivor, "once", "Once")
        rename(survivor, "marker", "Marker")
        until(lambda: all("marker" in li.since_fence() for li in listeners), "the marker")
        assert [li.since_fence() for li in listeners] == [["once", "marker"]] * 2

        # Killed while reading: writes before, during and after the takeover.
        for id_ in SEQUENCE[:10]:
            rename(survivor, id_, f"{id_} renamed")
        until(lambda: SEQUENCE[9] in listener.since_fence(), "the writes before the kill")
        os.kill(holder.process.pid, signal.SIGKILL)
        killed = time.monotonic()
        for id_ in SEQUENCE[10:20]:  # the dead instance's lease has not run out yet
            rename(survivor, id_, f"{id_} renamed")
        until(lambda: lease_holder(services) == survivor.process.pid, "the takeover")
        took_over = time.monotonic() - killed
        for id_ in SEQUENCE[20:]:
            rename(survivor, id_, f"{id_} renamed")
        until(lambda: SEQUENCE[-1] in listener.since_fence(), "the writes after the takeover")
        rename(survivor, "marker2", "Marker 2")  # anything repeated comes before this
        until(lambda: "marker2" in listener.since_fence(), "the last marker")
        heard_all = time.monotonic() - killed

        assert listener.since_fence() == ["once", "marker", *SEQUENCE, "marker2"]
        assert listener.other == []
        # For the record (pytest -s), not asserted: how long the takeover took here.
        print(f"\nlease taken {took_over:.1f} s after the kill, all heard after {heard_all:.1f} s")
