"""`python -m bench.layers` (`make bench-layers`): where a request's CPU goes, by layer, for Q1
and Q3 on the production path (DynamoDB Local behind stunnel, its CA as AWS_CA_BUNDLE).

The API is served in this process (the image's app and uvicorn settings, on uvicorn's loop),
the school seeded through a `graph-api serve` of its own (which keeps the change stream's
lease), the requests sent from a client process of their own (bench/timed_client.py). Per
query: warm-up, then N requests unprofiled, whose CPU per request is the serving thread's
CPU (`time.thread_time`) over them; then N requests under cProfile with that thread's CPU as
its clock. Each function's self time, less cProfile's own cost per call (calibrated first),
goes to the layer of its file (`layer`); a standard-library or builtin function's goes to the
layers of its callers, in proportion (uvloop's methods are the event loop's, orjson's `loads`
decode's); the thread's CPU that no function holds (uvloop's own C code between callbacks)
is the event loop's. The shares are scaled to the unprofiled CPU. bench/README.md ("Where a
request's CPU goes, by layer") has the figures and how far to trust them.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import tempfile
import time
import uuid
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import uvicorn

from bench import peer, production, seeding, servers, timed_client
from bench import queries as our_queries

HTTP, PARSE, PLAN, EXECUTION = "HTTP", "parse and validate", "plan", "execution"
WIRE, DECODE, SERIALIZE, LOOP = "wire", "decode", "serialize", "event loop / other"
LAYERS = (HTTP, PARSE, PLAN, EXECUTION, WIRE, DECODE, SERIALIZE, LOOP)
PROFILED = "profiled"  # a query's µs per request under cProfile, less cProfile's own cost

# A module path's first matching prefix names its layer ("graph_api/...", a package under
# site-packages, or a standard-library module); a path matching none is charged to its callers.
RULES = (
    ("graph_api/http/endpoint.py:encode_json", SERIALIZE),  # the answer's JSON (orjson)
    ("graph_api/http/", HTTP),
    ("graph_api/graph/engine/plan/", PLAN),
    ("graph_api/graph/engine/document.py", PLAN),
    ("graph_api/graph/engine/limits.py", PARSE),
    ("graph_api/graph/engine/cost.py", PARSE),
    ("graph_api/store/codec.py", DECODE),
    ("graph_api/store/loaders.py", EXECUTION),
    ("graph_api/store/", WIRE),
    ("graph_api/telemetry/", LOOP),
    ("graph_api/", EXECUTION),
    ("uvicorn/", HTTP),
    ("h11/", HTTP),
    ("starlette/", HTTP),
    ("strawberry/http/", HTTP),
    ("strawberry/asgi/", HTTP),
    ("strawberry/", EXECUTION),
    ("graphql/language/", PARSE),
    ("graphql/validation/", PARSE),
    ("graphql/", EXECUTION),
    ("aiodynamo/", WIRE),
    ("aiohttp/", WIRE),
    ("aiohappyeyeballs/", WIRE),
    ("yarl/", WIRE),
    ("multidict/", WIRE),
    ("botocore/", WIRE),
    ("ssl.py", WIRE),
    ("asyncio/", LOOP),
    ("selectors.py", LOOP),
    ("prometheus_client/", LOOP),
)


def module_path(filename: str) -> str:
    """`filename` as a module path: under site-packages, from `graph_api/`, or from the
    standard library's folder ("asyncio/events.py"); a builtin ("~") stays as it is."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in filename:
            return filename.rsplit(marker, 1)[1]
    if "/graph_api/" in filename:
        return "graph_api/" + filename.rsplit("/graph_api/", 1)[1]
    _, sep, tail = filename.rpartition("/lib/python3.")
    return tail.split("/", 1)[1] if sep and "/" in tail else filename


def layer(filename: str, function: str = "") -> str | None:
    """The layer a function's self time belongs to, by its file (and, for the answer's JSON,
    its name); None: the layers of its callers (the standard library, most builtins)."""
    if filename == "~":  # a builtin: its module is in its name
        if "uvloop" in function:
            return LOOP
        return DECODE if function == "<built-in method orjson.loads>" else None
    path = module_path(filename)
    for prefix, named in RULES:
        wanted, _, name = prefix.partition(":")
        if path.startswith(wanted) and (not name or name == function):
            return named
    return None


Func = tuple[str, int, str]


def charge(stats: dict[Func, Any], per_call: tuple[float, float]) -> dict[str, float]:
    """Seconds of self time per layer, from pstats' `stats`, less cProfile's cost: `per_call`
    = (charged to the callee per call, charged to the caller per call it makes)."""
    made: dict[Func, int] = defaultdict(int)
    for _, _, _, _, callers in stats.values():
        for caller, edge in callers.items():
            made[caller] += edge[0]
    memo: dict[Func, dict[str, float]] = {}

    def shares(func: Func, seen: frozenset[Func]) -> dict[str, float]:
        named = layer(func[0], func[2])
        if named is not None:
            return {named: 1.0}
        if func in memo:
            return memo[func]
        callers = {c: e for c, e in stats[func][4].items() if c not in seen and c in stats}
        weights = {c: e[2] or e[0] for c, e in callers.items()}  # self time from each, or calls
        total = sum(weights.values())
        if not total:
            return {LOOP: 1.0}
        out: dict[str, float] = defaultdict(float)
        for caller, weight in weights.items():
            for name, part in shares(caller, seen | {func}).items():
                out[name] += part * weight / total
        memo[func] = dict(out)
        return memo[func]

    seconds: dict[str, float] = dict.fromkeys(LAYERS, 0.0)
    for func, (_, calls, own, _, _) in stats.items():
        left = max(0.0, own - calls * per_call[0] - made[func] * per_call[1])
        for name, part in shares(func, frozenset()).items():
            seconds[name] += left * part
    return seconds


