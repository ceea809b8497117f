"""Persisted documents (graph_api/http/persisted.py): `documentId` over POST and GET, Apollo's
APQ (miss, then register), a manifest `graph-api persist` writes, GRAPH_API_DOCUMENTS=trusted
refusing anything else before a single DynamoDB request, CDN-minded `Cache-Control` on GET,
and subscriptions by id over graphql-transport-ws and SSE. Apollo Client's own
persisted-queries link against the server: tests/project/test_clients.py."""

from __future__ import annotations

import hashlib
import json
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import (
    AUTH,
    GRJ,
    OPERATIONS,
    README_BLOCKS,
    ada_maths_sam,
    awaited,
    bearer,
    fresh_services,
    hs256,
    live,
    subscriber,
    until,
)

from graph_api import cli
from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.http.persisted import STORE_BYTES, Store, entry_bytes, load_manifest, sha256_hex
from graph_api.ops import demo
from graph_api.settings import Settings, SettingsError
from graph_api.store import admin
from tools.processes import free_port

TEACHERS = """query Teachers {
  teachers(first: 2) {
    edges {
      node {
        id
      }
    }
  }
}"""
OTHER = "query Other { teachers(first: 1) { edges { node { id name } } } }"
RENAME = """mutation Rename($id: ID!, $name: String!) {
  updateStudent(id: $id, input: {name: $name}) { student { id name } userErrors { code } }
}"""
CHANGED = "subscription Changed($id: ID!) { studentChanged(id: $id) { kind student { name } } }"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def apq(text: str) -> dict[str, Any]:
    return {"persistedQuery": {"version": 1, "sha256Hash": sha(text)}}


def write_manifest(folder: Path, *bodies: str) -> str:
    path = folder / "manifest.json"
    operations = [
        {"id": sha(b), "name": f"op{n}", "type": b.split()[0], "body": b}
        for n, b in enumerate(bodies)
    ]
    manifest = {"format": "apollo-persisted-query-manifest", "version": 1, "operations": operations}
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return str(path)


class Api:
    """The app over the seeded read table, counting the DynamoDB requests it sends."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.sent: list[str] = []
        services.dynamo.register(
            "before-call.dynamodb", lambda model, **_: self.sent.append(model.name)
        )
        self.client = TestClient(create_app(services))  # no lifespan: no stream reader

    def post(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        return self.client.post("/graphql", json=body, headers=headers or {})

    def get(self, headers: dict[str, str] | None = None, **params: Any) -> Any:
        query = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in params.items()}
        return self.client.get(
            "/graphql", params=query, headers={"accept": "application/json", **(headers or {})}
        )


@pytest.fixture
def api(services_with: Callable[..., Services], tmp_path: Path) -> Callable[..., Api]:
    def make(*bodies: str, **settings: Any) -> Api:
        manifest = write_manifest(tmp_path, *bodies) if bodies else ""
        return Api(services_with(documents_manifest=manifest, **settings))

    return make


def code(response: Any) -> str:
    (error,) = response.json()["errors"]
    return str(error["extensions"]["code"])


def teacher_ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    return [edge["node"]["id"] for edge in body["data"]["teachers"]["edges"]]


# -- graph-api persist ---------------------------------------------------------------------


def test_persist_writes_apollos_manifest_of_the_operations(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "manifest.json"
    assert cli.main(["persist", str(OPERATIONS), "-o", str(out)]) == 0
    manifest = json.loads(out.read_text(encoding="utf-8"))
    assert manifest["format"] == "apollo-persisted-query-manifest" and manifest["version"] == 1
    by_name = {op["name"]: op for op in manifest["operations"]}
    assert by_name["StudentPageQuery"]["type"] == "query"
    assert by_name["EnrollStudentMutation"]["type"] == "mutation"
    for op in manifest["operations"]:
        assert op["id"] == sha(op["body"])
    # An operation travels with the fragments it spreads, through other fragments too.
    page = by_name["StudentPageQuery"]["body"]
    assert "fragment StudentPage_student on Student" in page and "fragment ClassCard_class" in page
    assert "persisted" in capsys.readouterr().out


def test_persist_add_typename_writes_the_bodies_apollo_client_sends(tmp_path: Path) -> None:
    """`--add-typename`: `__typename` in every selection set but the operation's own, once,
    as Apollo Client's cache adds it; ids still the SHA-256 of the bodies."""
    (tmp_path / "ops.graphql").write_text(
        'query Page { student(id: "stu-0001") { ...Card classes(first: 2) { __typename'
        " edges { node { id } } } } }\nfragment Card on Student { id name }\n",
        encoding="utf-8",
    )
    out = tmp_path / "m.json"
    assert cli.main(["persist", str(tmp_path), "--add-typename", "-o", str(out)]) == 0
    (op,) = json.loads(out.read_text(encoding="utf-8"))["operations"]
    assert op["id"] == sha(op["body"])
    body = " ".join(op["body"].split())
    assert body.startswith('query Page { student(id: "stu-0001") { ...Card classes')
    assert body.count("__typename") == 5  # student, classes (its own kept), edges, node, Card
    assert "classes(first: 2) { __typename edges" in body


