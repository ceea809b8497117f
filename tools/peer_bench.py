"""`make bench`: our API beside the PostGraphile peer, in one run, on the same school.

The peer (`../shared/peers/postgraphile`, see tools/peer.py) runs from a copy in
`.cache/peer/`: a throwaway PostgreSQL cluster loaded with its seed-11 dataset, PostGraphile
on a loopback port. We seed the same dataset into a fresh table of DynamoDB Local through our
own GraphQL mutations (so the seeding follows whatever item layout the writes produce), serve
the API on another loopback port, check both sides' answers against the dataset, then time
the five logical queries on both, interleaved in blocks, one keep-alive connection per side,
the same number of timed requests each, sent from a process of their own
(tools/timed_client.py says why). Then the floors: one more interleaved run of each query
on both sides beside its DynamoDB calls, recorded as our API sent them and sent again
straight to DynamoDB Local from the client process, with no API between, and `{ __typename }`
on both sides: of each query's us/peer, the part the backend alone takes. Then Q1's
throughput: 16 concurrent keep-alive clients for 10 s a side, the API served by `graph-api
serve --workers N` (one per core by default) on the same table, with the CPU its processes
spent per request (from /proc). Then live events, ours alone (tools/live_bench.py):
write-to-event latency with 1,000 subscriptions on the in-process API, and the stream
reader's requests with 1 subscription and with 1,000. Prints Markdown tables and writes
`test-output/bench-peer-<time>.json`.
Without postgres or npm, says why and prints our side.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any
from urllib.parse import urlsplit

from graph_api.graph.context import Services
from graph_api.http.hosting import tune_collector
from graph_api.settings import Settings
from graph_api.store import admin
from graph_api.store.embedded import cpu_seconds, descendants
from tools import api_server, dynamodb_local, live_bench, peer, peer_queries
from tools.bench import serve

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "test-output"
HOME_FIELDS = ("country", "state", "city", "street")
ALIASES = 20  # mutations per seeding request (the API allows 30 aliases)


# -- DynamoDB calls of one GraphQL request, timed at the boto3 client ---------------------


class CallClock:
    """Every DynamoDB call the API's boto3 client makes, with its operation and interval.

    Registered on botocore's events (public API, whatever the API's own code looks like):
    a call starts before its parameters are serialized and ends when its response is parsed.
    The bench sends one GraphQL request at a time, so the calls between two `take()`s are
    that request's.
    """

    def __init__(self, client: Any) -> None:
        self._calls: list[tuple[str, float, float]] = []
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._start)
        events.register("after-call.dynamodb", self._end)

    @staticmethod
    def _start(context: dict[str, Any], **_: Any) -> None:
        context["bench_started"] = time.perf_counter()

    def _end(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        started = context.get("bench_started")
        if started is not None:
            self._calls.append((model.name, started, time.perf_counter()))  # atomic append

    def take(self) -> list[tuple[str, float, float]]:
        calls, self._calls = self._calls, []
        return calls


Call = tuple[str, float, float]  # operation, started, ended (perf_counter seconds)


def group(calls: list[Call]) -> list[list[Call]]:
    """The calls in waves: calls that overlap in time (directly or through another) are one."""
    out: list[list[Call]] = []
    end = 0.0
    for call in sorted(calls, key=lambda c: c[1]):
        if out and call[1] <= end:
            out[-1].append(call)
            end = max(end, call[2])
        else:
            out.append([call])
            end = call[2]
    return out


def waves(calls: list[Call]) -> tuple[int, float, float]:
    """(waves, wall ms, serial ms): wall is the sum of the waves' spans (time with at least
    one call in flight), serial the sum of the calls' own times."""
    grouped = group(calls)
    wall = sum(max(c[2] for c in w) - min(c[1] for c in w) for w in grouped)
    serial = sum(c[2] - c[1] for c in calls)
    return len(grouped), wall * 1000, serial * 1000


def shape(calls: list[Call]) -> str:
    """The waves' operations in order, e.g. `1 BatchGetItem → 30 Query`."""
    return " \u2192 ".join(
        " + ".join(f"{n} {op}" for op, n in sorted(Counter(c[0] for c in w).items()))
        for w in group(calls)
    )


# -- seeding through our own mutations -------------------------------------------------


def _document(
    field: str, types: dict[str, str], rows: list[dict[str, Any]]
) -> tuple[str, dict[str, Any]]:
    params, selections, variables = [], [], {}
    for i, row in enumerate(rows):
        args = []
        for name, type_ in types.items():
            params.append(f"${name}{i}: {type_}")
            args.append(f"{name}: ${name}{i}")
            variables[f"{name}{i}"] = row[name]
        selections.append(f"m{i}: {field}({', '.join(args)}) {{ userErrors {{ code message }} }}")
    return f"mutation Seed({', '.join(params)}) {{\n" + "\n".join(selections) + "\n}", variables