def calibrate(calls: int = 200_000) -> tuple[float, float]:
    """cProfile's own CPU per profiled call, with this thread's CPU as its clock: (what it
    adds to the callee's self time, what it adds to the caller's)."""

    def callee() -> None:
        pass

    def caller() -> None:
        for _ in range(calls):
            callee()

    began = time.thread_time()
    caller()
    bare = time.thread_time() - began
    profile = cProfile.Profile(time.thread_time)
    profile.runcall(caller)
    own = {f[2]: s[2] for f, s in pstats.Stats(profile).stats.items()}  # type: ignore[attr-defined]
    return own["callee"] / calls, max(0.0, own["caller"] - bare) / calls


async def measure(
    app: Any, config: dict[str, Any], jobs: list[tuple[our_queries.Ours, bytes]], args: Any
) -> dict[str, dict[str, float]]:
    """Each query's µs per request by layer, with the app served here and the client apart."""
    server = uvicorn.Server(uvicorn.Config(app, **config))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    per_call = calibrate()
    table: dict[str, dict[str, float]] = {}
    for spec, body in jobs:
        asked = [{"port": port, "body": body.decode()}]
        await asyncio.to_thread(timed_client.timed, args.folder, asked, 0, args.warmup, 50)
        began = time.thread_time()
        out = await asyncio.to_thread(timed_client.timed, args.folder, asked, args.requests, 0, 50)
        cpu = (time.thread_time() - began) / args.requests
        answer = json.loads(out[0]["last"])
        spec.check(answer["data"], args.school, args.targets)  # right, and in full
        profile = cProfile.Profile(time.thread_time)
        began = time.thread_time()
        profile.enable()
        await asyncio.to_thread(timed_client.timed, args.folder, asked, args.requests, 0, 50)
        profile.disable()
        profiled = time.thread_time() - began
        production.OUTPUT.mkdir(exist_ok=True)  # to group again without another run
        profile.dump_stats(production.OUTPUT / f"layers-{spec.name}.prof")
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        seconds = charge(stats, per_call)
        roots = sum(s[1] - sum(e[0] for e in s[4].values()) for s in stats.values())
        held = sum(s[2] for s in stats.values()) + roots * per_call[1]
        seconds[LOOP] += max(0.0, profiled - held)  # the loop's C code, no function's
        total = sum(seconds.values())
        table[spec.name] = {k: v / total * cpu * 1e6 for k, v in seconds.items()}
        table[spec.name][PROFILED] = total / args.requests * 1e6
        print(f"{spec.name}: {cpu * 1e6:.0f} µs CPU a request", flush=True)
    server.should_exit = True
    await serving
    return table


def render(table: dict[str, dict[str, float]]) -> str:
    """The Markdown table: a row a layer, µs per request and share for each query."""
    names = list(table)
    lines = [
        "| layer | " + " | ".join(f"{n} µs/request | {n} share" for n in names) + " |",
        "|---|" + "---:|---:|" * len(names),
    ]
    totals = {n: sum(table[n][k] for k in LAYERS) for n in names}
    for row in (*LAYERS, "total"):
        cells = []
        for n in names:
            value = totals[n] if row == "total" else table[n][row]
            cells.append(f"{value:,.0f} | {value / totals[n]:.0%}")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    check = ", ".join(f"{n} {table[n][PROFILED]:,.0f}" for n in names)
    return "\n".join(lines) + f"\n\nprofiled, less cProfile's own cost, µs/request: {check}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="timed and profiled, each")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--queries", nargs="+", default=["Q1", "Q3"])
    args = parser.parse_args()
    args.folder = peer.copy()
    mods = peer.modules(args.folder)
    data = mods["dataset"].generate()
    args.targets = mods["dataset"].pick_targets(data)
    args.school = our_queries.School(data)
    specs = {q.name: q for q in our_queries.build(data, args.targets)}
    jobs = [
        (specs[n], mods["httpbench"].encode(specs[n].query, specs[n].variables))
        for n in args.queries
    ]
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        endpoint, ca_bundle, _, what = stack.enter_context(production.backend(workdir))
        env = production.server_env(f"bench-{uuid.uuid4().hex[:8]}", endpoint, ca_bundle)
        head = servers.head()
        servers.run_cli(head, env, "create-table")
        seeder = stack.enter_context(servers.serving(head, env, 1, "seeding"))
        print(
            f"seeded {seeding.seed(seeder.port, data, mods['httpbench'], 4)} mutations", flush=True
        )
        production.settle([production.Side("seeding", "api", seeder.port, seeder.pid, "")])
        os.environ.update(env, GRAPH_API_LOG_LEVEL="WARNING")  # botocore's chain reads these
        from graph_api.http.app import create_app
        from graph_api.http.hosting import remote_settings, services_for, uvicorn_limits

        settings = remote_settings()
        app = create_app(services_for(settings))
        config = {
            "host": "127.0.0.1",
            "port": 0,
            "log_level": settings.log_level.lower(),  # as `serve`: no access log line
            "log_config": None,
            **uvicorn_limits(settings),
        }
        loop = uvicorn.Config(app, **config).get_loop_factory()
        with asyncio.Runner(loop_factory=loop) as runner:
            table = runner.run(measure(app, config, jobs, args))
    print(json.dumps(table))  # the figures, whatever the table below makes of them
    print(f"\n{what}; {args.requests} requests a query, unprofiled and profiled\n")
    print(render(table))


if __name__ == "__main__":
    main()
