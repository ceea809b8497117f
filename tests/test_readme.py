"""The README's GraphQL examples, run as a newcomer would on `make run`'s demo school.

Every ```graphql block of README.md, in order, against a fresh table seeded exactly as
`make run` seeds it (the default demo settings): each must answer without errors (nor user
errors, for its mutations) and with data. A README that drifts from the API fails here.
Each is a named operation that selects `id` wherever it can, as clients' own tools want
(tests/test_client_conventions.py runs GraphQL Code Generator over them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from graphql import (
    FieldNode,
    GraphQLInterfaceType,
    GraphQLObjectType,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    TypeInfo,
    TypeInfoVisitor,
    Visitor,
    build_schema,
    get_named_type,
    parse,
    visit,
)
from starlette.testclient import TestClient
from support import assert_clean, fresh_services, make_settings, run
from websockets.sync.client import connect

from graph_api.graph.context import Services
from graph_api.http import graphiql
from graph_api.http.app import create_app
from graph_api.ops import demo
from graph_api.settings import Settings
from graph_api.store import admin
from tools.dynamodb_local import free_port

README = Path(__file__).resolve().parent.parent / "README.md"
SCHEMA_FILE = README.parent / "schema" / "schema.graphql"
BLOCKS = re.findall(r"```graphql\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
JSON_BLOCKS = re.findall(r"```json\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.fixture(scope="module")
def make_run_api(endpoint: str) -> Iterator[TestClient]:
    """The API over the demo school `make run` loads (same size, same seed), with its
    policy (personal data private, writes for dev tokens: `Settings.from_env`'s defaults)."""
    defaults = Settings.from_env({})
    policy = {"public_personal_data": False, "open_writes": False}
    assert policy == {name: getattr(defaults, name) for name in policy}
    services = Services.create(make_settings(endpoint, **policy))
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


def test_every_readme_example_is_named_and_selects_id_wherever_a_type_has_one() -> None:
    """Named, because GraphQL Code Generator refuses anonymous operations; `id` on every
    object that has one, because Apollo's InMemoryCache normalizes an object only by its
    `__typename` and `id` (without it, the same student read twice is two cache entries)."""
    schema = build_schema(SCHEMA_FILE.read_text(encoding="utf-8"))
    names = []
    for block in BLOCKS:
        document = parse(block)
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        assert operations and all(op.name for op in operations), block
        names += [op.name.value for op in operations if op.name]
        assert _without_id(schema, document) == [], block
    assert len(set(names)) == len(names), names  # one document set: names are unique


def _without_id(schema: Any, document: Any) -> list[str]:
    """The fields whose objects have an `id` the selection leaves out (as Type.field)."""
    type_info = TypeInfo(schema)
    found: list[str] = []

    class Check(Visitor):
        def enter_field(self, node: FieldNode, *_: Any) -> None:
            named = get_named_type(type_info.get_type())
            has_id = isinstance(named, GraphQLObjectType | GraphQLInterfaceType) and (
                "id" in named.fields
            )
            if has_id and node.selection_set and not _selects_id(node.selection_set):
                found.append(f"{type_info.get_parent_type()}.{node.name.value}")

    visit(document, TypeInfoVisitor(type_info, Check()))
    return found


def _selects_id(selection_set: SelectionSetNode) -> bool:
    """`id` selected unaliased, directly or in an inline fragment (`... on Class { id }`)."""
    return any(
        (isinstance(s, FieldNode) and s.name.value == "id" and s.alias is None)
        or (isinstance(s, InlineFragmentNode) and _selects_id(s.selection_set))
        for s in selection_set.selections
    )


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {}


def as_admin() -> dict[str, str]:
    """The header GraphiQL's "admin" button sets on `make run`, which the README says to pick."""
    (admin_,) = [r for r in graphiql.demo_roles(Settings()) or [] if r["role"] == "admin"]
    return cast(dict[str, str], json.loads(admin_["headers"]))


def test_every_readme_example_answers_with_data(make_run_api: TestClient) -> None:
    assert "pick admin to run these as written" in " ".join(README.read_text().split())
    for n, block in enumerate(BLOCKS, 1):
        response = make_run_api.post("/graphql", json={"query": block}, headers=as_admin())
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


RECIPE = re.search(
    r"### Against DynamoDB Local, Alternator or AWS\n\n```sh\n(.*?)```",
    README.read_text(encoding="utf-8"),
    re.S,
)
# What `make dynamodb-local` needs of a checkout; the recipe runs in a folder of its own so
# that its `.data/dynamodb` is not the developer's.
CHECKOUT = ("Makefile", ".venv", "tools", "pyproject.toml", "uv.lock", "web")
RECIPE_WAIT = 180  # seconds: a busy 2-core machine starts Java and a server slowly
RENAME_TEACHER = """mutation($name: String!) {
  updateTeacher(id: "tch-001", input: {name: $name}) { userErrors { code } } }"""


def test_the_dynamodb_local_recipe_serves_subscriptions(backend: str, tmp_path: Path) -> None:
    """ "Against DynamoDB Local": the README's commands word for word, in a shell of their
    own (no AWS_* or GRAPH_API_* set), on free ports rather than 8001 and 8000 (through
    DYNAMODB_LOCAL_PORT and GRAPH_API_PORT, the variables the Makefile and `serve` read).
    On what `serve` then serves, a websocket subscription hears the event of a mutation
    sent on another connection."""
    if backend != "dynamodb-local":
        pytest.skip("starts DynamoDB Local as the README does: --backend=dynamodb-local")
    assert RECIPE is not None
    lines = [line for line in RECIPE.group(1).splitlines() if line.strip()]
    assert lines[0].startswith("make dynamodb-local &")
    assert lines[-1] == ".venv/bin/graph-api serve"

    root = README.parent
    for name in CHECKOUT:
        (tmp_path / name).symlink_to(root / name)
    db_port, api_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GRAPH_API_"))}
    env.update(DYNAMODB_LOCAL_PORT=str(db_port), GRAPH_API_PORT=str(api_port))
    started: list[subprocess.Popen[str]] = []
    try:
        for line in lines:
            words = shlex.split(line.replace(":8001", f":{db_port}"), comments=True)
            if words[-1] == "&":  # in the background, as the shell would; on once it says so
                started.append(_start(words[:-1], tmp_path, env))
                _wait_for_line(started[-1], "DynamoDB Local on")
            elif words[0] == "export":
                env.update(word.split("=", 1) for word in words[1:])
            elif words[1:] == ["serve"]:
                started.append(_start(words, tmp_path, env))
                output = _wait_for_line(started[-1], "GraphiQL:")
                assert (
                    _message(output[0])
                    == f"graph-api: DynamoDB at http://127.0.0.1:{db_port}, table graph"
                )
                _until_healthy(f"http://127.0.0.1:{api_port}/healthz")
            else:
                done = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True)
                assert done.returncode == 0, (line, done.stdout, done.stderr)
        _a_subscription_hears_a_mutation(f"127.0.0.1:{api_port}")
    finally:
        for process in reversed(started):  # serve, then make and its DynamoDB Local
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _start(words: list[str], folder: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        words,
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: stopped with its children
    )


