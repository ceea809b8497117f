"""Shared fixtures: one embedded moto server per session, a seeded read-only table, and
helpers to run GraphQL through the schema (with its request context) or over HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from graph_api.ops import demo
from graph_api.settings import Settings
from graph_api.store import admin
from graph_api.store.codec import Item
from graph_api.store.embedded import EmbeddedDynamoDB

if TYPE_CHECKING:  # the API is imported by the fixtures that use it, so that tests of the
    # store and the CLI (check, migrate) run on their own
    from starlette.testclient import TestClient

    from graph_api.graph.context import Context, Services

DEMO_STUDENTS = 60  # small: seeded once a session on each backend


@dataclass
class Result:
    data: Any
    errors: list[dict[str, Any]]
    extensions: dict[str, Any]
    context: Context

    @property
    def codes(self) -> list[str]:
        """The codes of the GraphQL errors (`extensions.code`)."""
        return [e["extensions"]["code"] for e in self.errors]

    @property
    def user_errors(self) -> list[dict[str, Any]]:
        """The `userErrors` of every mutation payload in `data`, in document order."""
        values = self.data.values() if isinstance(self.data, dict) else ()
        return [
            error
            for value in values
            if isinstance(value, dict)
            for error in value.get("userErrors") or ()
        ]

    @property
    def user_codes(self) -> list[str]:
        return [e["code"] for e in self.user_errors]

    @property
    def problems(self) -> list[dict[str, Any]]:
        """GraphQL errors and user errors: empty when every mutation was written."""
        return self.errors + self.user_errors


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


def make_settings(endpoint: str, **overrides: Any) -> Settings:
    base = Settings(
        table=f"test-{uuid.uuid4().hex[:8]}",
        backend="embedded",
        endpoint_url=endpoint,
        cursor_secret=b"test-cursor-secret",
        cursor_secret_configured=True,
        # As the embedded backend serves its generated demo (`Settings.from_env`); the tests
        # of the setting itself, and of personal data kept private, are
        # tests/test_personal_data.py.
        public_personal_data=True,
    )
    return dataclasses.replace(base, **overrides)


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
def empty_services(endpoint: str) -> Iterator[Services]:
    """Services over a fresh, empty table of the test's own."""
    from graph_api.graph.context import Services

    settings = make_settings(endpoint)
    services = Services.create(settings)
    admin.create(services.dynamo, settings.table)
    yield services
    services.dynamo.call_sync("DeleteTable", {"TableName": settings.table}, None)
    services.close()


def assert_no_key_in_messages(errors: list[dict[str, Any]]) -> None:
    """Messages name ids, never internal keys (`CLASS#cls-001`): no error or user error of
    any test that runs through `execute` may hold a '#', the keys' separator."""
    for error in errors:
        assert "#" not in error.get("message", ""), error


def execute(services: Services, query: str, variables: dict[str, Any] | None = None) -> Result:
    """Run one operation through the schema with a fresh request context."""
    from graph_api.graph.context import Context
    from graph_api.graph.schema import build_schema

    async def run() -> Result:
        context = Context.create(services, f"test-{uuid.uuid4().hex[:8]}")
        schema = build_schema(services.settings)
        result = await schema.execute(query, variable_values=variables, context_value=context)
        errors = [e.formatted for e in result.errors or []]
        answer = Result(result.data, errors, result.extensions or {}, context)
        assert_no_key_in_messages(answer.problems)  # GraphQL errors and user errors
        return answer

    return asyncio.run(run())


@pytest.fixture
def gql(services: Services) -> Any:
    return lambda query, variables=None: execute(services, query, variables)


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    from starlette.testclient import TestClient

    from graph_api.http.app import create_app

    with TestClient(create_app(services)) as test_client:
        yield test_client