def test_persist_refuses_operations_that_do_not_validate_or_have_no_name(tmp_path: Path) -> None:
    (tmp_path / "bad.graphql").write_text("query Bad { nope }", encoding="utf-8")
    assert cli.main(["persist", str(tmp_path), "-o", str(tmp_path / "m.json")]) == 1
    (tmp_path / "bad.graphql").write_text("{ teachers(first: 1) { edges { cursor } } }")
    assert cli.main(["persist", str(tmp_path), "-o", str(tmp_path / "m.json")]) == 2
    assert not (tmp_path / "m.json").exists()


# -- by id, any document allowed (the default) ----------------------------------------------


def test_a_manifest_document_runs_by_its_id_over_post_and_get(api: Callable[..., Api]) -> None:
    a = api(TEACHERS)
    expected = teacher_ids(a.post({"query": TEACHERS}))
    assert teacher_ids(a.post({"documentId": f"sha256:{sha(TEACHERS)}"})) == expected
    assert teacher_ids(a.post({"documentId": sha(TEACHERS)})) == expected  # the manifest's id
    assert teacher_ids(a.get(documentId=f"sha256:{sha(TEACHERS)}")) == expected


def test_apq_misses_then_registers_the_text_then_runs_by_hash(api: Callable[..., Api]) -> None:
    a = api()
    miss = a.post({"extensions": apq(OTHER)})
    assert code(miss) == "PERSISTED_QUERY_NOT_FOUND"
    assert (
        miss.json()["errors"][0]["message"] == "PersistedQueryNotFound"
    )  # Apollo's link reads either
    assert a.post({"query": OTHER, "extensions": apq(OTHER)}).status_code == 200
    assert a.post({"extensions": apq(OTHER)}).json()["data"]["teachers"]["edges"]
    assert a.get(extensions=apq(OTHER)).json()["data"]["teachers"]["edges"]  # APQ's GET
    assert a.post({"documentId": f"sha256:{sha(OTHER)}"}).json()["data"]["teachers"]["edges"]


def test_a_hash_that_is_not_the_texts_is_refused_and_not_registered(
    api: Callable[..., Api],
) -> None:
    a = api()
    wrong = {"persistedQuery": {"version": 1, "sha256Hash": sha(TEACHERS)}}
    response = a.post({"query": OTHER, "extensions": wrong}, headers=GRJ)
    assert response.status_code == 400 and code(response) == "BAD_REQUEST"
    assert code(a.post({"extensions": wrong})) == "PERSISTED_QUERY_NOT_FOUND"