def seed(port: int, data: dict[str, Any], httpbench: ModuleType, workers: int) -> int:
    """Write the dataset through the API's mutations; returns how many were sent."""
    home = {h["student_id"]: h for h in data["homes"]}
    phases: list[tuple[str, dict[str, str], list[dict[str, Any]]]] = [
        (
            "createTeacher",
            {"input": "CreateTeacherInput!"},
            [{"input": {"id": t["id"], "name": t["name"]}} for t in data["teachers"]],
        ),
        (
            "createClass",
            {"input": "CreateClassInput!"},
            [
                {"input": {"id": c["id"], "subject": c["subject"], "teacherId": c["teacher_id"]}}
                for c in data["classes"]
            ],
        ),
        (
            "createSport",
            {"input": "CreateSportInput!"},
            [
                {"input": {"id": s["id"], "name": s["name"], "coach": s["coach"]}}
                for s in data["sports"]
            ],
        ),
        (
            "createStudent",
            {"input": "CreateStudentInput!"},
            [
                {
                    "input": {
                        "id": s["id"],
                        "name": s["name"],
                        "email": s["email"],
                        "home": {
                            k: home[s["id"]][k] for k in ("country", "state", "city", "street")
                        },
                    }
                }
                for s in data["students"]
            ],
        ),
        (
            "enrollStudent",
            {"studentId": "ID!", "classId": "ID!"},
            [{"studentId": e["student_id"], "classId": e["class_id"]} for e in data["enrollments"]],
        ),
        (
            "joinSport",
            {"studentId": "ID!", "sportId": "ID!"},
            [
                {"studentId": x["student_id"], "sportId": x["sport_id"]}
                for x in data["student_sports"]
            ],
        ),
    ]
    local = threading.local()

    def send(job: tuple[str, dict[str, Any]]) -> None:
        if not hasattr(local, "client"):
            local.client = httpbench.GraphQLClient("127.0.0.1", port, timeout=120)
        out = local.client.query(*job)  # raises on GraphQL errors
        refused = [e for payload in out.values() for e in payload["userErrors"]]
        if refused:
            raise RuntimeError(f"seeding refused: {refused[:3]}")

    sent = 0
    with ThreadPoolExecutor(workers) as pool:
        # Phases in order (an edge needs both its nodes); requests of a phase concurrently.
        for field, types, rows in phases:
            chunks = [rows[i : i + ALIASES] for i in range(0, len(rows), ALIASES)]
            list(pool.map(send, [_document(field, types, chunk) for chunk in chunks]))
            sent += len(rows)
    return sent


# -- the peer ---------------------------------------------------------------------------


@dataclasses.dataclass
class Peer:
    bench: ModuleType
    pg: Any
    port: int
    pid: int  # PostGraphile's node process
    versions: dict[str, str]

    def statements(self) -> int:
        return int(self.bench.app_calls(self.pg))


@contextmanager
def peer_running(mods: dict[str, ModuleType], node: str, data: dict[str, Any]) -> Iterator[Peer]:
    """The peer's PostgreSQL cluster (loaded) and PostGraphile, as its bench.py runs them."""
    bench = mods["bench"]
    bindir = peer.postgres_bindir()
    tmp = Path(tempfile.mkdtemp(prefix="pg-peer-bench-"))
    pg = server = None
    try:
        try:
            pg = bench.PgCluster(bindir, tmp, bench.free_port())
            pg.init()
            pg.start()
            bench.load_database(pg, data)
            url = f"postgres://{bench.APP_ROLE}@127.0.0.1:{pg.port}/{bench.DB}"
            server = bench.PostGraphile(node, url, bench.free_port(), tmp / "postgraphile.log")
            server.start()
            versions = {
                "postgraphile": bench.postgraphile_version(),
                "node": bench.node_version(node).lstrip("v"),
                "postgres": pg.version(),
            }
        except (Exception, SystemExit) as error:
            detail = str(error).strip().splitlines() or [type(error).__name__]
            raise peer.PeerUnavailable(f"the peer did not start: {detail[0]}") from error
        yield Peer(bench, pg, server.port, server.proc.pid, versions)
    finally:
        if server is not None:
            server.stop()
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


# -- measuring ---------------------------------------------------------------------------


@dataclasses.dataclass
class Side:
    """One server's request body, and what its timed requests gave."""

    port: int
    body: bytes
    latencies: list[float] = dataclasses.field(default_factory=list)
    samples: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    last: bytes = b""


def _answer(raw: bytes, what: str) -> dict[str, Any]:
    out = json.loads(raw)
    if out.get("errors") or "data" not in out:
        raise RuntimeError(f"{what}: {json.dumps(out.get('errors'))[:500]}")
    return out["data"]  # type: ignore[no-any-return]


