"""What several of the suite's folders share, each helper once (fixtures are in conftest.py;
a helper only one folder uses sits in that folder): running GraphQL through the schema,
building a table and reading it back, the graph built through mutations, subscribers of the
live app, injected faults, and the tools some tests drive (node and npm, redis-server).

The API's upper layers (the schema, the app) and the libraries only some tests need are
imported by the helpers that use them: conftest.py imports this module, and tests of the
store and the CLI (check, migrate) run without the schema.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

import boto3
import jwt
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config

from graph_api.model import items, keys
from graph_api.model.items import TEACHING, email_guard
from graph_api.ops.check import check_table
from graph_api.settings import Settings
from graph_api.store import admin, codec
from graph_api.store.client import LOCAL_CREDENTIALS, Dynamo
from graph_api.store.codec import Item
from tools.contention import as_sent
from tools.node import npm_ci
from tools.processes import free_port

if TYPE_CHECKING:
    from starlette.testclient import TestClient, WebSocketTestSession

    from graph_api.graph.engine.context import Context, Services


ROOT = Path(__file__).resolve().parent.parent  # the checkout
README = ROOT / "README.md"
# A sample front end's operations (`make schema-check` checks them too), and Relay's compiler
# and runtime, pinned, over them and the README's conventions.
OPERATIONS = ROOT / "tests" / "ops" / "operations"
RELAY = ROOT / "tests" / "project" / "relay"
# The README's ```graphql examples: run by its own tests, and as clients and manifests take them.
README_BLOCKS = re.findall(r"```graphql\n(.*?)```", README.read_text(encoding="utf-8"), re.S)

STUDENT_FIELDS = "id name email version home { country state city street }"
# Every mutation document of the tests selects them: `ok` and `all_ok` check they are empty.
USER_ERRORS = "userErrors { code message field currentVersion }"


# -- running operations through the schema ------------------------------------------------


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


def make_settings(endpoint: str, **overrides: Any) -> Settings:
    base = Settings(
        table=f"test-{uuid.uuid4().hex[:8]}",
        backend="embedded",
        endpoint_url=endpoint,
        cursor_secret=b"test-cursor-secret",
        cursor_secret_configured=True,
        # The embedded demo as it was before it enforced its policy with dev tokens: personal
        # data public, writes open without a token. The tests of those defaults are
        # tests/graph/auth/test_personal_data.py and tests/graph/auth/test_authz_reads.py.
        public_personal_data=True,
        open_writes=True,
    )
    return dataclasses.replace(base, **overrides)


def assert_no_key_in_messages(errors: list[dict[str, Any]]) -> None:
    """Messages name ids, never internal keys (`CLASS#cls-001`): no error or user error of
    any test that runs through `execute` may hold a '#', the keys' separator."""
    for error in errors:
        assert "#" not in error.get("message", ""), error