@pytest.mark.parametrize(
    "body",
    [
        {"documentId": "sha256:ABC"},
        {"documentId": 7},
        {"documentId": "md5:" + "0" * 32},
        {"extensions": {"persistedQuery": {"version": 2, "sha256Hash": "0" * 64}}},
        {"extensions": {"persistedQuery": "0" * 64}},
    ],
)
def test_a_malformed_id_is_a_coded_bad_request(
    api: Callable[..., Api], body: dict[str, Any]
) -> None:
    a = api()
    response = a.post(body)
    assert response.status_code == 400 and code(response) == "BAD_REQUEST"
    assert a.sent == []


# Payloads that name no runnable document, or a malformed one, with no text or a text:
# each a coded BAD_REQUEST over POST, GET and a websocket, never a crash.
BAD_PAYLOADS: list[dict[str, Any]] = [
    {"extensions": {"persistedQuery": None}},
    {"extensions": {"persistedQuery": [1, "0" * 64]}},
    {"extensions": {"persistedQuery": 1}},
    {"extensions": {"persistedQuery": {"version": 1, "sha256Hash": 7}}},
    {"query": CHANGED, "documentId": f"sha256:{sha(OTHER)}"},  # not the text's id
    {"query": TEACHERS, "documentId": sha(OTHER)},
]


@pytest.mark.parametrize("body", BAD_PAYLOADS)
def test_a_payload_naming_no_document_is_a_coded_bad_request_over_http(
    api: Callable[..., Api], body: dict[str, Any]
) -> None:
    a = api()
    posted = a.post(body)
    assert posted.status_code == 400 and code(posted) == "BAD_REQUEST", posted.text
    got = a.get(**body)
    assert got.status_code == 400 and code(got) == "BAD_REQUEST", got.text
    assert got.headers["cache-control"] == "no-store"
    assert a.sent == []


def test_a_text_sent_with_its_own_id_runs_over_post_and_get(api: Callable[..., Api]) -> None:
    a = api()
    expected = teacher_ids(a.post({"query": TEACHERS}))
    both = {"query": TEACHERS, "documentId": f"sha256:{sha(TEACHERS)}"}
    assert teacher_ids(a.post(both)) == expected
    assert teacher_ids(got := a.get(**both)) == expected
    assert got.headers["cache-control"] == "no-store"  # a text was sent: not by id


def test_a_payload_naming_no_document_is_a_coded_error_over_a_websocket(endpoint: str) -> None:
    with (
        live(endpoint, ada_maths_sam()) as (client, services),
        subscriber(client, services) as sub,
    ):
        hub = services.events.hub
        payload = {"query": CHANGED, "variables": {"id": "s1"}}
        sub.ws.send_json({"id": "held", "type": "subscribe", "payload": payload})
        until(lambda: hub.size == 1, "the subscription")
        for n, bad in enumerate(BAD_PAYLOADS):
            sub.ws.send_json({"id": f"bad{n}", "type": "subscribe", "payload": bad})
            refused = sub.next()
            assert refused["id"] == f"bad{n}" and refused["type"] == "error", (bad, refused)
            assert refused["payload"][0]["extensions"]["code"] == "BAD_REQUEST", bad
        # The connection and its other subscription carry on.
        assert hub.size == 1
        body = client.post(
            "/graphql", json={"query": RENAME, "variables": {"id": "s1", "name": "Al"}}
        )
        assert body.json()["data"]["updateStudent"]["student"]["name"] == "Al", body.text
        assert sub.event("held") == {
            "studentChanged": {"kind": "UPDATED", "student": {"name": "Al"}}
        }


def test_the_apq_store_is_bounded_dropping_the_least_recently_used() -> None:
    one = entry_bytes("a", "12345")
    store = Store(limit=2 * one)
    store.put("a", "12345")
    store.put("b", "12345")
    assert store.get("a") == "12345"  # now the most recently used
    store.put("c", "123")
    assert (store.get("a"), store.get("b"), store.get("c")) == ("12345", None, "123")
    store.put("big", "x" * 2 * one)  # more than the whole store: never kept
    assert store.get("big") is None and store.size <= store.limit
    assert STORE_BYTES == 10_000_000  # what README's "Trusted documents" says


