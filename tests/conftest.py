"""Shared fixtures: one embedded moto server per session, a seeded read-only table, fresh
tables of a test's own, and the app over HTTP. The helpers they use are tests/support.py's."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from support import AUTH, Gql, Hostile, bearer, fresh_services, gql_of, hs256, make_settings, scan

from graph_api.model import keys
from graph_api.ops import demo
from graph_api.ops.check import check_table
from graph_api.store import admin
from graph_api.store.codec import Item
from graph_api.store.embedded import EmbeddedDynamoDB
from graph_api.store.table import Table

if TYPE_CHECKING:  # the API is imported by the fixtures that use it, so that tests of the
    # store and the CLI (check, migrate) run on their own
    from starlette.testclient import TestClient

    from graph_api.graph.context import Services

DEMO_STUDENTS = 60  # small: seeded once a session on each backend


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=("moto", "dynamodb-local"),
        default=os.environ.get("GRAPH_API_TEST_BACKEND", "moto"),
        help="the DynamoDB the suite runs against: embedded moto, or AWS's DynamoDB Local",
    )


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--backend"))


@pytest.fixture(scope="session")
def endpoint(backend: str) -> Iterator[str]:
    """The DynamoDB the whole suite talks to, started once a session."""
    if backend == "dynamodb-local":
        from tools import dynamodb_local

        running = dynamodb_local.start()
        yield running.endpoint
        running.stop()
        return
    server = EmbeddedDynamoDB()
    yield server.start()
    server.stop()


@pytest.fixture(scope="session")
def demo_items() -> list[Item]:
    return demo.generate(students=DEMO_STUDENTS, seed=11)


@pytest.fixture(scope="session")
def services(endpoint: str, demo_items: list[Item]) -> Iterator[Services]:
    """Services over a table seeded with the demo school. Tests must not write to it."""
    from graph_api.graph.context import Services

    settings = make_settings(endpoint, table="test-read")
    services = Services.create(settings)
    admin.create(services.dynamo, settings.table)
    admin.batch_write(services.dynamo, settings.table, demo_items)
    yield services
    services.close()


@pytest.fixture
def services_with(endpoint: str, services: Services) -> Iterator[Callable[..., Services]]:
    """Services over the seeded read table (which `services` creates) with other settings:
    `services_with(max_cost=10)`; closed after the test."""
    from graph_api.graph.context import Services

    with contextlib.ExitStack() as stack:

        def make(**overrides: Any) -> Services:
            made = Services.create(make_settings(endpoint, table="test-read", **overrides))
            stack.callback(made.close)
            return made

        yield make


@pytest.fixture
def empty_services(endpoint: str, request: pytest.FixtureRequest) -> Iterator[Services]:
    """Services over a fresh, empty table of the test's own, with the settings its `settings`
    mark names, if any: `pytestmark = pytest.mark.settings(deadline_seconds=60.0)`."""
    mark = request.node.get_closest_marker("settings")
    with fresh_services(endpoint, **(mark.kwargs if mark else {})) as services:
        yield services


@pytest.fixture
def svc(empty_services: Services) -> Services:
    """`empty_services`, by the short name the write-path tests give it."""
    return empty_services


@pytest.fixture
def gql(services: Services) -> Gql:
    return gql_of(services)


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    from starlette.testclient import TestClient

    from graph_api.http.app import create_app

    with TestClient(create_app(services)) as test_client:
        yield test_client


@pytest.fixture
def broken_get_many(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Table.get_many raises an unexpected error, whose message must never reach a
    client."""

    async def get_many(self: Table, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(Table, "get_many", get_many)


@pytest.fixture(scope="module")
def hostile(endpoint: str) -> Iterator[Hostile]:
    """A writable table with a small demo school, behind an app with auth on."""
    from starlette.testclient import TestClient

    from graph_api.graph.context import Services
    from graph_api.http.app import create_app

    settings = make_settings(endpoint, **AUTH)
    services = Services.create(settings)
    admin.create(services.dynamo, settings.table)
    admin.batch_write(services.dynamo, settings.table, demo.generate(8, 1))
    token = bearer(hs256(sub="tester", exp=int(time.time()) + 3600))
    seeded = scan(services)
    assert check_table(services.dynamo, settings.table) == []
    sent: list[str] = []
    lease = keys.stream_lease().as_item()["PK"].encode()

    def spy(model: Any, params: dict[str, Any], **_: Any) -> None:
        # The stream reader's lease writes (renewals) share the client: not the request's.
        if lease not in params.get("body", b""):
            sent.append(model.name)

    services.dynamo.register("before-call.dynamodb", spy)
    try:
        # Server exceptions become 500s (what a client would see), not test errors.
        with TestClient(create_app(services), raise_server_exceptions=False) as client:
            yield Hostile(client, services, token, seeded, sent)
    finally:
        services.dynamo.call_sync("DeleteTable", {"TableName": settings.table}, None)
        services.close()


@pytest.fixture
def h(hostile: Hostile) -> Hostile:
    hostile.sent.clear()
    return hostile