def timed(folder: Path, sides: list[dict[str, Any]], requests: int, warmup: int, block: int) -> Any:
    """`sides` timed by tools/timed_client.py, from a process of its own: one result a side."""
    job = {
        "peer": str(folder),  # its client, httpbench.py
        "sides": sides,
        "requests": requests,
        "warmup": warmup,
        "block": block,
    }
    sent = subprocess.run(
        [sys.executable, "-m", "tools.timed_client"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if sent.returncode != 0:
        raise RuntimeError(f"the timed client failed: {sent.stderr.strip()[-2000:]}")
    return json.loads(sent.stdout)


def measure(
    ours: Side,
    theirs: Side | None,
    clock: CallClock,
    folder: Path,
    requests: int,
    warmup: int,
    block: int,
) -> None:
    """Warm-up, then `requests` timed requests a side, alternating blocks of `block`, sent
    by tools/timed_client.py from a process of its own; each of our timed requests gets the
    DynamoDB calls the clock saw within its interval."""
    sides = [ours] if theirs is None else [ours, theirs]
    clock.take()
    results = timed(
        folder,
        [{"port": side.port, "body": side.body.decode()} for side in sides],
        requests,
        warmup,
        block,
    )
    calls = clock.take()
    for side, result in zip(sides, results, strict=True):
        side.last = result["last"].encode()
        side.latencies = [ended - started for started, ended in result["intervals"]]
        if side is ours:
            side.samples = [
                _sample(within, dynamodb)
                for within, dynamodb in zip(
                    calls_within(calls, result["intervals"]), result["dynamodb"], strict=True
                )
            ]


def calls_within(calls: list[Call], intervals: list[tuple[float, float]]) -> list[list[Call]]:
    """For each interval, the calls that started and ended inside it."""
    calls = sorted(calls, key=lambda call: call[1])
    starts = [call[1] for call in calls]
    out = []
    for begun, ended in intervals:
        first, last = bisect.bisect_left(starts, begun), bisect.bisect_right(starts, ended)
        out.append([call for call in calls[first:last] if call[2] <= ended])
    return out


def _sample(calls: list[Call], dynamodb: dict[str, Any] | None) -> dict[str, Any]:
    """One request's figures: what its answer said, and its calls as the clock saw them."""
    count, wall, serial = waves(calls)
    return {
        "requests": (dynamodb or {}).get("requests"),
        "extensions": dynamodb,
        "calls": len(calls),
        "operations": dict(Counter(name for name, _, _ in calls)),
        "shape": shape(calls),
        "waves": count,
        "wall_ms": wall,
        "serial_ms": serial,
    }


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(side: Side, httpbench: ModuleType) -> dict[str, Any]:
    out: dict[str, Any] = dict(httpbench.summarize_ms(side.latencies))
    if side.samples:
        requests = [s["requests"] for s in side.samples if s["requests"] is not None]
        out.update(
            {
                "dynamodb_requests": _median(requests) if requests else None,
                "dynamodb_requests_range": [min(requests), max(requests)] if requests else None,
                "calls": _median([s["calls"] for s in side.samples]),
                "operations": side.samples[-1]["operations"],
                # Waves are read off timings: the most frequent grouping is the plan's.
                "shape": Counter(s["shape"] for s in side.samples).most_common(1)[0][0],
                "waves": _median([s["waves"] for s in side.samples]),
                "dynamodb_wall_ms": _median([s["wall_ms"] for s in side.samples]),
                "dynamodb_serial_ms": _median([s["serial_ms"] for s in side.samples]),
                "extensions": side.samples[-1]["extensions"],
            }
        )
    return out


# -- throughput: Q1 from concurrent clients -------------------------------------------


@contextmanager
def api_workers(settings: Settings, workers: int | None) -> Iterator[tuple[int, int]]:
    """`graph-api serve --workers N` on the bench's table (N: serve's default when None);
    yields its port and the parent's pid. The settings are the in-process server's."""
    port = dynamodb_local.free_port()
    env = {
        **os.environ,
        "GRAPH_API_BACKEND": "remote",
        "GRAPH_API_TABLE": settings.table,
        "GRAPH_API_LOG_LEVEL": "WARNING",
        "GRAPH_API_PUBLIC_PERSONAL_DATA": str(settings.public_personal_data).lower(),
        "GRAPH_API_JWKS_URL": "",
        "GRAPH_API_JWT_SECRET": "",
        "GRAPH_API_AUTH_READS": "false",
        "AWS_REGION": settings.region,
    }
    if settings.endpoint_url:  # the DynamoDB Local this bench started, its throwaway keys
        env.update(
            AWS_ENDPOINT_URL_DYNAMODB=settings.endpoint_url,
            AWS_ACCESS_KEY_ID="local",
            AWS_SECRET_ACCESS_KEY="local",
        )
    command = [sys.executable, "-m", "graph_api.cli", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port)] + (["--workers", str(workers)] if workers else [])
    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory() as folder:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=folder)
        try:
            try:
                api_server.wait_until_healthy(f"http://127.0.0.1:{port}", process)
            except RuntimeError as error:
                log.seek(0)
                raise RuntimeError(
                    f"{error}\n{log.read().decode(errors='replace')[-4000:]}"
                ) from None
            yield port, process.pid
        finally:
            api_server.stop(process)


