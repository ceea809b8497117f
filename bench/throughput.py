"""Q1's throughput for `make bench-plain`: concurrent keep-alive clients against `graph-api serve
--workers N` on the bench's table and against the peer, with the CPU each server's
processes spent per answered request (from /proc).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from bench import proc
from bench.run import BenchRun
from graph_api.settings import Settings
from tools import api_server


@contextmanager
def api_workers(settings: Settings, workers: int | None) -> Iterator[tuple[int, int]]:
    """`graph-api serve --workers N` on the bench's table (N: one per core when None, as
    `serve` itself starts one with the in-process broker); yields its port and the parent's
    pid. The settings are the in-process server's."""
    workers = workers or len(os.sched_getaffinity(0))
    env = {
        "GRAPH_API_BACKEND": "remote",
        "GRAPH_API_TABLE": settings.table,
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
    with api_server.served(workers=workers, **env) as server:
        yield urlsplit(server.url).port or 80, server.process.pid


def throughput(
    httpbench: ModuleType, port: int, pid: int, body: bytes, clients: int, seconds: float
) -> dict[str, Any]:
    """A short untimed burst, then `clients` keep-alive clients for `seconds`; with the CPU
    the server's process and its descendants (workers) spent, per answered request."""
    httpbench.throughput_run("127.0.0.1", port, body, clients=clients, seconds=2.0)
    pids = [pid, *proc.descendants(pid)]
    before = proc.cpu_seconds(pids)
    out: dict[str, Any] = httpbench.throughput_run(
        "127.0.0.1", port, body, clients=clients, seconds=seconds
    )
    out["processes"] = len(pids)
    out["cpu_ms_per_request"] = (proc.cpu_seconds(pids) - before) * 1000 / max(1, out["ok"])
    return out


def run(bench: BenchRun, settings: Settings) -> dict[str, Any]:
    """Q1 from `args.clients` clients for `args.seconds` a side: ours served by `api_workers`
    (its answer checked first), then the peer's when it runs."""
    args, running, httpbench = bench.args, bench.running, bench.httpbench
    q1 = next(q for q in bench.queries() if q.name == "Q1")
    with api_workers(settings, args.api_workers) as (port, pid):
        served_by = len(proc.workers(pid))
        client = httpbench.GraphQLClient("127.0.0.1", port)
        answer = client.query(q1.ours.query, q1.ours.variables)
        check = q1.ours.check(answer, bench.school, bench.targets)
        client.close()
        us = throughput(httpbench, port, pid, q1.body, args.clients, args.seconds)
    out: dict[str, Any] = {"clients": args.clients, "workers": served_by, "check": check, "us": us}
    if running is not None and q1.theirs_body is not None:
        out["peer"] = throughput(
            httpbench, running.port, running.pid, q1.theirs_body, args.clients, args.seconds
        )
    print(
        f"Q1 x{args.clients}: us {us['rps']:.1f} requests/s ({served_by} workers)"
        + (f", peer {out['peer']['rps']:.1f}" if "peer" in out else ""),
        flush=True,
    )
    return out
