"""`make bench`: our API on the production path (DynamoDB over HTTPS) beside PostGraphile, and
with `BASE=<git ref>` beside the ref's API, in one run.

DynamoDB Local (tools/dynamodb_local.py) behind a TLS terminator (tools/tls_terminator.py:
stunnel, its CA passed as AWS_CA_BUNDLE). Each checkout's API is its own `graph-api serve`
(bench/servers.py: the base is a worktree with its own venv, driven only by its CLI and
environment) on a table of its own, created by its own `graph-api create-table` and seeded
with the peer's seed-11 school through its own mutations (bench/seeding.py), so each reads
the items its own writes lay out (a base before a layout change reads no items it does not
know). The peer
(`../shared/peers/postgraphile`, bench/peer.py) serves the same school from PostgreSQL.

Each of the five queries, checked on every side, then timed: warm-up, then the same number
of requests a side, the sides taking turns in blocks, one keep-alive connection each from a
client process of its own (bench/timed_client.py). The CPU each server spent over the timed
requests comes from /proc (bench/proc.py): `graph-api serve`'s process tree, PostGraphile's
Node process. Then Q1 from 16 clients, each API served with one worker per core
(`--api-workers`: given, not `serve`'s default, so that BASE and HEAD run the same count),
the sides again taking turns. Prints Markdown tables (bench/report.py) and writes
`test-output/bench-<time>.json`. Without the peer's needs (npm, PostgreSQL) it says why and
measures the APIs only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import boto3
import jwt

from bench import peer, proc, report, seeding, servers, timed_client
from bench import queries as our_queries
from bench.run import BenchQuery, BenchRun
from tools import dynamodb_local, tls_terminator

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "test-output"


@dataclass
class Side:
    """A server the bench sends requests to: an API (`kind` "api") or the peer ("peer")."""

    label: str
    kind: str
    port: int
    pid: int
    what: str  # how the tables describe it
    tree: bool = True  # CPU of the process and its descendants, else of the process only
    figures: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # sent with each timed request

    def cpu_seconds(self) -> float:
        return proc.tree_cpu_seconds(self.pid) if self.tree else proc.cpu_seconds([self.pid])

    def body(self, query: BenchQuery) -> bytes | None:
        if self.label == report.BASE and query.ours.since_base:
            return None  # a query the base's schema may not have (Q6: the search by name)
        return query.body if self.kind == "api" else query.theirs_body


def server_env(table: str, endpoint: str, ca_bundle: Path | None) -> dict[str, str]:
    """What both checkouts' `graph-api serve` are given: the table, the endpoint, no auth."""
    env = {
        "GRAPH_API_BACKEND": "remote",
        "GRAPH_API_TABLE": table,
        "GRAPH_API_JWKS_URL": "",
        "GRAPH_API_JWT_SECRET": "",
        "GRAPH_API_AUTH_READS": "false",
        # One secret for both: a cursor of one server means the same to the other.
        "GRAPH_API_CURSOR_SECRET": "bench-" + table,
        "AWS_REGION": os.environ.get("AWS_REGION", "us-east-1"),
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        # The seeding server holds the change stream's lease (`main`); the timed servers try
        # to take it once every 200 s (a third of the lease), an idle poll once a minute.
        "GRAPH_API_STREAM_POLL_SECONDS": "60",
        "GRAPH_API_STREAM_LEASE_SECONDS": "600",
        # Counted as in production (a remote backend's default is off unless a port is named).
        "GRAPH_API_METRICS": "true",
    }
    if ca_bundle is not None:
        env["AWS_CA_BUNDLE"] = str(ca_bundle)
    if "AWS_ACCESS_KEY_ID" not in os.environ:  # DynamoDB Local takes any keys
        env.update(AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local")
    return env


ROLES = ("admin", "teacher", "student", "guardian")
_SECRET = "bench-secret-of-at-least-32-bytes-for-hs256"


def signed_in(
    env: dict[str, str], role: str | None, data: dict[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """The timed servers' environment and the headers of their timed requests: as given, or
    (`--as ROLE`) checking HS256 tokens, with a token of ROLE for the first teacher, the
    first student, or a guardian of the first two students. The seeding server stays open:
    its mutations carry no token."""
    if role is None:
        return env, {}
    claims: dict[str, Any] = {
        "sub": f"bench-{role}",
        "iss": "bench",
        "aud": "graph-api",
        "exp": int(time.time()) + 6 * 3600,
        "roles": [role],
        "graph:teacher": data["teachers"][0]["id"],
        "graph:student": data["students"][0]["id"],
        "graph:students": [s["id"] for s in data["students"][:2]],
    }
    auth = {
        "GRAPH_API_JWT_SECRET": _SECRET,
        "GRAPH_API_JWT_ISSUER": "bench",
        "GRAPH_API_JWT_AUDIENCE": "graph-api",
    }
    token = jwt.encode(claims, _SECRET, algorithm="HS256")
    return {**env, **auth}, {"Authorization": f"Bearer {token}"}


def settle(sides: list[Side], idle: float = 0.02, most: float = 120.0) -> dict[str, float]:
    """Wait until no server spends more than `idle` of a core (the stream reader done with
    the seeding's records), up to `most` seconds; each side's CPU ms per second in the last
    second waited (what it spends with no request, charged to its requests when timed)."""
    began = time.monotonic()
    while True:
        before = [side.cpu_seconds() for side in sides]
        time.sleep(1.0)
        spent = [side.cpu_seconds() - b for side, b in zip(sides, before, strict=True)]
        if max(spent) <= idle or time.monotonic() - began > most:
            return {side.label: s * 1000 for side, s in zip(sides, spent, strict=True)}


def ends(sides: list[Side]) -> list[Side]:
    """Head first, base last, the others between: the turns go first to last, then last to
    first, so the two sides compared most closely take the same places in them."""
    rank = {report.HEAD: 0, report.BASE: 2}
    return sorted(sides, key=lambda side: rank.get(side.label, 1))


def _answer(raw: bytes, what: str) -> dict[str, Any]:
    out = json.loads(raw)
    if out.get("errors") or "data" not in out:
        raise RuntimeError(f"{what}: {json.dumps(out.get('errors'))[:500]}")
    return out["data"]  # type: ignore[no-any-return]


def measure_queries(bench: BenchRun, sides: list[Side], folder: Path) -> list[dict[str, Any]]:
    """Each query checked on every side, then timed in turns; CPU per side from /proc."""
    args, httpbench = bench.args, bench.httpbench
    rows = []
    for query in bench.queries():
        spec, theirs = query.ours, query.theirs  # theirs: only when the peer runs
        peer_spec: Any = theirs
        row: dict[str, Any] = {"name": spec.name, "title": spec.title, "check": {}, "sides": {}}
        taking = [side for side in sides if side.body(query) is not None]
        for side in taking:
            client = httpbench.GraphQLClient("127.0.0.1", side.port)
            if side.kind == "api":
                answer = client.query(spec.query, spec.variables)
                row["check"][side.label] = spec.check(answer, bench.school, bench.targets)
            else:
                answer = client.query(peer_spec.query, peer_spec.variables)
                row["check"][side.label] = peer_spec.check(answer, bench.data, bench.targets)
            client.close()
        asked = [
            {"port": s.port, "body": (s.body(query) or b"").decode(), "headers": s.headers}
            for s in taking
        ]
        peer_asked = [a for a, s in zip(asked, taking, strict=True) if s.kind == "peer"]
        if peer_asked and args.peer_warmup:  # V8's JIT: the peer kept getting faster for long
            timed_client.timed(folder, peer_asked, 0, args.peer_warmup, args.block)
        timed_client.timed(folder, asked, 0, args.warmup, args.block)
        before = [side.cpu_seconds() for side in taking]
        results = timed_client.timed(folder, asked, args.requests, 0, args.block)
        spent = [side.cpu_seconds() - b for side, b in zip(taking, before, strict=True)]
        for side, result, cpu in zip(taking, results, spent, strict=True):
            latencies = [ended - started for started, ended in result["intervals"]]
            figures: dict[str, Any] = dict(httpbench.summarize_ms(latencies))
            figures["cpu_ms_per_request"] = cpu * 1000 / len(latencies)
            last = _answer(result["last"].encode(), f"{spec.name} on {side.label}")
            if side.kind == "api":  # still right under load
                spec.check(last, bench.school, bench.targets)
                counted = [d["requests"] for d in result["dynamodb"] if d]
                figures["dynamodb_requests"] = statistics.median(counted) if counted else None
                figures["dynamodb_requests_range"] = (
                    [min(counted), max(counted)] if counted else None
                )
            else:
                peer_spec.check(last, bench.data, bench.targets)
            row["sides"][side.label] = figures
        print(
            f"{spec.name}: "
            + ", ".join(
                f"{label} p50 {f['median_ms']:.1f} ms CPU {f['cpu_ms_per_request']:.2f} ms"
                for label, f in row["sides"].items()
            ),
            flush=True,
        )
        rows.append(row)
    return rows


def measure_throughput(
    httpbench: ModuleType, sides: list[Side], bodies: dict[str, bytes], args: argparse.Namespace
) -> dict[str, Any]:
    """Q1 from `args.clients` keep-alive clients: a warm-up burst a side, then
    `args.seconds` a side in `args.rounds` turns (order reversed every other round), with the
    CPU each side's processes spent per answered request."""
    warmup = 2.0
    for side in sides:
        httpbench.throughput_run("127.0.0.1", side.port, bodies[side.label], args.clients, warmup)
    totals = {side.label: _Turns() for side in sides}
    turn = args.seconds / args.rounds
    for r in range(args.rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            before = side.cpu_seconds()
            out = httpbench.throughput_run(
                "127.0.0.1", side.port, bodies[side.label], args.clients, turn
            )
            totals[side.label].add(out, side.cpu_seconds() - before)
    figures = {label: turns.figures() for label, turns in totals.items()}
    print(
        f"Q1 x{args.clients}: "
        + ", ".join(f"{label} {f['rps']:.1f} requests/s" for label, f in figures.items()),
        flush=True,
    )
    return {
        "clients": args.clients,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "warmup_seconds": warmup,
        "sides": figures,
    }


@dataclass
class _Turns:
    """A side's throughput turns, added up."""

    ok: int = 0
    errors: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    medians: list[float] = field(default_factory=list)

    def add(self, out: dict[str, Any], cpu: float) -> None:
        self.ok += out["ok"]
        self.errors += out["errors"]
        self.seconds += out["seconds"]
        self.cpu += cpu
        self.medians.append(out["median_ms"])

    def figures(self) -> dict[str, Any]:
        return {
            "rps": self.ok / self.seconds,
            "ok": self.ok,
            "errors": self.errors,
            "median_ms": statistics.median(self.medians),  # of the turns' medians
            "cpu_ms_per_request": self.cpu * 1000 / max(1, self.ok),
        }


@contextmanager
def backend(workdir: Path) -> Iterator[tuple[str, Path | None, str, str]]:
    """(HTTPS endpoint, CA bundle, plain-HTTP endpoint, description): AWS_ENDPOINT_URL_DYNAMODB
    as given (e.g. AWS itself), else DynamoDB Local behind the TLS terminator."""
    given = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    if given:
        yield given, None, given, f"the endpoint {given}"
        return
    local = dynamodb_local.start()
    try:
        try:
            tls = tls_terminator.start(local.endpoint, workdir)
        except tls_terminator.TerminatorError as error:
            raise SystemExit(f"make bench: {error}") from None
        try:
            what = f"DynamoDB Local {dynamodb_local.VERSION} behind stunnel ({tls.endpoint})"
            yield tls.endpoint, tls.ca_bundle, local.endpoint, what
        finally:
            tls.stop()
    finally:
        local.stop()


def _on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", help="a git ref to compare with (make bench BASE=REF)")
    parser.add_argument("--requests", type=int, default=500, help="timed requests a query a side")
    parser.add_argument("--warmup", type=int, default=300, help="untimed requests first, a side")
    # PostGraphile on V8 kept getting faster after 300 requests a query (plain.py's --warmup);
    # its requests are cheap, so it alone gets more first.
    parser.add_argument(
        "--peer-warmup", type=int, default=2000, help="untimed requests to the peer alone first"
    )
    parser.add_argument("--block", type=int, default=10, help="requests a side before switching")
    parser.add_argument("--clients", type=int, default=16, help="Q1 throughput: clients")
    parser.add_argument("--seconds", type=float, default=12.0, help="Q1 throughput: s a side")
    parser.add_argument("--rounds", type=int, default=4, help="Q1 throughput: turns a side")
    parser.add_argument(
        "--api-workers",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="Q1 throughput: serve's workers (default: one per core)",
    )
    parser.add_argument("--no-throughput", action="store_true", help="skip Q1 throughput")
    parser.add_argument("--no-peer", action="store_true", help="measure the APIs only")
    parser.add_argument(
        "--plain", action="store_true", help="also head on plain HTTP, beside its TLS figures"
    )
    parser.add_argument("--seeders", type=int, default=4, help="connections that seed")
    parser.add_argument(
        "--as",
        dest="role",
        choices=ROLES,
        help="the timed servers check HS256 tokens, and each timed request carries one of ROLE",
    )
    return parser.parse_args()


def main() -> None:
    args = arguments()
    signal.signal(signal.SIGTERM, _on_sigterm)
    begun = time.monotonic()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:  # the dataset, queries and client come from the peer's files, whether or not it runs
        folder = peer.copy()
    except peer.PeerUnavailable as error:
        raise SystemExit(f"make bench: {error}") from None
    mods = peer.modules(folder)
    dataset, httpbench = mods["dataset"], mods["httpbench"]
    data = dataset.generate()
    targets = dataset.pick_targets(data)
    unavailable, node = ("--no-peer" if args.no_peer else ""), ""
    if not args.no_peer:
        try:
            node = peer.install(folder)
            peer.postgres_bindir()
        except peer.PeerUnavailable as error:
            unavailable = str(error)
            print(f"peer unavailable: {unavailable}; measuring the APIs only", flush=True)
    checkouts = [servers.head()]
    if args.base:
        checkouts.append(servers.base(args.base))
    table = f"bench-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {"started_utc": started, "table": table}

    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        endpoint, ca_bundle, plain_endpoint, backend_what = stack.enter_context(backend(workdir))
        # A table a checkout: head's is `table`, the base's `table-base`.
        envs = [
            server_env(table if n == 0 else f"{table}-base", endpoint, ca_bundle)
            for n in range(len(checkouts))
        ]
        running: peer.Running | None = None
        seeders: list[servers.Server] = []
        t0 = time.monotonic()
        mutations = 0
        for checkout, checkout_env in zip(checkouts, envs, strict=True):
            servers.run_cli(checkout, checkout_env, "create-table")
            if ca_bundle is None:  # an endpoint of the caller's: the table goes when the run ends
                stack.callback(_delete_table, endpoint, checkout_env["GRAPH_API_TABLE"])
            # Seeded through a server of its own, not timed: the timed servers start alike,
            # neither with the seeding's 3,600 mutations behind it. It serves on to the end,
            # the holder of its table's stream lease (it started first), so that no timed
            # server reads the stream (the lease holder's polls and renewals were charged to
            # its requests: head 5-17 % above base with the same code).
            label = "seeding" if checkout is checkouts[0] else "seeding base"
            # Not timed, and 20 mutations a request: on a busy machine one may take longer
            # than a request's 10 s deadline (UNAVAILABLE, the run lost).
            seeding_env = {**checkout_env, "GRAPH_API_DEADLINE_SECONDS": "120"}
            seeder = stack.enter_context(servers.serving(checkout, seeding_env, 1, label))
            seeders.append(seeder)
            mutations += seeding.seed(seeder.port, data, httpbench, args.seeders)
        result["seeding"] = {"mutations": mutations, "seconds": time.monotonic() - t0}
        print(f"seeded {mutations} mutations in {result['seeding']['seconds']:.0f} s", flush=True)
        with ExitStack() as serving:
            signed = [signed_in(checkout_env, args.role, data) for checkout_env in envs]
            headers = signed[0][1]
            sides = [
                _api_side(serving, checkout, timed_env, 1, "TLS" if ca_bundle else endpoint)
                for checkout, (timed_env, _) in zip(checkouts, signed, strict=True)
            ]
            for side in sides:
                side.headers = headers
            if args.plain and ca_bundle is not None:
                plain = server_env(table, plain_endpoint, None)
                sides.append(
                    _api_side(serving, checkouts[0], plain, 1, "plain HTTP", "head, plain HTTP")
                )
            if not unavailable:
                try:
                    running = stack.enter_context(peer.running(mods, node, data))
                    sides.append(
                        Side(
                            report.PEER,
                            "peer",
                            running.port,
                            running.pid,
                            _peer_what(running),
                            tree=False,
                        )
                    )
                except peer.PeerUnavailable as error:
                    unavailable = str(error)
                    print(f"peer unavailable: {unavailable}; measuring the APIs only", flush=True)
            t0 = time.monotonic()
            seeding_sides = [Side(x.label, "api", x.port, x.pid, "") for x in seeders]
            result["idle_cpu_ms_per_s"] = settle([*sides, *seeding_sides])
            print(
                f"servers idle after {time.monotonic() - t0:.0f} s (CPU ms/s: "
                + ", ".join(f"{k} {v:.0f}" for k, v in result["idle_cpu_ms_per_s"].items())
                + ")",
                flush=True,
            )
            school = our_queries.School(data)
            bench = BenchRun(args, mods, data, targets, school, running)
            sides = ends(sides)
            result["queries"] = measure_queries(bench, sides, folder)
        result["sides"] = [{"label": s.label, "kind": s.kind, "what": s.what} for s in sides]
        if not args.no_throughput:
            q1 = next(q for q in bench.queries() if q.name == "Q1")
            with ExitStack() as serving:
                tp_sides = [
                    _api_side(serving, c, e, args.api_workers, "")
                    for c, e in zip(checkouts, envs, strict=True)
                ]
                workers = len(proc.workers(tp_sides[0].pid))
                tp_sides = ends([*tp_sides, *(s for s in sides if s.kind == "peer")])
                bodies = {s.label: s.body(q1) or b"" for s in tp_sides}
                result["throughput"] = measure_throughput(httpbench, tp_sides, bodies, args)
                result["throughput"]["workers"] = workers
    result.update(
        {
            "dataset": ", ".join(f"{v} {k}" for k, v in dataset.summary(data).items()),
            "peer_unavailable": unavailable,
            "checkouts": {c.label: {"commit": c.commit, "root": str(c.root)} for c in checkouts},
            "params": {
                "requests": args.requests,
                "warmup": args.warmup,
                "peer_warmup": args.peer_warmup if running else 0,
                "block": args.block,
                "role": args.role,
            },
            "env": {
                "backend": backend_what,
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                **(running.versions if running else {}),
            },
            "seconds": time.monotonic() - begun,
        }
    )
    print()
    print(report.render(result))
    OUTPUT.mkdir(exist_ok=True)
    path = OUTPUT / f"bench-{started.replace(':', '').replace('-', '')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{path.relative_to(ROOT)}; {result['seconds']:.0f} s in all")


def _api_side(
    stack: ExitStack,
    checkout: servers.Checkout,
    env: dict[str, str],
    workers: int | None,
    transport: str,
    label: str = "",
) -> Side:
    server = stack.enter_context(servers.serving(checkout, env, workers, label))
    what = f"`graph-api serve` of {checkout.commit}" + (f" over {transport}" if transport else "")
    return Side(server.label, "api", server.port, server.pid, what)


def _delete_table(endpoint: str, table: str) -> None:
    boto3.client("dynamodb", endpoint_url=endpoint).delete_table(TableName=table)


def _peer_what(running: peer.Running) -> str:
    v = running.versions
    return f"PostGraphile {v['postgraphile']} (Node {v['node']}) on PostgreSQL {v['postgres']}"
