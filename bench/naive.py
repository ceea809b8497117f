"""`make bench-naive`: DynamoDB requests and HTTP latency per query, batched beside naive.

Seeds a fresh table (on the endpoint in AWS_ENDPOINT_URL_DYNAMODB if set; else on a
DynamoDB Local it starts, or with `--backend moto` an embedded moto), serves the API twice
on loopback ports, once with the loaders and once in naive mode (one GetItem/Query per
parent, no batching, no cache), and prints Markdown tables, a write mix included. moto's
Query time grows with the table's size, so latency figures come from DynamoDB Local.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import http.client
import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import uvicorn

from graph_api.embedded import EmbeddedDynamoDB
from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.ops import demo
from graph_api.settings import Settings
from graph_api.store import admin
from tools import dynamodb_local
from tools.processes import free_port

QUERIES: dict[str, tuple[str, dict[str, Any]]] = {
    "student by id": (
        "query($id: ID!) { student(id: $id) { name email home { city } } }",
        {"id": "stu-0042"},
    ),
    "50 students, classes, sports": (
        """query($ids: [ID!]!) { students(ids: $ids) { name
             classes { edges { node { subject studentCount teacher { name } } } }
             sports { edges { node { name } } } } }""",
        {"ids": [f"stu-{i:04d}" for i in range(1, 51)]},
    ),
    "class roster (50)": (
        """query($id: ID!) { class(id: $id) { subject teacher { name }
             students(first: 50) { edges { node { name email } } } } }""",
        {"id": "cls-007"},
    ),
    "teachers and their classes": (
        """{ teachers(first: 25) { edges { node { name
             classes { edges { node { subject studentCount } } } } } } }""",
        {},
    ),
    "students in a state + classes": (
        """{ studentsByLocation(country: "United States", state: "California", first: 50) {
             edges { node { name classes(first: 3) { edges { node { subject } } } } } } }""",
        {},
    ),
}


# A write mix: each mutation runs once per round, on a student of that round.
MUTATIONS: dict[str, str] = {
    "createStudent": """mutation($i: ID!, $e: String!) {
        createStudent(input: {id: $i, name: "Bench",
        email: $e, home: {country: "Canada", state: "Ontario", city: "Toronto"}})
        { student { id } userErrors { code message } } }""",
    "updateStudent (rename)": """mutation($i: ID!) { updateStudent(id: $i,
        input: {name: "Bench Renamed"}) { student { version } userErrors { code message } } }""",
    "enrollStudent": """mutation($i: ID!) { enrollStudent(studentId: $i, classId: "cls-003")
        { class { studentCount } userErrors { code message } } }""",
    "joinSport": """mutation($i: ID!) { joinSport(studentId: $i, sportId: "spt-02")
        { sport { studentCount } userErrors { code message } } }""",
    "setHome": """mutation($i: ID!) { setHome(studentId: $i,
        home: {country: "Germany", state: "Berlin", city: "Berlin"})
        { student { version } userErrors { code message } } }""",
    "unenrollStudent": """mutation($i: ID!) { unenrollStudent(studentId: $i, classId: "cls-003")
        { class { studentCount } userErrors { code message } } }""",
    "leaveSport": """mutation($i: ID!) { leaveSport(studentId: $i, sportId: "spt-02")
        { sport { studentCount } userErrors { code message } } }""",
    "deleteStudent": """mutation($i: ID!) { deleteStudent(id: $i)
        { deletedId userErrors { code message } } }""",
}


class ThreadedServer(uvicorn.Server):
    """uvicorn on a thread of this process; `stop` waits for its lifespan's shutdown."""

    thread: threading.Thread

    def stop(self, timeout: float = 15.0) -> None:
        """Stop serving and wait: the app's shutdown (the stream reader giving its lease
        back) runs on the services' DynamoDB client, so close the services after this."""
        self.should_exit = True
        self.thread.join(timeout)


def serve(services: Services) -> tuple[ThreadedServer, int]:
    port = free_port()
    config = uvicorn.Config(create_app(services), host="127.0.0.1", port=port, log_level="error")
    server = ThreadedServer(config)
    server.thread = threading.Thread(target=server.run, daemon=True)
    server.thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, port