def awaited(work: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine of the package (a command's op, `Dynamo.call`) to its end from a
    synchronous test, under `asyncio.run` as `graph-api` runs its commands. Called from a
    running loop (a helper inside an async test), it runs on a thread of its own and blocks
    that loop until done, as any synchronous helper would."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


# One event loop per Services the fixtures make (keyed by its Dynamo), as a server has one:
# the loop's DynamoDB client is then made once, not once per operation.
_LOOPS: weakref.WeakKeyDictionary[Dynamo, asyncio.Runner] = weakref.WeakKeyDictionary()


def keep_loop(services: Services) -> Services:
    """Give `services` a loop of its own for `run_on`; `close_services` must close it."""
    _LOOPS[services.dynamo] = asyncio.Runner()
    return services


def run_on(services: Services, operation: Coroutine[Any, Any, Any]) -> Any:
    """Run `operation` to its end: on `services`' own loop when it has one that is free (not
    running: a thread of a test may call in while it runs), else on a loop of its own."""
    runner = _LOOPS.get(services.dynamo)
    if runner is None or runner.get_loop().is_running():
        return asyncio.run(operation)
    return runner.run(operation)


def close_services(services: Services) -> None:
    """`services.close()`, after closing its loop (`keep_loop`), if it has one: the loop's
    tasks are cancelled, its client's among them, which closes that client."""
    runner = _LOOPS.pop(services.dynamo, None)
    if runner is not None:
        runner.close()
    services.close()


def execute(services: Services, query: str, variables: dict[str, Any] | None = None) -> Result:
    """Run one operation through the schema with a fresh request context."""
    from graph_api.graph.engine.context import Context
    from graph_api.graph.schema import build_schema

    async def run() -> Result:
        context = Context.create(services, f"test-{uuid.uuid4().hex[:8]}")
        schema = build_schema(services.settings)
        result = await schema.execute(query, variable_values=variables, context_value=context)
        errors = [e.formatted for e in result.errors or []]
        answer = Result(result.data, errors, result.extensions or {}, context)
        assert_no_key_in_messages(answer.problems)  # GraphQL errors and user errors
        return answer

    result: Result = run_on(services, run())
    return result


Gql = Callable[..., Result]  # the `gql` fixture: (query, variables=None) -> Result


def gql_of(services: Services) -> Gql:
    """`execute` on `services`, as the `gql` fixture runs it on the seeded table."""
    return lambda query, variables=None: execute(services, query, variables)


@contextlib.contextmanager
def fresh_services(endpoint: str, **settings: Any) -> Iterator[Services]:
    """Services over a new empty table of its own, deleted afterwards."""
    from graph_api.graph.engine.context import Services

    services = keep_loop(Services.create(make_settings(endpoint, **settings)))
    awaited(admin.create(services.dynamo, services.settings.table))
    try:
        yield services
    finally:
        awaited(
            services.dynamo.call(
                "DeleteTable", {"TableName": services.settings.table}, None, missing_table=False
            )
        )
        close_services(services)


def run(services: Services, query: str, variables: dict[str, Any] | None = None) -> Result:
    return execute(services, query, variables)


def ok(services: Services, query: str, variables: dict[str, Any] | None = None) -> Any:
    """Run an operation that must succeed (no errors, no user errors); return its data."""
    result = execute(services, query, variables)
    assert result.problems == [], result.problems
    if query.lstrip().startswith("mutation"):
        payloads = result.data.values()
        assert all("userErrors" in p for p in payloads), f"select userErrors in {query}"
    return result.data


def payload(result: Result, field: str) -> dict[str, Any]:
    """The payload of the mutation `field` in `result`."""
    assert isinstance(result.data, dict) and field in result.data, (result.data, result.errors)
    return result.data[field]  # type: ignore[no-any-return]


def single_user_error(result: Result, code: str) -> dict[str, Any]:
    """The one user error of `result`, of `code`; no GraphQL errors beside it."""
    assert result.errors == [], result.errors
    assert result.user_codes == [code], result.user_errors
    return result.user_errors[0]


def dynamodb_requests(result: Result) -> int:
    return result.extensions["dynamodb"]["requests"]  # type: ignore[no-any-return]


def calls(result: Result) -> list[str]:
    """The DynamoDB operations the request sent, in order."""
    return [call.operation for call in result.context.ledger.calls]


class Tabled(Protocol):
    """What a test's table is reached through: Services, or a client and its settings."""

    dynamo: Dynamo
    settings: Settings


def scan(services: Tabled) -> list[Item]:
    """Every item of the test's table (`store.admin.scan`), sorted by key; not the stream
    reader's lease item, which an app that runs writes on its own."""
    lease = keys.stream_lease().as_item()

    async def scanned() -> list[Item]:
        return [item async for item in admin.scan(services.dynamo, services.settings.table)]

    kept = [
        item
        for item in awaited(scanned())
        if (item["PK"], item["SK"]) != (lease["PK"], lease["SK"])
    ]
    return sorted(kept, key=lambda i: (i["PK"], i["SK"]))


def seed(services: Services, nodes: list[Item], links: list[tuple[Any, Item, Item]]) -> None:
    """Write nodes and their relations directly (map entries, edge items, counts, email
    guards, catalogs' and places' counters), as the mutations would leave them: (relation,
    owner item, target item) each."""
    out = list(nodes)
    for relation, owner, target in links:
        if (edge := relation.attach(owner, target)) is not None:
            out.append(edge)
    out += [email_guard(n) for n in nodes if n["type"] == "student"]
    awaited(admin.batch_write(services.dynamo, services.settings.table, out))
    # The catalogs' and places' counters, added to (seeds and mutations may share a table),
    # and the classes' roster shards: stamped for the classes seeded here, added to for
    # the enrolments seeded here.
    added: Counter[keys.Key] = Counter(items.counters(nodes))
    stamps: dict[keys.Key, dict[str, Any]] = {}
    for shard in items.roster_shards(out):
        key = keys.Key(shard["PK"], shard["SK"])
        roster = keys.roster_counted(key)
        assert roster is not None
        stamps[key] = items.stamped(roster[0], shard)
        added[key] += 0
    for item in out:
        for kind, relation in items.SHARDED.items():
            if item["type"] == relation.name:
                target_id = item[f"{kind.lower()}Id"]
                added[keys.roster_shard(kind, target_id, item["studentId"])] += 1
    for key, n in added.items():
        setting = {"#t": items.TYPE, **{f"#s{i}": f for i, f in enumerate(stamps.get(key, {}))}}
        values = {":t": items.COUNTER_TYPE, ":n": n}
        values.update({f":s{i}": v for i, v in enumerate(stamps.get(key, {}).values())})
        sets = ", ".join(["#t = :t", *(f"#s{i} = :s{i}" for i in range(len(setting) - 1))])
        awaited(
            services.dynamo.call(
                "UpdateItem",
                {
                    "TableName": services.settings.table,
                    "Key": codec.encode(key.as_item()),
                    "UpdateExpression": f"SET {sets} ADD #n :n",
                    "ExpressionAttributeNames": {**setting, "#n": items.COUNT},
                    "ExpressionAttributeValues": codec.encode(values),
                },
                None,
                missing_table=False,
            )
        )


def drop_index(dynamo: Dynamo, table: str, index: str) -> None:
    """The table as if made before `index` was: the index deleted (UpdateTable), and gone
    once this returns (DynamoDB Local takes a moment, and answers 500 in the meantime)."""
    updates = [{"Delete": {"IndexName": index}}]
    asked = {"TableName": table, "GlobalSecondaryIndexUpdates": updates}
    awaited(dynamo.call("UpdateTable", asked, None, missing_table=False))
    for _ in range(200):
        described = awaited(
            dynamo.call("DescribeTable", {"TableName": table}, None, missing_table=False)
        )["Table"]
        if index not in [i["IndexName"] for i in described.get("GlobalSecondaryIndexes", [])]:
            return
        time.sleep(0.05)
    raise AssertionError(f"{index} was never deleted")


def roster_size(items: Sequence[Mapping[str, Any]], node: Mapping[str, Any]) -> int:
    """A class's (sport's) students in a list of items (a seed, the demo): its edges, which
    its roster shards count (its item holds no count)."""
    edge, field = ("enrolment", "classId") if node["type"] == "class" else ("membership", "sportId")
    return sum(1 for i in items if i.get("type") == edge and i.get(field) == node["id"])


def class_count(services: Services, class_id: str, kind: keys.Kind = keys.Kind.CLASS) -> int:
    """A class's (sport's) studentCount as the table holds it, read strongly: its roster
    shards' sum (and the count on its item, a node of the layout before roster shards)."""
    node = get_item(services, *keys.node(kind, class_id)) or {}
    shards = [get_item(services, *key) for key in keys.roster_shards(kind, class_id)]
    return int(node.get("studentCount", 0)) + sum(int(s["count"]) for s in shards if s)


def get_item(services: Services, pk: str, sk: str) -> Item | None:
    response = awaited(
        services.dynamo.call(
            "GetItem",
            {
                "TableName": services.settings.table,
                "Key": codec.encode({"PK": pk, "SK": sk}),
                "ConsistentRead": True,
            },
            None,
            missing_table=False,
        )
    )
    wire = response.get("Item")
    return codec.decode(wire) if wire else None


def of_type(items: list[Item], type_: str, **where: str) -> list[Item]:
    """The items of `type_` whose attributes match `where`."""
    return [
        i for i in items if i.get("type") == type_ and all(i.get(k) == v for k, v in where.items())
    ]


def assert_clean(services: Services) -> None:
    """The integrity checker finds nothing wrong with the table."""
    findings = awaited(check_table(services.dynamo, services.settings.table))
    assert findings == [], "\n".join(f"{f.kind}: {f.message}" for f in findings)


# -- over HTTP ---------------------------------------------------------------------------------

GRJ = {"Accept": "application/graphql-response+json"}


def post(
    client: TestClient,
    query: str,
    variables: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    *,
    status: int | None = None,
) -> Any:
    """POST an operation; the response must be a JSON GraphQL response, never a 5xx nor a
    traceback (with `status`, exactly that status)."""
    response = client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers or {}
    )
    if status is None:
        assert response.status_code < 500, response.text
    else:
        assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    return response.json()


def codes(body: Any) -> list[str]:
    """The codes of a response body's GraphQL errors (`extensions.code`)."""
    return [e["extensions"]["code"] for e in body.get("errors", [])]


# Auth as the tests configure it: an HS256 secret, the issuer and audience tokens must name.
SECRET = "k" * 32  # the shortest secret allowed
ISSUER = "https://issuer.test"
AUDIENCE = "graph-api"
AUTH = {"jwt_secret": SECRET, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}


def claims(**overrides: Any) -> dict[str, Any]:
    """Valid claims, of staff (role admin: may do and read everything, as any valid token
    could before roles); an override of None drops the claim."""
    base: dict[str, Any] = {
        "sub": "user-1",
        "roles": ["admin"],
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": int(time.time()),
        "exp": int(time.time()) + 600,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def hs256(secret: str = SECRET, **overrides: Any) -> str:
    """A token signed with `secret`, of `claims(**overrides)`."""
    return jwt.encode(claims(**overrides), secret, algorithm="HS256")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Hostile:
    client: TestClient
    services: Services
    token: dict[str, str]
    items: list[Item]
    sent: list[str]  # every DynamoDB operation the app called, in order


# -- building the graph through mutations ---------------------------------------------------


def create_student(
    services: Services,
    name: str = "Ada",
    email: str | None = None,
    id: str | None = None,
    home: dict[str, Any] | None = None,
) -> dict[str, Any]:
    input_: dict[str, Any] = {"name": name, "email": email or f"{(id or name).lower()}@ex.org"}
    if id is not None:
        input_["id"] = id
    if home is not None:
        input_["home"] = home
    data = ok(
        services,
        f"""mutation($i: CreateStudentInput!) {{
          createStudent(input: $i) {{ student {{ {STUDENT_FIELDS} }} {USER_ERRORS} }} }}""",
        {"i": input_},
    )
    return data["createStudent"]["student"]  # type: ignore[no-any-return]


def create_teacher(services: Services, id: str, name: str | None = None) -> dict[str, Any]:
    data = ok(
        services,
        f"""mutation($i: CreateTeacherInput!) {{
          createTeacher(input: $i) {{ teacher {{ id name version }} {USER_ERRORS} }} }}""",
        {"i": {"id": id, "name": name or f"Teacher {id}"}},
    )
    return data["createTeacher"]["teacher"]  # type: ignore[no-any-return]


def create_class(
    services: Services, id: str, teacher_id: str, subject: str | None = None
) -> dict[str, Any]:
    data = ok(
        services,
        f"""mutation($i: CreateClassInput!) {{
          createClass(input: $i) {{
            class {{ id subject studentCount version teacher {{ id name }} }} {USER_ERRORS}
          }} }}""",
        {"i": {"id": id, "teacherId": teacher_id, "subject": subject or f"Subject {id}"}},
    )
    return data["createClass"]["class"]  # type: ignore[no-any-return]


def create_sport(
    services: Services, id: str, name: str | None = None, coach: str | None = None
) -> dict[str, Any]:
    data = ok(
        services,
        f"""mutation($i: CreateSportInput!) {{
          createSport(input: $i) {{ sport {{ id name coach studentCount version }} {USER_ERRORS} }}
        }}""",
        {"i": {"id": id, "name": name or f"Sport {id}", "coach": coach}},
    )
    return data["createSport"]["sport"]  # type: ignore[no-any-return]


def edge_mutation(
    services: Services, field: str, target: str, student_id: str, target_id: str
) -> Result:
    """Link or unlink; the payload answers its target (`class` or `sport`) as
    { id studentCount }."""
    node = target.removesuffix("Id")
    query = f"""mutation($s: ID!, $t: ID!) {{
      {field}(studentId: $s, {target}: $t) {{ {node} {{ id studentCount }} {USER_ERRORS} }} }}"""
    return execute(services, query, {"s": student_id, "t": target_id})


def enroll(services: Services, student_id: str, class_id: str) -> Result:
    return edge_mutation(services, "enrollStudent", "classId", student_id, class_id)


def unenroll(services: Services, student_id: str, class_id: str) -> Result:
    return edge_mutation(services, "unenrollStudent", "classId", student_id, class_id)


def join(services: Services, student_id: str, sport_id: str) -> Result:
    return edge_mutation(services, "joinSport", "sportId", student_id, sport_id)


# -- reading it back --------------------------------------------------------------------------


def walk(
    gql: Gql, query: str, path: list[str], first: int | None = None, **variables: Any
) -> list[Any]:
    """Every node of a connection at `path`, following endCursor until hasNextPage is false
    (`first`, when given, is the `$first` of each page; else the query says how many)."""
    nodes: list[Any] = []
    after: str | None = None
    sized = {} if first is None else {"first": first}
    for _ in range(1000):
        result = gql(query, {**variables, **sized, "after": after})
        assert result.errors == []
        connection = result.data
        for name in path:
            connection = connection[name]
        nodes += [edge["node"] for edge in connection["edges"]]
        if not connection["pageInfo"]["hasNextPage"]:
            return nodes
        after = connection["pageInfo"]["endCursor"]
    raise AssertionError("the connection never ended")


def all_pages(services: Services, query: str, path: list[str], **variables: Any) -> list[Any]:
    """`walk` on `services`' table, the page size the query's own."""
    return walk(gql_of(services), query, path, **variables)


def roster(services: Services, field: str, id_: str) -> list[dict[str, Any]]:
    """Every student of a class's or a sport's roster (`field`: "class" or "sport")."""
    return all_pages(
        services,
        f"""query($id: ID!, $after: String) {{ {field}(id: $id) {{
          students(first: 100, after: $after) {{
            edges {{ node {{ id name }} }} pageInfo {{ hasNextPage endCursor }}
          }} }} }}""",
        [field, "students"],
        id=id_,
    )


def class_students(services: Services, class_id: str) -> list[dict[str, Any]]:
    return roster(services, "class", class_id)


def sport_students(services: Services, sport_id: str) -> list[dict[str, Any]]:
    return roster(services, "sport", sport_id)


def first_100(
    services: Services, node: str, id_: str, connection: str, fields: str
) -> list[dict[str, Any]]:
    """The first 100 nodes (their `fields`) of the `connection` of `node` `id_`."""
    data = ok(
        services,
        f"""query($id: ID!) {{ {node}(id: $id) {{ {connection}(first: 100) {{
          edges {{ node {{ {fields} }} }} }} }} }}""",
        {"id": id_},
    )
    return [e["node"] for e in data[node][connection]["edges"]]


def student_classes(services: Services, student_id: str) -> list[dict[str, Any]]:
    return first_100(services, "student", student_id, "classes", "id subject teacher { id name }")


def student_sports(services: Services, student_id: str) -> list[dict[str, Any]]:
    return first_100(services, "student", student_id, "sports", "id name")


def teacher_classes(services: Services, teacher_id: str) -> list[dict[str, Any]]:
    return first_100(services, "teacher", teacher_id, "classes", "id subject teacher { id name }")


# -- many operations at once --------------------------------------------------------------


async def execute_async(
    services: Services, query: str, variables: dict[str, Any] | None = None
) -> Result:
    """`execute` inside a running event loop: its own request context."""
    from graph_api.graph.engine.context import Context
    from graph_api.graph.schema import schema

    context = Context.create(services, f"test-{uuid.uuid4().hex[:8]}")
    result = await schema.execute(query, variable_values=variables, context_value=context)
    errors = [e.formatted for e in result.errors or []]
    return Result(result.data, errors, result.extensions or {}, context)


ENROLL_MIN = f"""mutation($s: ID!, $c: ID!) {{
  enrollStudent(studentId: $s, classId: $c) {{ class {{ id }} {USER_ERRORS} }} }}"""
T = TypeVar("T")


# -- subscribers of the live app -----------------------------------------------------------
#
# Every wait is for a condition, bounded by WAIT seconds for a busy machine; a test that
# fails does so with a message, never by hanging on a receive that nothing answers.

WAIT = 60.0  # seconds: generous, for a busy machine; tests wait on conditions, not on time
WS = ["graphql-transport-ws"]


def until(condition: Callable[[], bool], what: str, wait: float = WAIT) -> None:
    deadline = time.monotonic() + wait
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


@contextlib.contextmanager
def live_app(services: Services) -> Iterator[TestClient]:
    """The app with its lifespan (the event pipeline) running, once its reader reads."""
    from starlette.testclient import TestClient

    from graph_api.http.app import create_app

    with TestClient(create_app(services)) as client:
        events = services.events
        until(lambda: events.reader is not None and events.reader.reading.is_set(), "the reader")
        yield client


@contextlib.contextmanager
def live(
    endpoint: str, seed: Sequence[Item] = (), **settings: Any
) -> Iterator[tuple[TestClient, Services]]:
    """A fresh table holding `seed`, services with `settings`, and the app over them.

    The seed is written before the reader starts, which begins at what is written next: its
    events never reach a subscription. (A write made while the app runs may still be on its
    way when a test subscribes, and then be heard first.)"""
    with fresh_services(endpoint, **settings) as services:
        if seed:
            awaited(admin.batch_write(services.dynamo, services.settings.table, list(seed)))
        with live_app(services) as client:
            yield client, services


def mutate(
    client: TestClient,
    query: str,
    variables: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A mutation that must be written: no errors, no user errors."""
    body = client.post(
        "/graphql", json={"query": query, "variables": variables or {}}, headers=headers
    ).json()
    assert "errors" not in body, body
    for payload in body["data"].values():
        assert not (payload or {}).get("userErrors"), body
    return body["data"]  # type: ignore[no-any-return]


class Closed(Exception):
    """The server closed the websocket."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"closed {code}: {reason}")
        self.code, self.reason = code, reason


async def _receive_within(ws: WebSocketTestSession, seconds: float) -> Any:
    import anyio

    with anyio.fail_after(seconds):
        return await ws._send_rx.receive()


class Subscriber:
    """One graphql-transport-ws connection of the TestClient, and its messages.

    The TestClient buffers what the server sends without bound, so this client never slows
    the server down (tests/events/test_subscription_limits.py has a real slow one)."""

    def __init__(self, ws: WebSocketTestSession, services: Services, payload: Any = None) -> None:
        self.ws, self.services = ws, services
        init: dict[str, Any] = {"type": "connection_init"}
        if payload is not None:
            init["payload"] = payload
        ws.send_json(init)
        assert self.next()["type"] == "connection_ack"

    def send(self, id_: str, query: str, variables: dict[str, Any] | None = None) -> None:
        payload = {"query": query, "variables": variables or {}}
        self.ws.send_json({"id": id_, "type": "subscribe", "payload": payload})

    def subscribe(self, id_: str, query: str) -> None:
        """Subscribe, and wait until the server holds the subscription."""
        hub = self.services.events.hub
        before = hub.size
        self.send(id_, query)
        until(lambda: hub.size > before, f"subscription {id_}")

    def complete(self, id_: str) -> None:
        self.ws.send_json({"id": id_, "type": "complete"})

    def next(self, wait: float = WAIT) -> dict[str, Any]:
        """The next message; `Closed` if the server closed the connection instead."""
        try:
            message = self.ws.portal.call(_receive_within, self.ws, wait)
        except TimeoutError:
            raise AssertionError(f"no message within {wait:g} s") from None
        if message["type"] == "websocket.close":
            raise Closed(message.get("code", 1000), message.get("reason") or "")
        return json.loads(message["text"])  # type: ignore[no-any-return]

    def event(self, id_: str) -> dict[str, Any]:
        """The next message, which must be an event of subscription `id_`: its data."""
        message = self.next()
        assert message.get("id") == id_ and message["type"] == "next", message
        assert "errors" not in message["payload"], message
        return message["payload"]["data"]  # type: ignore[no-any-return]

    def events(self, count: int) -> list[tuple[str, dict[str, Any]]]:
        """The next `count` messages, events each: (subscription id, data)."""
        got = []
        for _ in range(count):
            message = self.next()
            assert message["type"] == "next" and "errors" not in message["payload"], message
            got.append((message["id"], message["payload"]["data"]))
        return got

    def closed(self) -> Closed:
        """Read until the server closes the connection; how it closed it."""
        while True:
            try:
                self.next()
            except Closed as closed:
                return closed


@contextlib.contextmanager
def subscriber(client: TestClient, services: Services, payload: Any = None) -> Iterator[Subscriber]:
    with client.websocket_connect("/graphql", subprotocols=WS) as ws:
        yield Subscriber(ws, services, payload)


def refusal(sub: Subscriber, id_: str) -> tuple[str, dict[str, Any]]:
    """How the server refused operation `id_`: the message type (`error` before execution,
    `next` with errors then `complete` once it started) and the one error."""
    message = sub.next()
    assert message["id"] == id_, message
    if message["type"] == "error":
        (error,) = message["payload"]
    else:
        assert message["type"] == "next" and message["payload"]["data"] is None, message
        (error,) = message["payload"]["errors"]
        assert sub.next() == {"id": id_, "type": "complete"}
    return message["type"], error


# -- plain boto3, as another service writes the table -----------------------------------------


def wire_key(pk: str, sk: str = "A") -> dict[str, Any]:
    """A key as DynamoDB's wire format writes it."""
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def boto_client(endpoint: str | None, *, retries: bool = True) -> Any:
    """A boto3 DynamoDB client of its own: not the API's, which only shares the table.
    `retries` false: one attempt a call (botocore's retries off)."""
    config = None if retries else Config(retries={"total_max_attempts": 1})
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=config,
        **LOCAL_CREDENTIALS,
    )


def school(*links: tuple[items.Relation, Item, Item], nodes: Sequence[Item] = ()) -> list[Item]:
    """Items as the mutations leave them: the nodes of `links` (and `nodes`), their entries,
    counts and edge items, and the students' email guards."""
    out: dict[tuple[str, str], Item] = {}
    edges = []
    for node in nodes:
        out[(node["PK"], node["SK"])] = node
    for relation, owner, target in links:
        out[(owner["PK"], owner["SK"])], out[(target["PK"], target["SK"])] = owner, target
        if (edge := relation.attach(owner, target)) is not None:
            edges.append(edge)
    guards = [items.email_guard(n) for n in out.values() if n["type"] == "student"]
    return [*out.values(), *edges, *guards, *items.roster_shards([*out.values(), *edges])]


# -- writes, as a client makes them ----------------------------------------------------------

# The writers select `id` only: what a subscriber gets is its own selection (AppSync, by
# contrast, sends subscribers what the mutating client selected).
ERRORS = "userErrors { code }"
CREATE_TEACHER = f"""mutation($id: ID!, $name: String!) {{
  createTeacher(input: {{id: $id, name: $name}}) {{ teacher {{ id }} {ERRORS} }} }}"""
RENAME_TEACHER = f"""mutation($id: ID!, $name: String!) {{
  updateTeacher(id: $id, input: {{name: $name}}) {{ teacher {{ id }} {ERRORS} }} }}"""


def teacher(client: TestClient, id_: str, name: str) -> None:
    mutate(client, CREATE_TEACHER, {"id": id_, "name": name})


def ada_maths_sam() -> list[Item]:
    """Teacher t1 teaching c1; student s1 (in no class), with a home in Paris."""
    ada = items.teacher("t1", "Ada")
    maths = items.school_class("c1", "Maths", ada)
    paris = items.Place("France", "IDF", "Paris")
    sam = items.student("s1", "Sam", "s1@example.org", paris)
    return school((TEACHING, ada, maths), nodes=[sam])


# -- node and npm, redis-server -----------------------------------------------------------
#
# CI has node, npm, Debian's chromium and redis-server (.ci/run installs them): there a missing
# tool fails the test. A developer without them gets a skip that says what to install.


def missing(message: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must have it)", pytrace=False)
    pytest.skip(message)


def tool(name: str, install: str) -> str:
    found = shutil.which(name)
    if found is None:
        missing(f"{name} is not installed ({install})")
    return found


def npm_package(folder: Path) -> None:
    """`npm ci` in `folder` when its node_modules is missing or older than its lock."""
    try:
        npm_ci(folder)
    except RuntimeError as error:
        missing(str(error))


def node_script(
    folder: Path, script: str, *arguments: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`node folder/script *arguments` once `folder`'s npm packages are installed: its exit
    code and output (skipped without node or npm, failed on CI)."""
    node = tool("node", "apt-get install nodejs npm")
    npm_package(folder)
    return subprocess.run(
        [node, str(folder / script), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class RedisServer:
    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        log = self.folder / "redis.log"
        # fmt: off
        command = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.folder),
            "--logfile", str(log),
        ]
        # fmt: on
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        client = redis.Redis(
            host="127.0.0.1", port=self.port, socket_timeout=1, socket_connect_timeout=1
        )
        deadline = time.monotonic() + 30
        try:
            while True:
                if self.process.poll() is not None:
                    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                    raise RuntimeError(f"redis-server exited ({self.process.returncode}): {tail}")
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not answer PING on port {self.port}")
                time.sleep(0.02)
        except BaseException:
            self.kill()
            raise
        finally:
            client.close()

    def kill(self) -> None:
        """As a crash: SIGKILL, no goodbye to the clients."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers, as over a dead network."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        self.kill()
        self.start()


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found is None:
        missing("redis-server is not installed (apt-get install redis-server)")
    return found


@contextmanager
def running_redis(folder: Path) -> Iterator[RedisServer]:
    """A Redis of the caller's own, stopped at the end (resumed first if paused)."""
    binary = redis_binary()
    for attempt in range(3):  # another process may take the free port before Redis binds it
        server = RedisServer(binary, folder)
        try:
            server.start()
            break
        except RuntimeError:
            if attempt == 2:
                raise
    try:
        yield server
    finally:
        if server.process is not None and server.process.poll() is None:
            server.resume()
        server.kill()


# -- faults injected into a client's calls, through botocore's events ----------------------------


@dataclasses.dataclass
class Faults:
    """Injects faults into one client's calls; every injection is undone after the test."""

    dynamo: Dynamo
    sent: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    _handlers: list[tuple[str, Callable[..., Any]]] = dataclasses.field(default_factory=list)

    def _register(self, event: str, handler: Callable[..., Any]) -> None:
        self.dynamo.register(event, handler)
        self._handlers.append((event, handler))

    def fail(self, operation: str | None, times: int | None, make: Callable[[], Any]) -> None:
        """The next `times` attempts of `operation` (every operation, if None; every attempt,
        if `times` is None) fail with `make()`."""
        left = [times]

        def handler(request: Any, **_: Any) -> Any:
            self.sent.append(json.loads(request.body or b"{}"))
            if left[0] is not None:
                if left[0] <= 0:
                    return None
                left[0] -= 1
            result = make()
            if isinstance(result, Exception):
                raise result
            return as_sent(result)

        self._register("before-send.dynamodb" + (f".{operation}" if operation else ""), handler)

    def edit(self, operation: str, times: int, change: Callable[[dict[str, Any]], None]) -> None:
        left = [times]

        def handler(parsed: dict[str, Any], **_: Any) -> None:
            if left[0] > 0 and "Error" not in parsed:
                left[0] -= 1
                change(parsed)

        self._register(f"after-call.dynamodb.{operation}", handler)

    def undo(self) -> None:
        for event, handler in self._handlers:
            self.dynamo.unregister(event, handler)
        self._handlers.clear()


# The answers a fault replaces DynamoDB's with: botocore parses them as DynamoDB's own.
AMZ_JSON = "application/x-amz-json-1.0"


class Body:
    """An HTTP body botocore streams, as urllib3 hands it over."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


def error_response(code: str, message: str = "injected", **extra: Any) -> AWSResponse:
    body = json.dumps(
        {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **extra}
    )
    return AWSResponse("http://injected", 400, {"Content-Type": AMZ_JSON}, Body(body.encode()))


def throttle() -> AWSResponse:
    return error_response("ProvisionedThroughputExceededException", "Rate exceeded")


# -- an HTTP server that misbehaves as a test asks --------------------------------------------


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A stdlib HTTP handler that logs nothing (its default writes every request to stderr),
    with `reply` for a whole answer."""

    def reply(self, body: bytes, content_type: str | None = None, status: int = 200) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


Reply = Callable[[socket.socket, bytes], bool]  # answers one request; False: close after


class HTTPServer:
    """A one-thread HTTP server on a free loopback port that records each request (head and
    body, as sent) and answers it with `reply`."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.port = free_port()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.connections = 0
        self.closed = 0
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                while True:
                    request = read_request(conn)
                    if request is None:
                        break
                    self.requests.append(request)
                    if not self.reply(conn, request):
                        break
            self.closed += 1

    def close(self) -> None:
        self.listener.close()


def read_request(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":")[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def queries_answered(metrics_text: str) -> float:
    """What a /metrics page says of the queries answered ok (all workers' sum, where shared)."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == "graph_api_graphql_request_duration_seconds_count"
        and sample.labels == {"operation_type": "query", "outcome": "ok"}
    )


# -- `graph-api serve --workers N` as a subprocess --------------------------------------------

WORKERS_STARTUP_SECONDS = 180  # a busy 2-core machine: a parent and its workers import everything


def wait_until_healthy(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until /healthz answers 200 on `port`; fails with the log's tail if serve exits first."""
    import http.client

    deadline = time.monotonic() + WORKERS_STARTUP_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, f"serve exited early:\n{log.read_text()[-4000:]}"
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            connection.close()
        time.sleep(0.5)
    raise AssertionError(f"serve did not answer in {WORKERS_STARTUP_SECONDS} s:\n{log.read_text()}")


def is_worker(pid: int) -> bool:
    """A uvicorn worker (multiprocessing's spawn), not the embedded DynamoDB or a helper."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"from multiprocessing.spawn import spawn_main; spawn_main(" in b" ".join(cmdline)


def clean_environ(**environ: str) -> dict[str, str]:
    """This process's environment without its AWS_, GRAPH_API_ and WEB_CONCURRENCY settings
    (the developer's shell), with `environ` over it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GRAPH_API_"))}
    env.pop("WEB_CONCURRENCY", None)
    return {**env, **environ}


@contextmanager
def serve_process(
    folder: Path, env: Mapping[str, str], *args: str, log: str = "serve.log"
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`graph-api serve *args` as a subprocess in `folder` (where it writes .data/) with
    `env` as its whole environment, its output in `folder / log`: the process and the log.
    Stopped on leaving with SIGTERM (killed if it has not ended in 120 s), unless ended."""
    output = folder / log
    with output.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "graph_api.cli", "serve", *args],
            cwd=folder,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process, output
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def serving_two_workers(folder: Path, **environ: str) -> Iterator[tuple[int, list[int], Path]]:
    """`graph-api serve --workers 2` on the embedded backend, run in `folder` (its .data/),
    with `environ` over a clean environment: its port, its worker pids and its log."""
    port = free_port()
    env = clean_environ(
        **{"GRAPH_API_DEMO_STUDENTS": "5", "GRAPH_API_LOG_LEVEL": "WARNING", **environ}
    )
    address = ("--host", "127.0.0.1", "--port", str(port))
    with serve_process(folder, env, "--workers", "2", *address) as (process, log):
        wait_until_healthy(port, process, log)
        from graph_api.embedded import descendants

        workers = [pid for pid in descendants(process.pid) if is_worker(pid)]
        assert len(workers) == 2, log.read_text()[-4000:]
        yield port, workers, log
