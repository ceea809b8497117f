"""`make bench-embedded`: the embedded backend as `make run` serves it, measured.

For the demo school (500 students) and one ten times larger, served as `graph-api serve`
serves it (the API in this process, the embedded DynamoDB in a child process): the README's
kinds of mutation, a teacher rename that reaches 100 classes, `studentsByLocation(first:
25)` with classes, how long reads take while a rename writes (through the API, and straight
to the embedded DynamoDB), then mixed traffic (tools/load.py's mix) and the embedded
DynamoDB's resident memory each minute. Prints Markdown tables; traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import http.client
import json
import multiprocessing
import os
import statistics
import threading
import time
from typing import Any

from bench.naive import MUTATIONS, measure, measure_writes, post, serve
from graph_api import cli
from graph_api.embedded import rss_kb
from graph_api.graph.engine.context import Services
from graph_api.http.hosting import tune_collector
from graph_api.settings import Settings
from graph_api.store.client import Dynamo
from tools import load

BY_LOCATION = """{ studentsByLocation(country: "Canada", first: 25) {
    edges { node { name classes { edges { node { subject teacher { name } } } } } } } }"""
READ = "query($id: ID!) { student(id: $id) { name home { city } } }"
RENAME = """mutation($id: ID!, $n: String!) { updateTeacher(id: $id, input: {name: $n}) {
    teacher { name classes(first: 1) { edges { node { teacher { name } } } } }
    userErrors { code message } } }"""
WIDE_TEACHER = "tch-wide"
WIDE_CLASSES = 100


@dataclasses.dataclass
class Figures:
    students: int
    seed_seconds: float
    writes: dict[str, dict[str, float]]
    by_location: dict[str, float]
    rename: dict[str, float]
    reads_during_rename: dict[str, float]
    db_reads_during_rename: dict[str, float]
    soak: dict[str, Any]


def rss_mb() -> float:
    return rss_kb(os.getpid()) / 1024


def ok(conn: http.client.HTTPConnection, query: str, **variables: Any) -> dict[str, Any]:
    return post(conn, query, variables)["data"]  # type: ignore[no-any-return]


def wide_teacher(port: int) -> None:
    """A teacher of 100 classes with two students each: a rename writes 300 copies."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    ok(
        conn,
        """mutation($t: ID!) { createTeacher(input: {id: $t, name: "Wide"}) {
           teacher { id } userErrors { code message } } }""",
        t=WIDE_TEACHER,
    )
    for n in range(WIDE_CLASSES):
        ok(
            conn,
            """mutation($c: ID!, $t: ID!) { createClass(input: {id: $c, teacherId: $t,
               subject: "Wide"}) { class { id } userErrors { code message } } }""",
            c=f"cls-wide-{n:03d}",
            t=WIDE_TEACHER,
        )
        for s in (2 * n + 1, 2 * n + 2):
            ok(
                conn,
                """mutation($s: ID!, $c: ID!) { enrollStudent(studentId: $s, classId: $c)
                   { class { studentCount } userErrors { code message } } }""",
                s=f"stu-{s:04d}",
                c=f"cls-wide-{n:03d}",
            )
    conn.close()


def _read_through_api(port: int, stop: Any, out: Any) -> None:
    """A reader process: a student by id through the API, again and again until `stop`."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    waits, n = [], 0
    while not stop.is_set():
        n += 1
        started = time.monotonic()
        ok(conn, READ, id=f"stu-{n % 400 + 1:04d}")
        waits.append((started, (time.monotonic() - started) * 1000))
    conn.close()
    out.put(waits)


def _read_dynamodb(settings: Settings, stop: Any, out: Any) -> None:
    """A reader process: a class roster Query straight to the embedded DynamoDB."""
    client = Dynamo(settings).client
    waits, n = [], 0
    while not stop.is_set():
        n += 1
        started = time.monotonic()
        client.query(
            TableName=settings.table,
            IndexName="GSI1",
            KeyConditionExpression="GSI1PK = :c",
            ExpressionAttributeValues={":c": {"S": f"CLASS#cls-wide-{n % WIDE_CLASSES:03d}"}},
        )
        waits.append((started, (time.monotonic() - started) * 1000))
    client.close()
    out.put(waits)


def renames_with_readers(
    port: int, settings: Settings, runs: int
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Rename the wide teacher `runs` times while two readers keep reading: one through the
    API (a student by id), one straight to the embedded DynamoDB (a class roster Query).

    Each reader is a process of its own, as a user's client is: a reader thread here would
    share the API's interpreter lock and measure this bench's own contention."""
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    api_out: Any = spawn.Queue()
    db_out: Any = spawn.Queue()
    readers = [
        spawn.Process(target=_read_through_api, args=(port, stop, api_out), daemon=True),
        spawn.Process(target=_read_dynamodb, args=(settings, stop, db_out), daemon=True),
    ]
    for reader in readers:
        reader.start()
    conn = http.client.HTTPConnection("127.0.0.1", port)
    ok(conn, READ, id="stu-0001")
    time.sleep(2)  # the readers' interpreters are up and reading before the first rename
    times = []
    began = time.monotonic()
    for n in range(runs):
        started = time.perf_counter()
        data = ok(conn, RENAME, id=WIDE_TEACHER, n=f"Wide {n}")
        times.append((time.perf_counter() - started) * 1000)
        assert data["updateTeacher"]["teacher"]["name"] == f"Wide {n}"
    ended = time.monotonic()
    stop.set()
    api_reads, db_reads = api_out.get(), db_out.get()
    for reader in readers:
        reader.join()
    conn.close()

    def summary(reads: list[tuple[float, float]]) -> dict[str, float]:
        waits = [wait for started, wait in reads if began <= started < ended]
        return {"count": len(waits), "p50": statistics.median(waits), "max": max(waits)}

    rename = {"p50": statistics.median(times), "max": max(times)}
    return rename, summary(api_reads), summary(db_reads)