def test_the_apq_store_holds_its_memory_to_its_cap() -> None:
    """Filled with 9-byte texts, the store once held 1.1 M entries in 273 MB under its cap of
    10 MB: it counted the texts' bytes, not what an entry takes."""
    limit = 2_000_000
    texts = 100_000
    tracemalloc.start()
    try:
        store = Store(limit=limit)
        before = tracemalloc.get_traced_memory()[0]
        for n in range(texts):
            text = f"{{a{n:06d}}}"  # 9 bytes
            store.put(sha256_hex(text), text)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0 < len(store) < texts  # it kept some and dropped the rest
    assert held <= limit + 64_000, f"{held:,} bytes for {len(store):,} entries"


NEEDS_N = "query Q($n: Int!) { teachers(first: $n) { edges { cursor } } }"


@pytest.mark.parametrize(
    "text", ["{ teachers(first: 1) {", "{ nope }", NEEDS_N], ids=["syntax", "invalid", "variables"]
)
def test_a_text_is_registered_only_once_it_ran(api: Callable[..., Api], text: str) -> None:
    # 33,361 unparseable texts were registered at 661 a second.
    a = api()
    refused = a.post({"query": text, "extensions": apq(text)})
    assert refused.json()["errors"], refused.text  # a syntax, validation or variable error
    assert code(a.post({"extensions": apq(text)})) == "PERSISTED_QUERY_NOT_FOUND"


def test_only_a_caller_who_may_run_a_text_registers_it(api: Callable[..., Api]) -> None:
    a = api(**AUTH, auth_reads=True)
    token = bearer(hs256())
    refused = a.post({"query": OTHER, "extensions": apq(OTHER)})  # anonymous: may not read
    assert code(refused) == "UNAUTHENTICATED"
    assert code(a.post({"extensions": apq(OTHER)}, headers=token)) == "PERSISTED_QUERY_NOT_FOUND"
    assert a.post({"query": OTHER, "extensions": apq(OTHER)}, headers=token).status_code == 200
    assert a.post({"extensions": apq(OTHER)}, headers=token).json()["data"]["teachers"]

    # Reads public, writes signed in: an anonymous mutation registers nothing either.
    b = api(**AUTH)
    variables = {"id": "stu-0001", "name": "Anon"}
    body = {"query": RENAME, "variables": variables, "extensions": apq(RENAME)}
    assert code(b.post(body)) == "UNAUTHENTICATED"
    assert code(b.post({**body, "query": None})) == "PERSISTED_QUERY_NOT_FOUND"


def test_a_subscription_registers_its_text_with_its_first_event(endpoint: str) -> None:
    invalid = "subscription Bad($id: ID!) { studentChanged(id: $id) { nope } }"
    with (
        live(endpoint, ada_maths_sam()) as (client, services),
        subscriber(client, services) as sub,
    ):

        def by_hash(text: str) -> str:
            return code(client.post("/graphql", json={"extensions": apq(text)}))

        for id_, text in (("bad", invalid), ("good", CHANGED)):
            payload = {"query": text, "variables": {"id": "s1"}, "extensions": apq(text)}
            sub.ws.send_json({"id": id_, "type": "subscribe", "payload": payload})
        refused = sub.next()
        assert (refused["id"], refused["type"]) == ("bad", "error")
        until(lambda: services.events.hub.size == 1, "the subscription")
        assert by_hash(invalid) == by_hash(CHANGED) == "PERSISTED_QUERY_NOT_FOUND"
        rename = {"query": RENAME, "variables": {"id": "s1", "name": "Al"}}
        assert client.post("/graphql", json=rename).json()["data"]["updateStudent"]["student"]
        assert sub.event("good")["studentChanged"]["kind"] == "UPDATED"
        assert by_hash(invalid) == "PERSISTED_QUERY_NOT_FOUND"
        # Registered: found, and refused only for asking a subscription of plain HTTP.
        assert by_hash(CHANGED) == "BAD_REQUEST"


# -- trusted documents only ----------------------------------------------------------------


