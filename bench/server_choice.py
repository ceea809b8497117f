"""`python -m bench.server_choice`: which ASGI server serves Q1 at 16 clients with less CPU per
request, uvicorn as the image runs it (h11 with its 16 KB head bound) or granian (its ASGI
interface, HTTP/1 with the same bound), both serving this checkout's app at once.

Both run the image's factory (`hosting.create_app_from_env`) with `--workers N` (one per core)
against the same table of DynamoDB Local behind TLS, as `make bench` serves it, seeded with
the peer's school through a third, untimed server that holds the change stream's lease. Q1
is then sent from 16 keep-alive clients to each in turns (`production.measure_throughput`:
the order reversed each round), and each server's process tree is charged its CPU from
`/proc`. `{ __typename }` from one keep-alive client, the servers alternating in blocks, gives
the HTTP path's own CPU per request on each.

Granian is not a dependency (uvicorn stays: bench/README.md, "The HTTP path's own cost, and
the server"): `.venv/bin/uv pip install granian==2.8.9` first; `make .venv/.installed` after a
lock change takes it out again.
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType

from bench import http_cost, peer, production, seeding, servers
from bench import queries as our_queries
from graph_api.http.hosting import MAX_HEAD_BYTES
from graph_api.settings import Settings
from tools.api_server import stop, wait_until_healthy
from tools.processes import free_port

BIN = Path(sys.executable).parent
FACTORY = "graph_api.http.hosting:create_app_from_env"
SERVERS = ("uvicorn", "granian", "granian-rust-tasks")


def commands(port: int, workers: int) -> dict[str, list[str]]:
    """Each server's command line, with the bounds `serve` gives uvicorn."""
    common = ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    lines = {
        "uvicorn": [
            str(BIN / "uvicorn"),
            "--factory",
            FACTORY,
            *common,
            "--http",
            "h11",
            "--h11-max-incomplete-event-size",
            str(MAX_HEAD_BYTES),
            "--ws-max-size",
            str(Settings.max_body_bytes),
            "--no-server-header",
            "--log-level",
            "warning",
        ],
        "granian": [
            str(BIN / "granian"),
            "--interface",
            "asgi",
            "--factory",
            FACTORY,
            *common,
            "--http",
            "1",
            "--http1-buffer-size",
            str(MAX_HEAD_BYTES),
            "--log-level",
            "warning",
        ],
    }
    lines["granian-rust-tasks"] = [*lines["granian"], "--task-impl", "rust"]
    return lines


@contextmanager
def serving(name: str, env: dict[str, str], workers: int) -> Iterator[production.Side]:
    port = free_port()
    command = commands(port, workers)[name]
    environment = {**os.environ, "GRAPH_API_LOG_LEVEL": "WARNING", **env}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, env=environment, stdout=log, stderr=log)
        try:
            try:
                wait_until_healthy(f"http://127.0.0.1:{port}", process)
            except RuntimeError as error:
                log.seek(0)
                raise RuntimeError(f"{name}: {error}\n{log.read().decode()[-3000:]}") from None
            yield production.Side(name, "api", port, process.pid, name)
        finally:
            stop(process)


def typename_cpu(sides: list[production.Side], requests: int, block: int) -> dict[str, float]:
    """`{ __typename }`'s CPU µs per request on each side, one keep-alive client, alternating."""
    conns = [http.client.HTTPConnection("127.0.0.1", s.port, timeout=30) for s in sides]
    for conn in conns:
        for _ in range(200):
            http_cost.post(conn)
    cpu = dict.fromkeys((s.label for s in sides), 0.0)
    for n in range(requests // block):
        for i in range(len(sides)) if n % 2 == 0 else reversed(range(len(sides))):
            before = sides[i].cpu_seconds()
            for _ in range(block):
                http_cost.post(conns[i])
            cpu[sides[i].label] += sides[i].cpu_seconds() - before
    for conn in conns:
        conn.close()
    done = requests // block * block
    return {label: seconds / done * 1e6 for label, seconds in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=24.0, help="Q1: seconds a side")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--typename", type=int, default=4000, help="requests a side")
    parser.add_argument(
        "--servers", nargs="+", default=["uvicorn", "granian"], help="of: " + ", ".join(SERVERS)
    )
    parser.add_argument("--repeat", type=int, default=3, help="measurements, one seeding")
    args = parser.parse_args()
    if any(n.startswith("granian") for n in args.servers) and not (BIN / "granian").exists():
        raise SystemExit("bench.server_choice: .venv/bin/uv pip install granian==2.8.9 first")
    folder = peer.copy()
    mods = peer.modules(folder)
    dataset, httpbench = mods["dataset"], mods["httpbench"]
    data = dataset.generate()
    targets = dataset.pick_targets(data)
    q1 = next(q for q in our_queries.build(data, targets) if q.name == "Q1")
    body = httpbench.encode(q1.query, q1.variables)
    table = f"bench-{uuid.uuid4().hex[:8]}"
    head = servers.head()
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        endpoint, ca_bundle, _, what = stack.enter_context(production.backend(workdir))
        env = production.server_env(table, endpoint, ca_bundle)
        servers.run_cli(head, env, "create-table")
        seeder = stack.enter_context(servers.serving(head, env, 1, "seeding"))
        print(f"seeded {seeding.seed(seeder.port, data, httpbench, 4)} mutations", flush=True)
        sides = [stack.enter_context(serving(n, env, args.workers)) for n in args.servers]
        seeding_side = production.Side("seeding", "api", seeder.port, seeder.pid, "")
        production.settle([*sides, seeding_side])
        for side in sides:  # the same answer from both
            status, raw = httpbench.GraphQLClient("127.0.0.1", side.port).post_raw(body)
            assert status == 200 and b'"errors"' not in raw, raw[:300]
        print(f"backend: {what}; {args.workers} workers each", flush=True)
        for n in range(args.repeat):
            print(f"-- run {n + 1} of {args.repeat}", flush=True)
            measure(sides, body, httpbench, args)


def measure(
    sides: list[production.Side], body: bytes, httpbench: ModuleType, args: argparse.Namespace
) -> None:
    typename = typename_cpu(sides, args.typename, 200)
    print(
        "{ __typename }, CPU µs per request: "
        + ", ".join(f"{k} {v:.0f}" for k, v in typename.items()),
        flush=True,
    )
    throughput = production.measure_throughput(
        httpbench, sides, {s.label: body for s in sides}, args
    )
    for label, figures in throughput["sides"].items():
        print(
            f"Q1 x{args.clients} {label}: {figures['rps']:.1f} requests/s,"
            f" {figures['cpu_ms_per_request'] * 1000:.0f} µs CPU per request,"
            f" p50 {figures['median_ms']:.1f} ms, {figures['errors']} errors",
            flush=True,
        )


if __name__ == "__main__":
    main()