def throughput(
    httpbench: ModuleType, port: int, pid: int, body: bytes, clients: int, seconds: float
) -> dict[str, Any]:
    """A short untimed burst, then `clients` keep-alive clients for `seconds`; with the CPU
    the server's process and its descendants (workers) spent, per answered request."""
    httpbench.throughput_run("127.0.0.1", port, body, clients=clients, seconds=2.0)
    pids = [pid, *descendants(pid)]
    before = cpu_seconds(pids)
    out: dict[str, Any] = httpbench.throughput_run(
        "127.0.0.1", port, body, clients=clients, seconds=seconds
    )
    out["processes"] = len(pids)
    out["cpu_ms_per_request"] = (cpu_seconds(pids) - before) * 1000 / max(1, out["ok"])
    return out


def run_throughput(
    args: argparse.Namespace,
    settings: Settings,
    running: Peer | None,
    data: dict[str, Any],
    targets: dict[str, Any],
    school: peer_queries.School,
    httpbench: ModuleType,
    queries: ModuleType,
) -> dict[str, Any]:
    ours_spec = next(s for s in peer_queries.build(data, targets) if s.name == "Q1")
    with api_workers(settings, args.api_workers) as (port, pid):
        workers = len([p for p in descendants(pid) if _is_worker(p)])
        client = httpbench.GraphQLClient("127.0.0.1", port)
        check = ours_spec.check(client.query(ours_spec.query, ours_spec.variables), school, targets)
        client.close()
        body = httpbench.encode(ours_spec.query, ours_spec.variables)
        us = throughput(httpbench, port, pid, body, args.clients, args.seconds)
    out: dict[str, Any] = {"clients": args.clients, "workers": workers, "check": check, "us": us}
    if running is not None:
        theirs_spec = next(s for s in queries.build(targets) if s.name == "Q1")
        body = httpbench.encode(theirs_spec.query, theirs_spec.variables)
        out["peer"] = throughput(
            httpbench, running.port, running.pid, body, args.clients, args.seconds
        )
    print(
        f"Q1 x{args.clients}: us {us['rps']:.1f} requests/s ({workers} workers)"
        + (f", peer {out['peer']['rps']:.1f}" if "peer" in out else ""),
        flush=True,
    )
    return out