def test_trusted_mode_refuses_anything_else_before_any_dynamodb_request(
    api: Callable[..., Api],
) -> None:
    a = api(TEACHERS, documents="trusted")
    refusals = [
        (a.post({"query": OTHER}, headers=GRJ), "FORBIDDEN_DOCUMENT"),
        (a.post({"documentId": f"sha256:{sha(OTHER)}"}), "PERSISTED_QUERY_NOT_FOUND"),
        (a.post({"extensions": apq(OTHER)}), "PERSISTED_QUERY_NOT_FOUND"),
        (a.post({"query": OTHER, "extensions": apq(OTHER)}), "FORBIDDEN_DOCUMENT"),
        (a.post({"extensions": apq(OTHER)}), "PERSISTED_QUERY_NOT_FOUND"),  # not registered
        (a.get(query=OTHER), "FORBIDDEN_DOCUMENT"),
        (a.post({"query": "{ this does not parse"}), "FORBIDDEN_DOCUMENT"),  # never parsed
    ]
    assert [code(response) for response, _ in refusals] == [expected for _, expected in refusals]
    assert refusals[0][0].status_code == 400  # a request error (GraphQL over HTTP)
    assert a.sent == []
    # The manifest's document runs, by id or by its exact text.
    assert teacher_ids(a.post({"documentId": sha(TEACHERS)}))
    assert teacher_ids(a.post({"query": TEACHERS}))
    assert a.sent


def test_trusted_mode_needs_a_manifest_that_holds_its_ids(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="GRAPH_API_DOCUMENTS_MANIFEST"):
        Settings.from_env({"GRAPH_API_DOCUMENTS": "trusted"})
    settings = Settings.from_env(
        {"GRAPH_API_DOCUMENTS": "trusted", "GRAPH_API_DOCUMENTS_MANIFEST": "m.json"}
    )
    assert settings.documents == "trusted" and settings.documents_manifest == "m.json"
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "format": "apollo-persisted-query-manifest",
                "version": 1,
                "operations": [{"id": "0" * 64, "body": "{ a }"}],
            }
        )
    )
    with pytest.raises(SettingsError, match="SHA-256"):
        load_manifest(str(bad))


def test_the_readme_examples_run_by_id_in_trusted_mode(endpoint: str, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, *README_BLOCKS)
    with fresh_services(endpoint, documents="trusted", documents_manifest=manifest) as services:
        school = demo.generate(students=60, seed=Settings().demo_seed)
        awaited(admin.batch_write(services.dynamo, services.settings.table, school))
        client = TestClient(create_app(services))
        for block in README_BLOCKS:
            body = client.post("/graphql", json={"documentId": f"sha256:{sha(block)}"}).json()
            assert "errors" not in body and body["data"], (block, body)


# -- GET and a CDN -------------------------------------------------------------------------


def test_a_query_by_id_over_get_is_cacheable_only_when_anonymous_and_clean(
    api: Callable[..., Api],
) -> None:
    a = api(TEACHERS)
    document_id = f"sha256:{sha(TEACHERS)}"
    anonymous = a.get(documentId=document_id)
    assert teacher_ids(anonymous)
    assert anonymous.headers["cache-control"] == "public, max-age=60"
    assert "Authorization" in anonymous.headers["vary"] and "Accept" in anonymous.headers["vary"]
    token = bearer(hs256(sub="reader"))
    authorized = a.get(headers=token, documentId=document_id)
    assert authorized.headers["cache-control"] == "private, no-store"
    miss = a.get(documentId=f"sha256:{sha(OTHER)}")  # a CDN keeping this would stop APQ
    assert code(miss) == "PERSISTED_QUERY_NOT_FOUND" and miss.headers["cache-control"] == "no-store"
    failed = a.get(documentId=document_id, variables={"unknown": 1}, operationName="Nope")
    assert "errors" in failed.json() and failed.headers["cache-control"] == "no-store"
    # A query's text over GET is not a persisted document: no CDN may keep its answer.
    assert teacher_ids(by_text := a.get(query=TEACHERS))
    assert by_text.headers["cache-control"] == "no-store"
    assert a.get(headers=token, query=TEACHERS).headers["cache-control"] == "no-store"