def _wait_for_line(process: subprocess.Popen[str], start: str) -> list[str]:
    """Read the process's output until a line starts with `start`, and return the lines so
    far (the rest is drained on a thread, so that it never blocks on a full pipe)."""
    assert process.stdout is not None
    seen: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            if _message(line).startswith(start):
                found.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + RECIPE_WAIT
    while not found.wait(0.2):
        assert process.poll() is None and time.monotonic() < deadline, "".join(seen)[-4000:]
    return seen


def _message(line: str) -> str:
    """A line's text: a JSON log record's message (a remote table's default logs)."""
    try:
        record = json.loads(line)
    except ValueError:
        return line.rstrip("\n")
    return str(record["message"]) if isinstance(record, dict) else line.rstrip("\n")


def _until_healthy(url: str) -> None:
    deadline = time.monotonic() + RECIPE_WAIT
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            assert time.monotonic() < deadline, f"{url} did not answer"
            time.sleep(0.2)


def _a_subscription_hears_a_mutation(host: str) -> None:
    with connect(
        f"ws://{host}/graphql",
        subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
        open_timeout=RECIPE_WAIT,
    ) as ws:
        ws.send(json.dumps({"type": "connection_init"}))
        assert json.loads(ws.recv(timeout=RECIPE_WAIT))["type"] == "connection_ack"
        query = 'subscription { teacherChanged(id: "tch-001") { kind teacher { name } } }'
        ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
        # No acknowledgement of a subscription, and the stream reader reads what is written
        # once it holds the lease: rename until an event comes (each rename is one).
        names: list[str] = []
        deadline = time.monotonic() + RECIPE_WAIT
        while time.monotonic() < deadline:
            names.append(f"Recipe {len(names)}")
            _post(host, RENAME_TEACHER, {"name": names[-1]})
            try:
                message = json.loads(ws.recv(timeout=1))
            except TimeoutError:
                continue
            assert message["type"] == "next", message
            assert message["payload"]["data"]["teacherChanged"]["kind"] == "UPDATED", message
            assert message["payload"]["data"]["teacherChanged"]["teacher"]["name"] in names
            return
        raise AssertionError(f"no event in {RECIPE_WAIT} s for {len(names)} renames")


def _post(host: str, query: str, variables: dict[str, Any]) -> None:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        f"http://{host}/graphql", body, {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=RECIPE_WAIT) as response:
        answer = json.load(response)
    assert answer["data"]["updateTeacher"]["userErrors"] == [], answer
