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
from support import make_settings

from graph_api.graph.context import Services
from graph_api.http.app import create_app
from graph_api.http.health import stream_problem
from graph_api.store import admin
from tools import dynamodb_local

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
    def events(*, on: bool, holding: bool, reading: bool) -> Any:
        event = asyncio.Event()
        if reading:
            event.set()
        reader = SimpleNamespace(holding=holding, reading=event)
        return SimpleNamespace(subscriptions_on=on, reader=reader)

    assert "not reading" in str(stream_problem(events(on=True, holding=True, reading=False)))
    assert stream_problem(events(on=True, holding=True, reading=True)) is None
    assert stream_problem(events(on=True, holding=False, reading=False)) is None  # another reads
    assert stream_problem(events(on=False, holding=True, reading=False)) is None  # no subscriptions


def test_readyz_follows_dynamodb_local_down_and_back(backend: str, tmp_path: Path) -> None:
    if backend != "dynamodb-local":
        pytest.skip("stops and restarts a DynamoDB Local of its own: --backend=dynamodb-local")
    port = dynamodb_local.free_port()
    data = tmp_path / "dynamodb"  # kept across the restart: the table comes back with it
    running = dynamodb_local.start(port, data)
    try:
        settings = make_settings(running.endpoint, table="readyz")
        services = Services.create(settings)
        admin.create(services.dynamo, settings.table)
        with TestClient(create_app(services)) as client:
            assert _status_becomes(client, 200) == {"status": "ready"}
            running.stop()
            down = _status_becomes(client, 503)
            assert "readyz" in down["reason"]  # names the table
            running = dynamodb_local.start(port, data)
            assert _status_becomes(client, 200) == {"status": "ready"}
        services.close()
    finally:
        running.stop()