def test_a_browser_asking_by_id_gets_the_answer_not_graphiql(api: Callable[..., Api]) -> None:
    a = api(TEACHERS)
    html = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    assert teacher_ids(a.get(headers=html, documentId=sha(TEACHERS)))


def test_serve_refuses_a_manifest_it_cannot_read_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    monkeypatch.setenv("GRAPH_API_DOCUMENTS", "trusted")
    monkeypatch.setenv("GRAPH_API_DOCUMENTS_MANIFEST", str(tmp_path / "missing.json"))
    # A free port: a server the developer runs on 8000 must not answer for the manifest.
    monkeypatch.setenv("GRAPH_API_PORT", str(free_port()))
    assert cli.main(["serve"]) == 2
    assert "GRAPH_API_DOCUMENTS_MANIFEST" in capsys.readouterr().err


def test_a_mutation_by_id_is_never_run_over_get(api: Callable[..., Api]) -> None:
    a = api(RENAME)
    response = a.get(documentId=f"sha256:{sha(RENAME)}", variables={"id": "stu-0001", "name": "X"})
    assert response.status_code == 405
    assert not {"UpdateItem", "TransactWriteItems", "PutItem"} & set(a.sent)


# -- subscriptions by id -------------------------------------------------------------------


@pytest.fixture
def live_trusted(endpoint: str, tmp_path: Path) -> Iterator[tuple[TestClient, Services]]:
    """A live app running trusted documents only, over student s1 (Sam)."""
    manifest = write_manifest(tmp_path, CHANGED, RENAME)
    settings = {"documents": "trusted", "documents_manifest": manifest}
    with live(endpoint, ada_maths_sam(), **settings) as (client, services):
        yield client, services


def rename(client: TestClient, name: str) -> None:
    """Student s1's rename, by the manifest's id: a write over POST."""
    variables = {"id": "s1", "name": name}
    body = client.post("/graphql", json={"documentId": sha(RENAME), "variables": variables})
    assert body.json()["data"]["updateStudent"]["student"]["name"] == name, body.text


def test_a_subscription_by_id_over_graphql_transport_ws(
    live_trusted: tuple[TestClient, Services],
) -> None:
    client, services = live_trusted
    with subscriber(client, services) as sub:
        sub.ws.send_json({"id": "x", "type": "subscribe", "payload": {"query": OTHER}})
        refused = sub.next()
        assert (
            refused["type"] == "error"
            and refused["payload"][0]["extensions"]["code"] == "FORBIDDEN_DOCUMENT"
        )
        hub = services.events.hub
        payload = {"documentId": f"sha256:{sha(CHANGED)}", "variables": {"id": "s1"}}
        sub.ws.send_json({"id": "s", "type": "subscribe", "payload": payload})
        until(lambda: hub.size == 1, "the subscription")
        rename(client, "Ada")
        assert sub.event("s") == {"studentChanged": {"kind": "UPDATED", "student": {"name": "Ada"}}}


def test_a_subscription_by_id_over_sse(live_trusted: tuple[TestClient, Services]) -> None:
    client, services = live_trusted
    hub = services.events.hub
    lines: list[str] = []
    body = {"documentId": f"sha256:{sha(CHANGED)}", "variables": {"id": "s1"}}

    def listen() -> None:
        with client.stream(
            "POST", "/graphql", json=body, headers={"accept": "text/event-stream"}
        ) as response:
            for line in response.iter_lines():
                lines.append(line)
                if line.startswith("data: {"):
                    return

    thread = threading.Thread(target=listen)
    thread.start()
    until(lambda: hub.size == 1, "the SSE subscription")
    rename(client, "Bo")
    thread.join(30)
    events = [json.loads(line[6:])["data"] for line in lines if line.startswith("data: {")]
    assert events == [{"studentChanged": {"kind": "UPDATED", "student": {"name": "Bo"}}}]
