"""GraphiQL is served from the API itself: a page naming no other host, its assets under
/static/graphiql/, a plain message when they are missing, nothing when it is turned off.
(tests/test_graphiql_e2e.py runs it in a browser.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from support import make_settings, missing

from graph_api.graph.context import Services
from graph_api.http import graphiql
from graph_api.http.app import create_app

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
CONTENT_TYPES = {".js": "javascript", ".css": "text/css"}


@pytest.fixture
def built() -> None:
    if not graphiql.assets_present():
        missing("GraphiQL's assets are not built: run make (python -m tools.graphiql_assets)")


def test_page_loads_everything_from_the_api(client: TestClient) -> None:
    response = client.get("/graphql", headers=BROWSER)
    assert response.status_code == 200
    page = response.text
    assert "http://" not in page
    assert "https://" not in page  # no CDN, no fonts, nothing from another host
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources == [
        "data:,",
        f"{graphiql.ASSETS_URL}/graphiql.min.css",
        f"{graphiql.ASSETS_URL}/react.production.min.js",
        f"{graphiql.ASSETS_URL}/react-dom.production.min.js",
        f"{graphiql.ASSETS_URL}/graphiql.min.js",
    ]


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("name", list(graphiql.ASSETS))
def test_assets_are_served(client: TestClient, name: str) -> None:
    response = client.get(f"/static/graphiql/{name}")
    assert response.status_code == 200
    assert CONTENT_TYPES[Path(name).suffix] in response.headers["content-type"]
    assert len(response.content) > 1000
    assert response.headers["x-request-id"]


def test_page_without_assets_says_so(tmp_path: Path) -> None:
    page = graphiql.page(tmp_path)
    assert "GraphiQL is not installed on this server" in page
    assert "tools.graphiql_assets" in page
    assert "<script" not in page


def test_default_query_cannot_break_out_of_its_script() -> None:
    assert graphiql._js_string("</script><b>") == '"<\\/script><b>"'


@pytest.fixture
def no_ide_client(endpoint: str, services: Services) -> Iterator[TestClient]:
    quiet = Services.create(make_settings(endpoint, table="test-read", graphiql=False))
    with TestClient(create_app(quiet)) as test_client:
        yield test_client
    quiet.close()


def test_graphiql_off_serves_no_ide_and_no_assets(no_ide_client: TestClient) -> None:
    response = no_ide_client.get("/graphql", headers=BROWSER)
    assert response.status_code == 404
    assert "<html" not in response.text.lower()
    (error,) = response.json()["errors"]
    assert error["extensions"]["code"] == "NOT_FOUND"
    assert "GRAPH_API_GRAPHIQL" in error["message"]
    assert no_ide_client.get("/static/graphiql/graphiql.min.js").status_code == 404
    # The API itself still answers, GET included.
    query = no_ide_client.get("/graphql", params={"query": "{ __typename }"}, headers=BROWSER)
    assert query.json()["data"] == {"__typename": "Query"}
