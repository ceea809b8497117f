"""Shared fixtures: one embedded moto server per session, a seeded read-only table, fresh
tables of a test's own, and the app over HTTP. The helpers they use are tests/support.py's."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from support import (
    AUTH,
    Gql,
    Hostile,
    awaited,
    bearer,
    close_services,
    fresh_services,
    gql_of,
    hs256,
    keep_loop,
    make_settings,
    scan,
    tool,
)

from graph_api.embedded import EmbeddedDynamoDB
from graph_api.model import keys
from graph_api.ops import demo
from graph_api.ops.check import check_table
from graph_api.store import admin
from graph_api.store.codec import Item
from graph_api.store.table import Table

if TYPE_CHECKING:  # the API is imported by the fixtures that use it, so that tests of the
    # store and the CLI (check, migrate) run on their own
    from starlette.testclient import TestClient

    from graph_api.graph.engine.context import Services
    from tools.tls_terminator import Terminator

DEMO_STUDENTS = 60  # small: seeded once a session on each backend
BACKENDS = ("moto", "dynamodb-local", "dynamodb-local-tls")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=BACKENDS,
        default=os.environ.get("GRAPH_API_TEST_BACKEND", "moto"),
        help="the DynamoDB the suite runs against: embedded moto, AWS's DynamoDB Local, or"
        " DynamoDB Local behind a TLS terminator (HTTPS with a generated CA in AWS_CA_BUNDLE,"
        " as the API reaches AWS)",
    )
    parser.addoption(
        "--backend-only",
        action="store_true",
        help="only the tests that reach the session's DynamoDB; the others do the same on"
        " every backend, and `make test` runs them",
    )


# A test that asks for none of these runs the same code whatever --backend says.
BACKEND_FIXTURES = frozenset({"backend", "endpoint", "plain_endpoint", "tls"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--backend-only: only the tests that reach the session's DynamoDB (their fixtures ask
    for one of BACKEND_FIXTURES). The others, the same whatever the backend, are left to the
    run on the embedded backend (`make test`): the DynamoDB Local targets do not repeat them."""
    if not config.getoption("--backend-only"):
        return
    keep, drop = [], []
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        (keep if names & BACKEND_FIXTURES else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--backend"))


@pytest.fixture(scope="session")
def plain_endpoint(backend: str) -> Iterator[str]:
    """The DynamoDB started for the session, on its own plain-HTTP port: embedded moto, or
    DynamoDB Local (behind the terminator too, on the TLS backend)."""
    if backend in ("dynamodb-local", "dynamodb-local-tls"):
        from tools import dynamodb_local

        running = dynamodb_local.start()
        yield running.endpoint
        running.stop()
        return
    server = EmbeddedDynamoDB()
    yield server.start()
    server.stop()


@pytest.fixture(scope="session")
def tls(plain_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Terminator]:
    """HTTPS in front of the session's DynamoDB (stunnel4, tools/tls_terminator.py): its
    `endpoint` verifies against `ca_bundle` only. The TLS backend's endpoint, and on the
    others what tests/store/test_tls_path.py compares with plain HTTP."""
    from tools import tls_terminator

    tool("stunnel4", "apt-get install stunnel4")
    terminator = tls_terminator.start(plain_endpoint, tmp_path_factory.mktemp("tls"))
    yield terminator
    terminator.stop()


@pytest.fixture(scope="session")
def endpoint(backend: str, plain_endpoint: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The DynamoDB the whole suite talks to, started once a session. Over TLS, every client
    made in the session (the API's, the tests', `serve`'s) verifies the terminator's
    certificate against the generated CA: AWS_CA_BUNDLE names it, as AWS's SDKs read it."""
    if backend != "dynamodb-local-tls":
        yield plain_endpoint
        return
    terminator: Terminator = request.getfixturevalue("tls")
    with pytest.MonkeyPatch.context() as environ:
        environ.setenv("AWS_CA_BUNDLE", str(terminator.ca_bundle))
        yield terminator.endpoint


@pytest.fixture(scope="session")
def demo_api() -> Iterator[str]:
    """`graph-api serve` on the embedded backend with a 20-student demo school (seed 7), its
    base URL: for the tests that drive it from a browser or Node clients, started once.
    They write only to students of their own (the GraphiQL test reads stu-0001 and enrols
    stu-0002; the clients rename stu-0011 to stu-0014; the CORS page stu-0019; the Relay
    runtime's test creates a student and a teacher of a fresh id)."""
    from tools.api_server import serving

    with serving(students=20, GRAPH_API_DEMO_SEED="7") as url:
        yield url


@pytest.fixture(scope="session")
def demo_items() -> list[Item]:
    return demo.generate(students=DEMO_STUDENTS, seed=11)


@pytest.fixture(scope="session")
def services(endpoint: str, demo_items: list[Item]) -> Iterator[Services]:
    """Services over a table seeded with the demo school. Tests must not write to it."""
    from graph_api.graph.engine.context import Services

    settings = make_settings(endpoint, table="test-read")
    services = keep_loop(Services.create(settings))
    awaited(admin.create(services.dynamo, settings.table))
    awaited(admin.batch_write(services.dynamo, settings.table, demo_items))
    yield services
    close_services(services)


@pytest.fixture
def services_with(endpoint: str, services: Services) -> Iterator[Callable[..., Services]]:
    """Services over the seeded read table (which `services` creates) with other settings:
    `services_with(max_cost=10)`; closed after the test."""
    from graph_api.graph.engine.context import Services

    with contextlib.ExitStack() as stack:

        def make(**overrides: Any) -> Services:
            made = keep_loop(
                Services.create(make_settings(endpoint, table="test-read", **overrides))
            )
            stack.callback(close_services, made)
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

    from graph_api.graph.engine.context import Services
    from graph_api.http.app import create_app

    settings = make_settings(endpoint, **AUTH)
    services = Services.create(settings)
    awaited(admin.create(services.dynamo, settings.table))
    awaited(admin.batch_write(services.dynamo, settings.table, demo.generate(8, 1)))
    token = bearer(hs256(sub="tester", exp=int(time.time()) + 3600))
    seeded = scan(services)
    assert awaited(check_table(services.dynamo, settings.table)) == []
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
        awaited(
            services.dynamo.call(
                "DeleteTable", {"TableName": settings.table}, None, missing_table=False
            )
        )
        services.close()


@pytest.fixture
def h(hostile: Hostile) -> Hostile:
    hostile.sent.clear()
    return hostile
