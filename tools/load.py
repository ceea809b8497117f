"""`make load`: a bounded mixed workload against the API on DynamoDB Local, then a check.

Starts DynamoDB Local and `graph-api serve` on loopback ports, seeds a school, drives it
from concurrent clients for a fixed time (80 % nested reads, 20 % mutations, with enrol /
unenrol races on a few hot classes), stops, runs `graph-api check` and prints requests,
errors by code, latency percentiles and the check's verdict. Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx

from graph_api.check import check_table
from graph_api.settings import Settings
from graph_api.store import table
from graph_api.store.client import Dynamo
from tools import dynamodb_local

STUDENTS = 500
HOT_CLASSES = [f"cls-{i:03d}" for i in range(1, 6)]

READS = [
    """query($ids: [ID!]!) { students(ids: $ids) { name home { city }
         classes { edges { node { subject studentCount teacher { name } } } }
         sports { edges { node { name } } } } }""",
    """query($c: ID!) { class(id: $c) { subject studentCount teacher { name }
         students(first: 30) { edges { node { name email } } pageInfo { hasNextPage } } } }""",
    """{ teachers(first: 10) {
         edges { node { name classes { edges { node { subject } } } } } } }""",
    """{ studentsByLocation(country: "Canada", first: 25) {
         edges { node { name sports { edges { node { name } } } } } } }""",
]
WRITES = {
    "enrol": """mutation($s: ID!, $c: ID!) {
        enrollStudent(studentId: $s, classId: $c) { class { studentCount } userErrors { code } }
    }""",
    "unenrol": """mutation($s: ID!, $c: ID!) {
        unenrollStudent(studentId: $s, classId: $c) { class { studentCount } userErrors { code } }
    }""",
    "join": """mutation($s: ID!) {
        joinSport(studentId: $s, sportId: "spt-03") { sport { studentCount } userErrors { code } }
    }""",
    "leave": """mutation($s: ID!) {
        leaveSport(studentId: $s, sportId: "spt-03") { sport { studentCount } userErrors { code } }
    }""",
    "rename": """mutation($s: ID!, $n: String!) {
        updateStudent(id: $s, input: {name: $n}) { student { version } userErrors { code } } }""",
}


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)


def student() -> str:
    return f"stu-{random.randint(1, STUDENTS):04d}"


def pick() -> tuple[str, str, dict[str, Any]]:
    if random.random() < 0.8:
        query = random.choice(READS)
        variables = {"ids": [student() for _ in range(10)], "c": random.choice(HOT_CLASSES)}
        return "read", query, {k: v for k, v in variables.items() if f"${k}" in query}
    kind = random.choices(list(WRITES), weights=[4, 4, 1, 1, 1])[0]
    variables = {
        "s": student(),
        "c": random.choice(HOT_CLASSES),
        "n": f"Renamed {random.randint(1, 99)}",
    }
    query = WRITES[kind]
    return kind, query, {k: v for k, v in variables.items() if f"${k}" in query}


async def client(http: httpx.AsyncClient, until: float, stats: Stats) -> None:
    while time.monotonic() < until:
        kind, query, variables = pick()
        started = time.perf_counter()
        response = await http.post("/graphql", json={"query": query, "variables": variables})
        stats.latencies.append((time.perf_counter() - started) * 1000)
        stats.statuses[response.status_code] += 1
        stats.kinds[kind] += 1
        body = response.json()
        for error in body.get("errors") or []:
            stats.codes[(error.get("extensions") or {}).get("code", "NO_CODE")] += 1
        # A mutation's client errors (enrolled already, ...) are user errors in its payload.
        payloads = (body.get("data") or {}).values()
        for payload in (p for p in payloads if isinstance(p, dict)):
            for user_error in payload.get("userErrors") or []:
                stats.codes[user_error["code"]] += 1


async def drive(url: str, seconds: float, clients: int) -> Stats:
    stats = Stats()
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        until = time.monotonic() + seconds
        await asyncio.gather(*(client(http, until, stats) for _ in range(clients)))
    return stats


def wait_for(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the API exited before it answered")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the API did not answer on {url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()

    ddb = dynamodb_local.start()
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL_DYNAMODB": ddb.endpoint,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_REGION": "us-east-1",
        "GRAPH_API_TABLE": "load",
        "GRAPH_API_CURSOR_SECRET": "load-test",
        "GRAPH_API_LOG_LEVEL": "WARNING",
        # The seeded school is generated: its emails may be read without a token.
        "GRAPH_API_PUBLIC_PERSONAL_DATA": "true",
    }
    os.environ.update(env)  # this process's client (seed, check) talks to the same table
    settings = Settings.from_env()
    dynamo = Dynamo(settings)
    server = None
    try:
        table.create(dynamo, settings.table)
        subprocess.run(
            [sys.executable, "-m", "graph_api.cli", "seed", "--students", str(STUDENTS)],
            env=env,
            check=True,
            stderr=subprocess.DEVNULL,
        )
        port = dynamodb_local.free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "graph_api.cli", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        wait_for(url, server)
        print(f"driving {url} for {args.seconds:.0f} s from {args.clients} clients ...", flush=True)
        stats = asyncio.run(drive(url, args.seconds, args.clients))
        server.terminate()
        server.wait(timeout=30)
        findings = check_table(dynamo, settings.table)
    finally:
        if server is not None and server.poll() is None:
            server.kill()
        dynamo.close()
        ddb.stop()

    total = len(stats.latencies)
    cuts = statistics.quantiles(stats.latencies, n=100)
    five_xx = sum(n for status, n in stats.statuses.items() if status >= 500)
    print("\n| requests | per second | 5xx | p50 ms | p95 ms | p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {total} | {total / args.seconds:.0f} | {five_xx} | {cuts[49]:.1f} "
        f"| {cuts[94]:.1f} | {cuts[98]:.1f} |"
    )
    print(f"\noperations: {dict(stats.kinds)}")
    print(f"HTTP statuses: {dict(stats.statuses)}")
    print(f"errors by code: {dict(stats.codes) or 'none'}")
    print(f"graph-api check: {'clean' if not findings else f'{len(findings)} finding(s)'}")
    for finding in findings[:20]:
        print(f"  {finding}")
    healthy = not findings and not five_xx and not stats.codes.get("INTERNAL_SERVER_ERROR")
    sys.exit(0 if healthy else 1)


if __name__ == "__main__":
    main()
