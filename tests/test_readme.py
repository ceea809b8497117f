"""The README's GraphQL examples, run as a newcomer would on `make run`'s demo school.

Every ```graphql block of README.md, in order, against a fresh table seeded exactly as
`make run` seeds it (the default demo settings): each must answer without errors (nor user
errors, for its mutations) and with data. A README that drifts from the API fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import assert_clean, fresh_services, make_settings, run

from graph_api.graph.context import Services
from graph_api.http.app import create_app
from graph_api.ops import demo
from graph_api.settings import Settings
from graph_api.store import admin

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```graphql\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
JSON_BLOCKS = re.findall(r"```json\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.fixture(scope="module")
def make_run_api(endpoint: str) -> Iterator[TestClient]:
    """The API over the demo school `make run` loads (same size, same seed)."""
    defaults = Settings()
    services = Services.create(make_settings(endpoint))
    admin.create(services.dynamo, services.settings.table)
    school = demo.generate(students=defaults.demo_students, seed=defaults.demo_seed)
    admin.batch_write(services.dynamo, services.settings.table, school)
    with TestClient(create_app(services)) as client:
        yield client
    services.dynamo.call_sync("DeleteTable", {"TableName": services.settings.table}, None)
    services.close()


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 4
    assert any(block.lstrip().startswith("mutation") for block in BLOCKS)


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {}


def test_every_readme_example_answers_with_data(make_run_api: TestClient) -> None:
    for n, block in enumerate(BLOCKS, 1):
        response = make_run_api.post("/graphql", json={"query": block})
        assert response.status_code == 200, (n, response.text)
        body = response.json()
        assert body.get("errors") is None, (n, block, body.get("errors"))
        assert body["data"] and not any(_empty(v) for v in body["data"].values()), (n, body)
        refused = [
            error
            for payload in body["data"].values()
            if isinstance(payload, dict)
            for error in payload.get("userErrors", [])
        ]
        assert refused == [], (n, block, refused)


@pytest.fixture
def small_school(endpoint: str) -> Iterator[Services]:
    """A demo school of its own, small (the README's ids exist from 55 students on)."""
    with fresh_services(endpoint, deadline_seconds=60.0) as services:
        school = demo.generate(students=60, seed=Settings().demo_seed)
        admin.batch_write(services.dynamo, services.settings.table, school)
        yield services


def test_the_mutation_example_sent_again_answers_what_the_readme_shows(
    small_school: Services,
) -> None:
    """The README shows the answer to its three-mutation example sent a second time: each
    mutation refused on its own, beside the others, in `data` and without `errors`."""
    (example,) = [b for b in BLOCKS if b.lstrip().startswith("mutation")]
    assert example.count("userErrors") == 3
    first = run(small_school, example)
    assert first.problems == []
    assert {
        e["node"]["teacher"]["name"]
        for e in first.data["updateTeacher"]["teacher"]["classes"]["edges"]
    } == {"Grace Hopper"}

    again = run(small_school, example)
    (shown,) = [json.loads(b) for b in JSON_BLOCKS if '"userErrors"' in b]
    assert again.errors == []
    assert {"data": again.data} == shown
    assert_clean(small_school)