def measure_size(students: int, runs: int, soak: float, clients: int) -> Figures:
    settings = dataclasses.replace(
        Settings(),
        demo_students=students,
        log_level="WARNING",
        cursor_secret=b"bench",
        # Its clients write without a token and read emails: the demo before dev tokens.
        public_personal_data=True,
        open_writes=True,
    )
    started = time.perf_counter()
    settings, server = cli.start_embedded(settings)  # what `make run` does
    seeded = time.perf_counter() - started
    services = Services.create(settings)
    tune_collector()  # as `graph-api serve` does: no full collection over the startup objects
    api, port = serve(services)
    try:
        writes = measure_writes(port, runs)
        by_location = measure(port, BY_LOCATION, {}, runs)
        wide_teacher(port)
        rename, reads, db_reads = renames_with_readers(port, settings, max(3, runs // 5))
        soaked: dict[str, Any] = {
            "seconds": soak,
            "rss_before": rss_mb(),
            "db_before": server.rss_kb() / 1024,
        }
        if soak:
            samples: list[float] = []  # the server's RSS every minute: a plateau, or a leak
            done = threading.Event()

            def sample() -> None:
                while not done.wait(60):
                    samples.append(server.rss_kb() / 1024)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            stats = asyncio.run(load.drive(f"http://127.0.0.1:{port}", soak, clients))
            done.set()
            sampler.join()
            soaked["db_each_minute"] = samples
            soaked.update(
                requests=len(stats.latencies),
                errors=sum(stats.statuses[s] for s in stats.statuses if s >= 500),
                internal=stats.codes.get("INTERNAL_SERVER_ERROR", 0),
            )
        soaked.update(rss_after=rss_mb(), db_after=server.rss_kb() / 1024)
    finally:
        api.stop()
        asyncio.run(
            services.dynamo.call(
                "DeleteTable", {"TableName": settings.table}, None, missing_table=False
            )
        )
        services.close()
        server.stop()
    return Figures(students, seeded, writes, by_location, rename, reads, db_reads, soaked)


def report(all_figures: list[Figures]) -> None:
    sizes = " | ".join(f"{f.students} students" for f in all_figures)
    line = "|---|" + "---:|" * len(all_figures)
    print(f"\n| embedded backend, p50 ms | {sizes} |\n{line}")

    def row(label: str, values: list[float], unit: str = "") -> None:
        print(f"| {label} | " + " | ".join(f"{v:.1f}{unit}" for v in values) + " |")

    row("seed the demo (s)", [f.seed_seconds for f in all_figures])
    for name in MUTATIONS:
        row(name, [f.writes[name]["p50"] for f in all_figures])
    row(f"rename a teacher of {WIDE_CLASSES} classes", [f.rename["p50"] for f in all_figures])
    row("  slowest rename", [f.rename["max"] for f in all_figures])
    row("studentsByLocation(first: 25) + classes", [f.by_location["p50"] for f in all_figures])
    row("API reads during renames, p50", [f.reads_during_rename["p50"] for f in all_figures])
    row("API reads during renames, slowest", [f.reads_during_rename["max"] for f in all_figures])
    row(
        "DynamoDB Query during renames, p50", [f.db_reads_during_rename["p50"] for f in all_figures]
    )
    row(
        "DynamoDB Query during renames, slowest",
        [f.db_reads_during_rename["max"] for f in all_figures],
    )
    for f in all_figures:
        s = f.soak
        print(
            f"\n{f.students} students: RSS of the embedded DynamoDB {s['db_before']:.0f} MB"
            f" before, {s['db_after']:.0f} MB after {s['seconds']:.0f} s of mixed traffic"
            f" (the API and this bench's clients: {s['rss_before']:.0f}, then"
            f" {s['rss_after']:.0f} MB) "
            f"({s.get('requests', 0)} requests, {s.get('errors', 0)} 5xx, "
            f"{s.get('internal', 0)} INTERNAL_SERVER_ERROR)"
        )
        if s.get("db_each_minute"):
            minutes = ", ".join(f"{mb:.0f}" for mb in s["db_each_minute"])
            print(f"embedded DynamoDB RSS each minute (MB): {minutes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument(
        "--soak", type=float, default=120, help="seconds of mixed traffic before reading RSS"
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    figures = []
    for students in args.students:
        print(f"measuring {students} students ...", flush=True)
        figures.append(measure_size(students, args.runs, args.soak, args.clients))
    report(figures)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump([dataclasses.asdict(f) for f in figures], out, indent=2)


if __name__ == "__main__":
    main()
