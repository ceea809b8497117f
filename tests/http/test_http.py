from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import create_student

from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.store.codec import Item

QUERY = "query($id: ID!) { student(id: $id) { id name } }"
GENERATED_ID = re.compile(r"[0-9a-f]{32}")


def student(demo_items: list[Item], id_: str = "stu-0001") -> dict[str, Any]:
    item = next(i for i in demo_items if i["type"] == "student" and i["id"] == id_)
    return {"id": item["id"], "name": item["name"]}


def test_post_graphql_returns_data_and_dynamodb_accounting(
    client: TestClient, demo_items: list[Item]
) -> None:
    response = client.post("/graphql", json={"query": QUERY, "variables": {"id": "stu-0001"}})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["data"] == {"student": student(demo_items)}
    assert "errors" not in body
    accounting = body["extensions"]["dynamodb"]
    assert set(accounting) == {"requests", "consumedCapacity"}
    assert accounting["requests"] == 1
    assert accounting["consumedCapacity"] > 0


def test_accounting_counts_every_request_of_the_operation(client: TestClient) -> None:
    response = client.post(
        "/graphql",
        json={
            "query": '{ student(id: "stu-0001") { id classes(first: 2) { edges { cursor } } }'
            " teachers(first: 1) { edges { cursor } } }"
        },
    )
    body = response.json()
    # BatchGetItem (the student, its classes with it: a map on the student item) + Query
    # (the teachers' catalog). The old layout read the classes with a Query of their own: 3.
    assert body["extensions"]["dynamodb"]["requests"] == 2


def test_get_graphql_with_query_parameter_returns_data(
    client: TestClient, demo_items: list[Item]
) -> None:
    response = client.get("/graphql", params={"query": '{ student(id: "stu-0002") { id name } }'})
    assert response.status_code == 200
    body = response.json()
    assert body["data"] == {"student": student(demo_items, "stu-0002")}
    assert body["extensions"]["dynamodb"]["requests"] == 1


def test_get_graphql_with_variables_parameter(client: TestClient, demo_items: list[Item]) -> None:
    response = client.get("/graphql", params={"query": QUERY, "variables": '{"id": "stu-0003"}'})
    assert response.json()["data"] == {"student": student(demo_items, "stu-0003")}


def test_get_graphql_from_a_browser_serves_graphiql(client: TestClient) -> None:
    response = client.get("/graphql", headers={"Accept": "text/html"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "<html" in response.text.lower()
    assert "graphiql" in response.text.lower()


def test_root_redirects_to_graphql(client: TestClient) -> None:
    response = client.get("/", follow_redirects=False)
    assert response.status_code in (302, 307)
    assert response.headers["location"].endswith("/graphql")


def test_healthz_is_ok(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_client_errors_are_200_with_coded_errors(client: TestClient) -> None:
    response = client.post("/graphql", json={"query": '{ student(id: "a#b") { id } }'})
    assert response.status_code == 200
    body = response.json()
    assert body["data"] == {"student": None}
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert body["extensions"]["dynamodb"]["requests"] == 0


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/healthz"), ("POST", "/graphql"), ("GET", "/nope")]
)
def test_every_response_has_a_generated_request_id(
    client: TestClient, method: str, path: str
) -> None:
    kwargs: dict[str, Any] = {"json": {"query": "{ teachers(first: 1) { edges { cursor } } }"}}
    response = client.request(method, path, **(kwargs if method == "POST" else {}))
    assert GENERATED_ID.fullmatch(response.headers["x-request-id"])


def test_request_ids_differ_between_requests(client: TestClient) -> None:
    first, second = client.get("/healthz"), client.get("/healthz")
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


@pytest.mark.parametrize(
    "sent", ["abc-123", "trace.id:7_X", "a" * 128, "0af7651916cd43dd8448eb211c80319c"]
)
def test_sane_request_id_is_echoed(client: TestClient, sent: str) -> None:
    response = client.post(
        "/graphql",
        json={"query": "{ sports(first: 1) { edges { cursor } } }"},
        headers={"X-Request-ID": sent},
    )
    assert response.status_code == 200
    assert response.headers["x-request-id"] == sent
    assert response.headers.get_list("x-request-id") == [sent]


@pytest.mark.parametrize("sent", ["a" * 129, "x" * 300, "a b", "id;drop", "<script>", "é-id", ""])
def test_insane_request_id_is_replaced(client: TestClient, sent: str) -> None:
    response = client.get("/healthz", headers={"X-Request-ID": sent.encode("latin-1")})
    echoed = response.headers["x-request-id"]
    assert echoed != sent
    assert GENERATED_ID.fullmatch(echoed)


def test_request_id_reaches_the_graphql_context(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph_api.http.endpoint import GraphQLEndpoint

    seen: list[str] = []
    original = GraphQLEndpoint.get_context

    async def get_context(self: GraphQLEndpoint, request: Any, response: Any) -> Any:
        context = await original(self, request, response)
        seen.append(context.request_id)
        return context

    monkeypatch.setattr(GraphQLEndpoint, "get_context", get_context)
    response = client.post(
        "/graphql",
        json={"query": "{ teachers(first: 1) { edges { cursor } } }"},
        headers={"X-Request-ID": "ctx-check-1"},
    )
    assert response.status_code == 200
    assert seen == ["ctx-check-1"]


def test_an_error_outside_graphql_is_a_coded_500_with_the_request_id(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(services.auth, "authenticate", broken)
    client = TestClient(create_app(services), raise_server_exceptions=False)
    response = client.post("/graphql", json={"query": "{ __typename }"})
    assert response.status_code == 500
    request_id = response.headers["x-request-id"]
    error = response.json()["errors"][0]
    assert error["extensions"] == {"code": "INTERNAL_SERVER_ERROR", "requestId": request_id}
    assert "secret" not in response.text


@pytest.fixture
def quiet_client(services_with: Callable[..., Services]) -> Iterator[TestClient]:
    # The seeded read table, read without accounting.
    with TestClient(create_app(services_with(accounting=False))) as test_client:
        yield test_client


def test_accounting_off_omits_extensions_dynamodb(
    quiet_client: TestClient, demo_items: list[Item]
) -> None:
    response = quiet_client.post("/graphql", json={"query": QUERY, "variables": {"id": "stu-0001"}})
    body = response.json()
    assert body["data"] == {"student": student(demo_items)}
    assert "dynamodb" not in body.get("extensions", {})


def test_names_beyond_ascii_come_back_as_written(svc: Services) -> None:
    """The answer's JSON carries any Unicode name unchanged, over HTTP as over the schema."""
    name = "Zoë Ñandú 李小龍 🏀"
    student_id = create_student(svc, name=name, id="stu-unicode")["id"]
    with TestClient(create_app(svc)) as client:
        response = client.post("/graphql", json={"query": QUERY, "variables": {"id": student_id}})
    assert response.status_code == 200
    assert response.json()["data"]["student"] == {"id": student_id, "name": name}