def _is_worker(pid: int) -> bool:
    """A uvicorn worker (multiprocessing's spawn), not its resource tracker."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"spawn_main" in cmdline.read()
    except OSError:
        return False


# -- report ------------------------------------------------------------------------------


def _ms(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}f}"


def _count(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


def render(result: dict[str, Any]) -> str:
    env, params = result["env"], result["params"]
    peer_line = (
        f"PostGraphile {env['postgraphile']} on PostgreSQL {env['postgres']} (Node {env['node']})"
        if result["peer"]
        else f"not measured ({result['peer_unavailable']})"
    )
    lines = [
        f"### make bench, {result['started_utc']}",
        "",
        f"Us: the API on {env['backend']}, seeded through its mutations "
        f"({result['seeding']['mutations']} in {result['seeding']['seconds']:.0f} s). "
        f"Peer: {peer_line}. Same dataset (seed 11: {result['dataset']}), same targets; "
        f"{params['warmup']} warm-up + {params['requests']} timed requests per query and side, "
        f"one keep-alive connection each from a client process of their own, interleaved in "
        f"blocks of {params['block']}; "
        f"{env['cpus']} CPUs, Python {env['python']} ({env['python_home']}).",
        "",
        "| query | us p50 ms | us p95 ms | peer p50 ms | peer p95 ms | p50 us/peer "
        "| our DynamoDB requests | our waves | our DynamoDB wall ms | peer SQL statements |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for q in result["queries"]:
        us, them = q["us"], q.get("peer")
        ratio = f"{us['median_ms'] / them['median_ms']:.1f}\u00d7" if them else "n/a"
        lines.append(
            f"| {q['name']} {q['title']} | {_ms(us['median_ms'])} | {_ms(us['p95_ms'])} "
            f"| {_ms(them and them['median_ms'])} | {_ms(them and them['p95_ms'])} | {ratio} "
            f"| {_count(us['dynamodb_requests'])} | {_count(us['waves'])} "
            f"| {_ms(us['dynamodb_wall_ms'])} "
            f"| {_count(them and round(them['statements_per_request'], 2))} |"
        )
    lines += [
        "",
        "Our DynamoDB requests: `extensions.dynamodb.requests` (median over the timed "
        "requests). Waves and wall ms: the API's boto3 calls timed in this process (serialize, "
        "send, parse); calls that overlap form one wave, wall ms is the sum of the waves' "
        "spans (medians). Peer SQL statements: pg_stat_statements calls of PostGraphile's role "
        "over the timed requests.",
        "",
        "| query | our calls, wave by wave | DynamoDB serial ms | rest of our p50 ms "
        "| our check | peer check |",
        "|---|---|---:|---:|---|---|",
    ]
    for q in result["queries"]:
        us = q["us"]
        rest = us["median_ms"] - us["dynamodb_wall_ms"]
        lines.append(
            f"| {q['name']} | {us['shape']} | {_ms(us['dynamodb_serial_ms'])} | {_ms(rest)} "
            f"| {q['check']} | {q.get('peer_check', 'n/a')} |"
        )
    if result.get("floors"):
        lines += ["", *render_floors(result["floors"])]
    tp = result.get("throughput")
    if tp:
        us, them = tp["us"], tp.get("peer")
        lines += [
            "",
            f"Q1 throughput: {tp['clients']} concurrent keep-alive clients, "
            f"{us['seconds']:.0f} s a side after a 2 s warm-up; us: `graph-api serve --workers "
            f"{tp['workers']}` on the same table ({tp['check']}). CPU ms per request: user + "
            "system time of the server's processes (all workers; PostGraphile's node process, "
            "PostgreSQL not counted) over the run, from /proc, per answered request.",
            "",
            "| Q1 x16 | requests/s | p50 ms | p95 ms | errors | server CPU ms/request |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, side in (("us", us), ("peer", them)):
            if side:
                lines.append(
                    f"| {name} | {side['rps']:.1f} | {_ms(side['median_ms'])} "
                    f"| {_ms(side['p95_ms'])} | {side['errors']} "
                    f"| {_ms(side['cpu_ms_per_request'])} |"
                )
        if them:
            lines.append(
                f"| us/peer | {us['rps'] / them['rps']:.2f}\u00d7 "
                f"| {us['median_ms'] / them['median_ms']:.1f}\u00d7 "
                f"| {us['p95_ms'] / them['p95_ms']:.1f}\u00d7 | "
                f"| {us['cpu_ms_per_request'] / them['cpu_ms_per_request']:.1f}\u00d7 |"
            )
    return "\n".join(lines)


# -- floors: what DynamoDB alone takes for our calls --------------------------------------


class RequestRecorder:
    """The DynamoDB requests the API sends while `recording`, as they go on the wire (signed):
    botocore's `before-send` event, which the API's direct calls emit as botocore's own path
    does. DynamoDB Local checks no signature's age, so a recorded request can be sent again.

    Registered only while recording: a `before-send` handler takes the API's reads off their
    plain path (store/direct.py), which the timed requests must measure as served.
    """

    def __init__(self, client: Any) -> None:
        self._events = client.meta.events

    def _record(self, request: Any, recorded: list[dict[str, Any]]) -> None:
        url = urlsplit(request.url)
        body = request.body
        recorded.append(
            {
                "scheme": url.scheme,
                "host": url.hostname,
                "port": url.port,
                "path": url.path or "/",
                "headers": {k: _text(v) for k, v in request.headers.items()},
                "body": _text(body or b""),
            }
        )

    @contextmanager
    def recording(self) -> Iterator[list[dict[str, Any]]]:
        recorded: list[dict[str, Any]] = []

        def record(request: Any, **_: Any) -> None:  # None: the request is sent as usual
            self._record(request, recorded)

        self._events.register("before-send.dynamodb", record)
        try:
            yield recorded
        finally:
            self._events.unregister("before-send.dynamodb", record)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def record_calls(
    client: Any, body: bytes, recorder: RequestRecorder, clock: CallClock, attempts: int = 3
) -> tuple[list[dict[str, Any]], list[Call]] | None:
    """The DynamoDB requests our API sends for one GraphQL request, and their calls as the
    clock saw them; None when a call of something else (the stream reader's lease) kept
    slipping in: the requests recorded must be the ones the answer counts."""
    for _ in range(attempts):
        clock.take()
        with recorder.recording() as recorded:
            status, raw = client.post_raw(body)
        calls = clock.take()
        if status != 200:
            raise RuntimeError(f"HTTP {status} while recording: {raw[:300]!r}")
        counted = (json.loads(raw).get("extensions") or {}).get("dynamodb", {}).get("requests")
        if counted == len(recorded) == len(calls):
            return recorded, calls
    return None


TYPENAME = json.dumps({"query": "{ __typename }"}).encode()


def measure_floors(
    port: int,
    theirs_port: int | None,
    bodies: list[tuple[str, bytes, bytes | None]],
    recorder: RequestRecorder,
    clock: CallClock,
    folder: Path,
    httpbench: ModuleType,
    requests: int,
    warmup: int,
    block: int,
) -> dict[str, Any]:
    """One more interleaved run: each query (name, our body, the peer's) on both sides beside
    its DynamoDB calls sent again straight to the emulator, one after another, plus
    `{ __typename }` on both sides (each server's HTTP and GraphQL floor). A query whose calls
    overlap (Q3's Queries) gets no replay: one after another they would take longer than
    the API takes for them."""
    client = httpbench.GraphQLClient("127.0.0.1", port)
    sides: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for name, ours, theirs in bodies:
        row: dict[str, Any] = {"name": name, "us": len(sides)}
        sides.append({"port": port, "body": ours.decode()})
        if theirs is not None and theirs_port is not None:
            row["peer"] = len(sides)
            sides.append({"port": theirs_port, "body": theirs.decode()})
        found = record_calls(client, ours, recorder, clock)
        if found is None:
            row["no_replay"] = "other calls kept arriving while recording"
        else:
            recorded, calls = found
            row["calls"] = len(recorded)
            if any(len(wave) > 1 for wave in group(calls)):
                row["no_replay"] = "its calls overlap"
            elif any(r["scheme"] != "http" for r in recorded):
                row["no_replay"] = "not a local endpoint"
            else:
                row["alone"] = len(sides)
                sides.append(
                    {"port": recorded[0]["port"], "host": recorded[0]["host"], "replay": recorded}
                )
        rows.append(row)
    client.close()
    typename = {"us": len(sides)}
    sides.append({"port": port, "body": TYPENAME.decode()})
    if theirs_port is not None:
        typename["peer"] = len(sides)
        sides.append({"port": theirs_port, "body": TYPENAME.decode()})
    clock.take()
    results = timed(folder, sides, requests, warmup, block)
    calls = clock.take()

    def p50(index: int | None) -> float | None:
        if index is None:
            return None
        latencies = [ended - started for started, ended in results[index]["intervals"]]
        return float(httpbench.summarize_ms(latencies)["median_ms"])

    return {
        "params": {"requests": requests, "warmup": warmup, "block": block},
        "typename": {side: p50(index) for side, index in typename.items()},
        "queries": [
            {
                "name": row["name"],
                "us_ms": p50(row["us"]),
                "peer_ms": p50(row.get("peer")),
                "alone_ms": p50(row.get("alone")),
                # The same calls as the API's clock saw them: serialize, send, parse.
                "wall_ms": _median(
                    [waves(c)[1] for c in calls_within(calls, results[row["us"]]["intervals"])]
                ),
                "calls": row.get("calls"),
                "no_replay": row.get("no_replay"),
            }
            for row in rows
        ],
    }


FLOOR_WARMUP = 50  # both sides are warm by now: the five queries ran before


def run_floors(
    args: argparse.Namespace,
    running: Peer | None,
    port: int,
    recorder: RequestRecorder,
    clock: CallClock,
    folder: Path,
    data: dict[str, Any],
    targets: dict[str, Any],
    mods: dict[str, ModuleType],
) -> dict[str, Any]:
    httpbench = mods["httpbench"]
    theirs = {s.name: s for s in mods["queries"].build(targets)} if running else {}
    bodies = [
        (
            spec.name,
            httpbench.encode(spec.query, spec.variables),
            httpbench.encode(theirs[spec.name].query, theirs[spec.name].variables)
            if spec.name in theirs
            else None,
        )
        for spec in peer_queries.build(data, targets)
    ]
    floors = measure_floors(
        port,
        running.port if running else None,
        bodies,
        recorder,
        clock,
        folder,
        httpbench,
        args.requests,
        FLOOR_WARMUP,
        args.block,
    )
    alone = ", ".join(
        f"{q['name']} {q['alone_ms']:.2f} ms" for q in floors["queries"] if q["alone_ms"]
    )
    print(f"DynamoDB alone: {alone}", flush=True)
    return floors


def render_floors(floors: dict[str, Any]) -> list[str]:
    """The floors' table: of each query's us/peer, the part DynamoDB alone takes."""
    params, typename = floors["params"], floors["typename"]
    peer_typename = typename.get("peer")
    lines = [
        "What the backend alone takes: one more interleaved run "
        f"({params['warmup']} warm-up + {params['requests']} timed requests a side, blocks of "
        f"{params['block']}), each query on both sides beside its DynamoDB calls as our API "
        "sent them (recorded, signed), sent again one after another straight to its DynamoDB "
        "endpoint from the client process, with no API between. So us/peer = alone/peer + "
        "(us \u2212 alone)/peer, the last being what our API adds, in the peer's time. Our "
        "DynamoDB wall: the same calls timed in the API, as above (serialize, send, parse). "
        f"`{{ __typename }}` over HTTP, p50: us {typename['us']:.2f} ms"
        + (f", peer {peer_typename:.2f} ms." if peer_typename else "."),
        "",
        "| query | us p50 ms | peer p50 ms | DynamoDB alone p50 ms "
        "| our DynamoDB wall ms | us/peer | alone/peer | (us \u2212 alone)/peer |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for q in floors["queries"]:
        us, them, alone = q["us_ms"], q["peer_ms"], q["alone_ms"]
        calls = f"{q['calls']} call{'' if q['calls'] == 1 else 's'}"
        shown = f"{alone:.2f} ({calls})" if alone else f"n/a: {q['no_replay']}"
        ratios = ["n/a", "n/a", "n/a"]
        if them:
            ratios[0] = f"{us / them:.2f}\u00d7"
            if alone:
                ratios[1:] = [f"{alone / them:.2f}\u00d7", f"{(us - alone) / them:.2f}\u00d7"]
        lines.append(
            f"| {q['name']} | {us:.2f} | {_ms(them, 2)} | {shown} | {_ms(q['wall_ms'], 2)} "
            f"| {' | '.join(ratios)} |"
        )
    return lines


# -- main ----------------------------------------------------------------------------------


def _on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100, help="timed requests a query a side")
    # Both sides run on JITs (DynamoDB Local's JVM, PostGraphile's V8): after 10 requests
    # a query's latency was still falling (Q3 4.8 -> 3.1 ms, its peer's 1.3 -> 1.2 ms).
    parser.add_argument(
        "--warmup", type=int, default=300, help="untimed requests a query a side first"
    )
    parser.add_argument("--block", type=int, default=10, help="requests a side before switching")
    parser.add_argument("--workers", type=int, default=4, help="connections that seed")
    parser.add_argument("--no-peer", action="store_true", help="measure our side only")
    parser.add_argument("--clients", type=int, default=16, help="Q1 throughput: clients")
    parser.add_argument("--seconds", type=float, default=10.0, help="Q1 throughput: seconds")
    parser.add_argument(
        "--api-workers", type=int, help="Q1 throughput: serve's workers (default: its own)"
    )
    parser.add_argument("--no-throughput", action="store_true", help="skip Q1 throughput")
    parser.add_argument(
        "--no-floors", action="store_true", help="skip the floors (DynamoDB alone, { __typename })"
    )
    parser.add_argument("--no-live", action="store_true", help="skip live events")
    live_bench.add_arguments(parser)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _on_sigterm)
    begun = time.monotonic()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    # The dataset and the client come from the peer's files, whether or not it can run.
    try:
        folder = peer.copy()
    except peer.PeerUnavailable as error:
        raise SystemExit(f"make bench: {error}") from None
    mods = peer.modules(folder)
    dataset, httpbench, queries = mods["dataset"], mods["httpbench"], mods["queries"]
    data = dataset.generate()
    targets = dataset.pick_targets(data)
    school = peer_queries.School(data)

    unavailable = "--no-peer" if args.no_peer else ""
    node = ""
    if not args.no_peer:
        try:
            node = peer.install(folder)
            peer.postgres_bindir()
        except peer.PeerUnavailable as error:
            unavailable = str(error)
            print(f"peer unavailable: {unavailable}; measuring our side only", flush=True)

    settings = dataclasses.replace(
        Settings.from_env(),
        table=f"bench-peer-{uuid.uuid4().hex[:8]}",
        jwks_url="",
        jwt_secret="",
        auth_reads=False,
    )
    stop: Callable[[], None] = lambda: None  # noqa: E731
    backend = "the endpoint in AWS_ENDPOINT_URL_DYNAMODB"
    dynamodb_pid = None
    live_bench.streams_beside_dynamodb()
    if not os.environ.get("AWS_ENDPOINT_URL_DYNAMODB"):
        local = dynamodb_local.start()
        stop, backend = local.stop, f"DynamoDB Local {dynamodb_local.VERSION}"
        dynamodb_pid = local.process.pid
        settings = dataclasses.replace(settings, backend="remote", endpoint_url=local.endpoint)
    services = Services.create(settings)
    tune_collector()  # as `graph-api serve` does
    server = None
    try:
        admin.create(services.dynamo, settings.table)
        server, port = serve(services)
        t0 = time.monotonic()
        mutations = seed(port, data, httpbench, args.workers)
        seeded = time.monotonic() - t0
        print(f"seeded {mutations} mutations in {seeded:.1f} s", flush=True)
        # The API's stream reader, in this process, then reads the seeding's records: timed
        # meanwhile, Q1 shared the process and DynamoDB Local with it (its p50 4.1-6.5 ms
        # from run to run, Q3-Q5 steady). Timing starts once it has caught up.
        reader = services.events.reader
        if reader is not None and not live_bench.caught_up(reader):
            print("the stream reader did not catch up with the seeding in 60 s", flush=True)
        clock = CallClock(services.dynamo.client)
        recorder = RequestRecorder(services.dynamo.client)

        with ExitStack() as stack:
            running: Peer | None = None
            if not unavailable:
                try:
                    running = stack.enter_context(peer_running(mods, node, data))
                except peer.PeerUnavailable as error:
                    unavailable = str(error)
                    print(f"peer unavailable: {unavailable}; measuring our side only", flush=True)
            result = run(
                args, running, port, clock, folder, data, targets, school, httpbench, queries
            )
            if not args.no_floors:
                result["floors"] = run_floors(
                    args, running, port, recorder, clock, folder, data, targets, mods
                )
            if not args.no_throughput:
                result["throughput"] = run_throughput(
                    args, settings, running, data, targets, school, httpbench, queries
                )
        if not args.no_live:  # the peer stopped: its processes take no CPU from ours
            live_began = time.monotonic()
            try:
                result["live"] = live_bench.run_from_args(
                    args, services, port, data, targets, dynamodb_pid
                )
                result["live"]["seconds"] = time.monotonic() - live_began
            except RuntimeError as error:  # the queries' figures are still printed
                result["live_failed"] = str(error)
                print(f"live events failed: {error}", flush=True)
    finally:
        if server is not None:
            server.stop()
        services.dynamo.call_sync("DeleteTable", {"TableName": settings.table}, None)
        services.close()
        stop()

    result.update(
        {
            "started_utc": started,
            "dataset": ", ".join(f"{v} {k}" for k, v in dataset.summary(data).items()),
            "targets": targets,
            "peer": running is not None,
            "peer_unavailable": unavailable,
            "seeding": {"mutations": mutations, "seconds": seeded, "workers": args.workers},
            "params": {"requests": args.requests, "warmup": args.warmup, "block": args.block},
        }
    )
    result["env"].update(
        {
            "backend": backend,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            # Which build ran: the README's "Benchmark" says how much the builds differ.
            "python_home": sys.base_prefix,
        }
    )
    result["seconds"] = time.monotonic() - begun
    print()
    print(render(result))
    if "live" in result:
        print(live_bench.render(result["live"]))
    OUTPUT.mkdir(exist_ok=True)
    path = OUTPUT / f"bench-peer-{started.replace(':', '').replace('-', '')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    live = f" (live events {result['live']['seconds']:.0f} s)" if "live" in result else ""
    print(f"\n{path.relative_to(ROOT)}; {result['seconds']:.0f} s in all{live}")
    trouble = live_bench.problems(result["live"]) if "live" in result else []
    trouble += [result["live_failed"]] if "live_failed" in result else []
    if trouble:  # a bench that lost events fails, whatever its latency
        raise SystemExit("make bench: live events not delivered as written: " + "; ".join(trouble))


def run(
    args: argparse.Namespace,
    running: Peer | None,
    port: int,
    clock: CallClock,
    folder: Path,
    data: dict[str, Any],
    targets: dict[str, Any],
    school: peer_queries.School,
    httpbench: ModuleType,
    queries: ModuleType,
) -> dict[str, Any]:
    env: dict[str, Any] = dict(running.versions) if running else {}
    ours_client = httpbench.GraphQLClient("127.0.0.1", port)
    theirs_client = httpbench.GraphQLClient("127.0.0.1", running.port) if running else None
    peer_specs = {s.name: s for s in queries.build(targets)}
    out = []
    for spec in peer_queries.build(data, targets):
        ours = Side(port, httpbench.encode(spec.query, spec.variables))
        row: dict[str, Any] = {"name": spec.name, "title": spec.title, "query": spec.query}
        row["check"] = spec.check(ours_client.query(spec.query, spec.variables), school, targets)
        theirs = None
        if running is not None and theirs_client is not None:
            theirs_spec = peer_specs[spec.name]
            theirs = Side(running.port, httpbench.encode(theirs_spec.query, theirs_spec.variables))
            answer = theirs_client.query(theirs_spec.query, theirs_spec.variables)
            row["peer_check"] = theirs_spec.check(answer, data, targets)
            before = running.statements()
        measure(ours, theirs, clock, folder, args.requests, args.warmup, args.block)
        spec.check(_answer(ours.last, spec.name), school, targets)  # still right under load
        row["us"] = summarize(ours, httpbench)
        if running is not None and theirs is not None:
            statements = (running.statements() - before) / (args.requests + args.warmup)
            theirs_spec.check(_answer(theirs.last, spec.name), data, targets)
            row["peer"] = {**summarize(theirs, httpbench), "statements_per_request": statements}
        print(
            f"{spec.name}: us p50 {row['us']['median_ms']:.1f} ms"
            + (f", peer p50 {row['peer']['median_ms']:.1f} ms" if "peer" in row else "")
            + f" ({row['check']})",
            flush=True,
        )
        out.append(row)
    ours_client.close()
    if theirs_client is not None:
        theirs_client.close()
    return {"env": env, "queries": out}


if __name__ == "__main__":
    main()
