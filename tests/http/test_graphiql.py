"""GraphiQL is served from the API itself: a page naming no other host, its assets under
/static/graphiql/, a plain message when they are missing, nothing when it is turned off.
(tests/http/test_graphiql_e2e.py runs it in a browser.)"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from support import make_settings, missing

from graph_api.graph.engine.context import Services
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
    assert graphiql._js_value("</script><b>") == '"<\\/script><b>"'


@pytest.fixture
def no_ide_client(services_with: Callable[..., Services]) -> Iterator[TestClient]:
    with TestClient(create_app(services_with(graphiql=False))) as test_client:
        yield test_client


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


def test_only_a_server_taking_dev_tokens_offers_roles_and_its_tokens_sign_in() -> None:
    """The role picker's entries: the embedded backend's dev tokens, which its own
    authenticator accepts as the role they name; none on a remote table or with sign-in
    configured (a real issuer's tokens are not the page's to make)."""
    import asyncio

    from graph_api.graph.auth.tokens import Authenticator
    from graph_api.settings import Settings

    embedded = Settings(backend="embedded")
    entries = graphiql.demo_roles(embedded)
    assert entries is not None
    assert [e["role"] for e in entries] == ["anonymous", "admin", "teacher", "student", "guardian"]
    assert entries[0]["headers"] == ""
    auth = Authenticator(embedded)
    for entry in entries[1:]:
        header = json.loads(entry["headers"])["Authorization"]
        principal = asyncio.run(auth.authenticate(header)).principal
        assert principal is not None and {r.value for r in principal.roles} == {entry["role"]}
    student = asyncio.run(auth.authenticate(json.loads(entries[3]["headers"])["Authorization"]))
    assert student.principal is not None and student.principal.student_id == "stu-0001"
    assert graphiql.demo_roles(Settings(backend="remote")) is None
    signed_in = Settings(
        backend="embedded", jwt_secret="s" * 32, jwt_issuer="https://i.test", jwt_audience="api"
    )
    assert graphiql.demo_roles(signed_in) is None
    assert "const roles = null;" in graphiql.page()  # no picker
    admin_token = json.loads(entries[1]["headers"])["Authorization"].split()[-1]
    assert admin_token in graphiql.page(roles=entries)


SIGNED_IN = {"jwt_secret": "s" * 32, "jwt_issuer": "https://issuer.test", "jwt_audience": "api"}


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("overrides", [{"backend": "remote"}, SIGNED_IN], ids=["remote", "sign-in"])
def test_only_the_embedded_demo_serves_the_role_picker(
    endpoint: str, services: Services, client: TestClient, overrides: dict[str, str]
) -> None:
    """The page a browser gets: on the embedded demo (no sign-in: dev tokens), the picker with
    its tokens; on a remote table, or with sign-in configured, the same page with no picker
    and no token in it."""
    demo = client.get("/graphql", headers=BROWSER).text
    assert "const roles = null;" not in demo and '"Authorization": "Bearer ' in demo.replace(
        '\\"', '"'
    )
    other = Services.create(make_settings(endpoint, table="test-read", **overrides))
    try:
        with TestClient(create_app(other)) as test_client:
            page = test_client.get("/graphql", headers=BROWSER)
    finally:
        other.close()
    assert page.status_code == 200 and "GraphiQL" in page.text
    assert "const roles = null;" in page.text
    assert "Bearer" not in page.text and "eyJ" not in page.text  # no token, no JWT
