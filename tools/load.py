"""`make load`: a bounded mixed workload against the API on DynamoDB Local, then a check.

Starts DynamoDB Local and `graph-api serve` on loopback ports, seeds a school, drives it
from concurrent clients for a fixed time (80 % nested reads, 20 % mutations, with enrol /
unenrol races on a few hot classes), then renames a teacher again and again while clients
keep enrolling and unenrolling students in its classes ("renames under churn"), stops, runs
`graph-api check` and prints requests, errors by code, latency percentiles, the renames'
outcomes and the check's verdict. Traffic stays on 127.0.0.1.
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

from graph_api.ops.check import check_table
from graph_api.settings import Settings
from graph_api.store import admin
from graph_api.store.client import Dynamo
from tools import dynamodb_local
from tools.processes import free_port

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


# -- renames under churn: a teacher with 3 classes of 40 students (123 copies: chunked) ------

CHURN_TEACHER = "tch-churn"
CHURN_CLASSES = [f"cls-churn-{n}" for n in range(3)]
CHURN_POOL = [f"stu-{i:04d}" for i in range(301, STUDENTS + 1)]  # enrolled and unenrolled
SETUP = {
    "teacher": """mutation { createTeacher(input: {id: "tch-churn", name: "Churn 0"}) {
        teacher { id } userErrors { code message } } }""",
    "class": """mutation($c: ID!) { createClass(input: {id: $c, subject: "Churn",
        teacherId: "tch-churn"}) { class { id } userErrors { code message } } }""",
}
RENAME_TEACHER = """mutation($n: String!) { updateTeacher(id: "tch-churn", input: {name: $n}) {
    teacher { name } userErrors { code message } } }"""


@dataclass
class Renames:
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    churn: Counter[str] = field(default_factory=Counter)


def problems(body: dict[str, Any]) -> list[str]:
    """GraphQL errors and user errors of a response, as `CODE: message`."""
    found = [
        f"{(e.get('extensions') or {}).get('code')}: {e.get('message')}"
        for e in body.get("errors") or []
    ]
    for payload in (body.get("data") or {}).values():
        if isinstance(payload, dict):
            errors = payload.get("userErrors") or []
            found += [f"{u['code']}: {u.get('message', '')}" for u in errors]
    return found


async def set_up_churn(http: httpx.AsyncClient) -> None:
    async def ok(query: str, variables: dict[str, Any] | None = None) -> None:
        body = (await http.post("/graphql", json={"query": query, "variables": variables})).json()
        if found := problems(body):
            raise SystemExit(f"setting up the churn phase failed: {found}")

    await ok(SETUP["teacher"])
    for class_id in CHURN_CLASSES:
        await ok(SETUP["class"], {"c": class_id})
    enrolments = [
        (f"stu-{i:04d}", CHURN_CLASSES[i % 3]) for i in range(1, 3 * 40 + 1)
    ]  # stu-0001..0120, 40 a class; the pool (stu-0301..) churns
    for start in range(0, len(enrolments), 20):
        await asyncio.gather(
            *(ok(WRITES["enrol"], {"s": s, "c": c}) for s, c in enrolments[start : start + 20])
        )


async def churner(http: httpx.AsyncClient, done: asyncio.Event, renames: Renames) -> None:
    while not done.is_set():
        kind = random.choice(["enrol", "unenrol"])
        variables = {"s": random.choice(CHURN_POOL), "c": random.choice(CHURN_CLASSES)}
        body = (
            await http.post("/graphql", json={"query": WRITES[kind], "variables": variables})
        ).json()
        renames.churn[
            f"{kind} {'ok' if not problems(body) else problems(body)[0].split(':')[0]}"
        ] += 1


async def renamer(http: httpx.AsyncClient, count: int, renames: Renames) -> None:
    for n in range(1, count + 1):
        started = time.perf_counter()
        response = await http.post(
            "/graphql", json={"query": RENAME_TEACHER, "variables": {"n": f"Churn {n}"}}
        )
        renames.latencies.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200 or (found := problems(response.json())):
            renames.failures.append(f"rename {n}: HTTP {response.status_code} {found}")


async def churn_phase(url: str, renames_wanted: int, churners: int) -> Renames:
    renames = Renames()
    limits = httpx.Limits(max_connections=churners + 1)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        await set_up_churn(http)
        done = asyncio.Event()
        churn = [asyncio.create_task(churner(http, done, renames)) for _ in range(churners)]
        await asyncio.sleep(1)  # the churn is under way before the first rename
        await renamer(http, renames_wanted, renames)
        done.set()
        await asyncio.gather(*churn)
    return renames


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
    parser.add_argument("--renames", type=int, default=5, help="renames under churn")
    parser.add_argument("--churners", type=int, default=6, help="clients churning its classes")
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
        asyncio.run(admin.create(dynamo, settings.table))
        subprocess.run(
            [sys.executable, "-m", "graph_api.cli", "seed", "--students", str(STUDENTS)],
            env=env,
            check=True,
            stderr=subprocess.DEVNULL,
        )
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "graph_api.cli", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        wait_for(url, server)
        print(f"driving {url} for {args.seconds:.0f} s from {args.clients} clients ...", flush=True)
        stats = asyncio.run(drive(url, args.seconds, args.clients))
        print(
            f"renaming a teacher {args.renames} times while {args.churners} clients churn"
            " its 3 classes of 40 ...",
            flush=True,
        )
        renames = asyncio.run(churn_phase(url, args.renames, args.churners))
        server.terminate()
        server.wait(timeout=30)
        findings = asyncio.run(check_table(dynamo, settings.table))
    finally:
        if server is not None and server.poll() is None:
            server.kill()
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
    done = len(renames.latencies) - len(renames.failures)
    print(
        f"\nrenames under churn: {done} of {len(renames.latencies)} finished, p50"
        f" {statistics.median(renames.latencies):.0f} ms, max {max(renames.latencies):.0f} ms;"
        f" churn: {dict(renames.churn)}"
    )
    for failure in renames.failures:
        print(f"  {failure}")
    print(f"graph-api check: {'clean' if not findings else f'{len(findings)} finding(s)'}")
    for finding in findings[:20]:
        print(f"  {finding}")
    healthy = (
        not findings
        and not five_xx
        and not stats.codes.get("INTERNAL_SERVER_ERROR")
        and not renames.failures
    )
    sys.exit(0 if healthy else 1)


if __name__ == "__main__":
    main()
