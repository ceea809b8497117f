"""`/readyz` (graph_api/http/health.py): ready only while the table answers and, where
subscriptions are served, the stream reader is not stuck; `/healthz` stays liveness."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import awaited, fresh_services, make_settings, refusal, subscriber

from graph_api.events.lease import Lease
from graph_api.events.live import READER_DOWN, LiveEvents
from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.http.health import stream_problem
from graph_api.settings import Settings
from graph_api.store import admin
from tools import dynamodb_local
from tools.processes import free_port

# Generous bounds on conditions a busy machine reaches late; a pass takes a few seconds.
SETTLE_SECONDS = 60


def _status_becomes(client: TestClient, status: int) -> dict[str, Any]:
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        response = client.get("/readyz")
        if response.status_code == status or time.monotonic() > deadline:
            assert response.status_code == status, response.text
            body: dict[str, Any] = response.json()
            return body
        time.sleep(0.25)


def test_ready_while_the_table_answers(client: TestClient) -> None:
    # Not before the stream reader, when it holds the lease, has started reading.
    assert _status_becomes(client, 200) == {"status": "ready"}
    assert client.get("/healthz").json() == {"status": "ok"}


def test_not_ready_without_the_table(endpoint: str) -> None:
    services = Services.create(make_settings(endpoint, table="no-such-table"))
    with TestClient(create_app(services)) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["status"] == "unavailable"
        assert "graph-api create-table" in response.json()["reason"]
        assert client.get("/healthz").status_code == 200  # alive, not ready
    services.close()


def test_a_reader_that_holds_the_lease_but_does_not_read_is_a_problem() -> None:
    def problem(
        *, reads: bool = True, holding: bool, reading: bool, silent: float = 0.0
    ) -> str | None:
        event = asyncio.Event()
        if reading:
            event.set()
        reader = SimpleNamespace(
            holding=holding, reading=event, silent_for=lambda: silent, stale_after=30.0
        )
        events = LiveEvents(Settings())
        events.reader, events.reads = reader, reads  # type: ignore[assignment]
        return stream_problem(events)

    assert "not reading" in str(problem(holding=True, reading=False))
    assert problem(holding=True, reading=True) is None
    assert problem(holding=False, reading=False) is None  # another reads
    assert problem(reads=False, holding=True, reading=False) is None  # no reader here
    # A reader that has not heard DynamoDB answer for longer than its bound.
    assert "has not heard DynamoDB answer for 31 s" in str(
        problem(holding=False, reading=False, silent=31.0)
    )


CHEAP = 'subscription { teacherChanged(id: "t1") { kind } }'


def test_a_crashed_stream_reader_makes_readyz_fail_refuses_subscriptions_and_restarts(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader task dies of an error it did not expect: not ready, subscriptions refused
    (UNAVAILABLE, saying why) instead of waiting for events that never come; once the error
    is gone, the reader starts again and both come back."""
    take = Lease.take

    async def broken(self: Lease) -> bool:
        raise RuntimeError("a bug in the lease")

    monkeypatch.setattr(Lease, "take", broken)
    with fresh_services(endpoint) as services, TestClient(create_app(services)) as client:
        body = _status_becomes(client, 503)
        assert "stream reader stopped on RuntimeError" in body["reason"], body
        with subscriber(client, services) as sub:
            sub.send("1", CHEAP)
            _, error = refusal(sub, "1")
        assert error["extensions"] == {"code": "UNAVAILABLE"}
        assert error["message"] == READER_DOWN
        assert services.events.hub.size == 0

        monkeypatch.setattr(Lease, "take", take)
        assert _status_becomes(client, 200) == {"status": "ready"}
        with subscriber(client, services) as sub:
            sub.subscribe("2", CHEAP)  # held: the reader runs again


def test_readyz_follows_dynamodb_local_down_and_back(backend: str, tmp_path: Path) -> None:
    if backend != "dynamodb-local":
        pytest.skip("stops and restarts a DynamoDB Local of its own: --backend=dynamodb-local")
    port = free_port()
    data = tmp_path / "dynamodb"  # kept across the restart: the table comes back with it
    running = dynamodb_local.start(port, data)
    try:
        settings = make_settings(running.endpoint, table="readyz")
        services = Services.create(settings)
        awaited(admin.create(services.dynamo, settings.table))
        with TestClient(create_app(services)) as client:
            assert _status_becomes(client, 200) == {"status": "ready"}
            running.stop()
            # The stream reader may notice first; within the probe's cache time the
            # reason names the table, the cause.
            deadline = time.monotonic() + SETTLE_SECONDS
            down = _status_becomes(client, 503)
            while "readyz" not in down["reason"] and time.monotonic() < deadline:
                time.sleep(0.25)
                down = _status_becomes(client, 503)
            assert "readyz" in down["reason"], down  # names the table
            running = dynamodb_local.start(port, data)
            assert _status_becomes(client, 200) == {"status": "ready"}
        services.close()
    finally:
        running.stop()