def post(conn: http.client.HTTPConnection, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables})
    conn.request("POST", "/graphql", body, {"Content-Type": "application/json"})
    response = json.loads(conn.getresponse().read())
    user_errors = [
        e
        for p in (response.get("data") or {}).values()
        if isinstance(p, dict)
        for e in p.get("userErrors") or ()
    ]
    if response.get("errors") or user_errors:
        raise SystemExit(f"query failed: {response.get('errors') or user_errors}")
    return response  # type: ignore[no-any-return]


def measure(port: int, query: str, variables: dict[str, Any], runs: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(2):  # warm the parser/validation caches and connections
        post(conn, query, variables)
    latencies, requests = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        response = post(conn, query, variables)
        latencies.append((time.perf_counter() - started) * 1000)
        requests = response["extensions"]["dynamodb"]["requests"]
    conn.close()
    cuts = statistics.quantiles(latencies, n=20)
    return {"requests": requests, "p50": statistics.median(latencies), "p95": cuts[18]}


def measure_writes(port: int, runs: int) -> dict[str, dict[str, float]]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    samples: dict[str, list[tuple[float, int]]] = {name: [] for name in MUTATIONS}
    for n in range(runs):
        variables = {
            "i": f"bench-{uuid.uuid4().hex[:12]}",
            "e": f"bench{n}-{uuid.uuid4().hex[:8]}@x.org",
        }
        for name, mutation in MUTATIONS.items():
            started = time.perf_counter()
            response = post(conn, mutation, variables)
            elapsed = (time.perf_counter() - started) * 1000
            samples[name].append((elapsed, response["extensions"]["dynamodb"]["requests"]))
    conn.close()
    return {
        name: {
            "requests": statistics.median(r for _, r in rows),
            "p50": statistics.median(t for t, _ in rows),
            "p95": statistics.quantiles([t for t, _ in rows], n=20)[18],
        }
        for name, rows in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--backend", choices=("dynamodb-local", "moto"), default="dynamodb-local")
    args = parser.parse_args()

    stop: Callable[[], None] = lambda: None  # noqa: E731
    settings = Settings.from_env()
    # The demo school is generated: its emails and streets may be read without a token.
    settings = dataclasses.replace(
        settings, table=f"bench-{uuid.uuid4().hex[:8]}", public_personal_data=True
    )
    backend = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB", "")
    if not backend:
        # A backend of our own, reached with throwaway credentials (Settings.endpoint_url).
        if args.backend == "moto":
            embedded = EmbeddedDynamoDB()
            endpoint, stop, backend = embedded.start(), embedded.stop, "moto (embedded)"
        else:
            local = dynamodb_local.start()
            endpoint, stop, backend = local.endpoint, local.stop, "DynamoDB Local"
        settings = dataclasses.replace(settings, backend="remote", endpoint_url=endpoint)

    batched = Services.create(settings)
    naive = Services.create(dataclasses.replace(settings, naive=True))
    asyncio.run(admin.create(batched.dynamo, settings.table))
    asyncio.run(
        admin.batch_write(
            batched.dynamo, settings.table, demo.generate(students=args.students, seed=7)
        )
    )
    servers = [serve(batched), serve(naive)]
    try:
        print(f"\nbackend: {backend}; {args.students} students; {args.runs} runs per query\n")
        print(
            "| query | requests | p50 ms | p95 ms | naive requests | naive p50 ms | naive p95 ms |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, (query, variables) in QUERIES.items():
            b = measure(servers[0][1], query, variables, args.runs)
            n = measure(servers[1][1], query, variables, args.runs)
            print(
                f"| {name} | {b['requests']} | {b['p50']:.1f} | {b['p95']:.1f} "
                f"| {n['requests']} | {n['p50']:.1f} | {n['p95']:.1f} |",
                flush=True,
            )
        print("\n| mutation | requests | p50 ms | p95 ms |")
        print("|---|---:|---:|---:|")
        for name, row in measure_writes(servers[0][1], args.runs).items():
            print(f"| {name} | {row['requests']:g} | {row['p50']:.1f} | {row['p95']:.1f} |")
    finally:
        for server, _ in servers:
            server.stop()
        asyncio.run(
            batched.dynamo.call(
                "DeleteTable", {"TableName": settings.table}, None, missing_table=False
            )
        )
        batched.close()
        naive.close()
        stop()


if __name__ == "__main__":
    main()
