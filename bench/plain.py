"""`make bench-plain`: our API in process on plain HTTP beside the PostGraphile peer, one run.

The peer (`../shared/peers/postgraphile`, see bench/peer.py) runs from a copy in
`.cache/peer/`: a throwaway PostgreSQL cluster loaded with its seed-11 dataset, PostGraphile
on a loopback port. We seed the same dataset into a fresh table of DynamoDB Local through our
own GraphQL mutations (bench/seeding.py), serve
the API on another loopback port, check both sides' answers against the dataset, then time
the five logical queries on both, interleaved in blocks, one keep-alive connection per side,
the same number of timed requests each, sent from a process of their own
(bench/timed_client.py says why), each of ours beside the DynamoDB calls the API's client
made in it (bench/calls.py). Then the floors (bench/floors.py): one more interleaved run of
each query on both sides beside its DynamoDB calls, recorded as our API sent them and sent
again straight to DynamoDB Local from the client process, with no API between, and
`{ __typename }` on both sides: of each query's us/peer, the part the backend alone takes.
Then Q1's throughput (bench/throughput.py): 16 concurrent keep-alive clients for 10 s a side,
the API served by `graph-api serve --workers N` (one per core by default) on the same table,
with the CPU its processes spent per request (from /proc). Then live events, ours alone
(bench/live.py):
write-to-event latency with 1,000 subscriptions on the in-process API, and the stream
reader's requests with 1 subscription and with 1,000. Prints Markdown tables and writes
`test-output/bench-peer-<time>.json`.
Without postgres or npm, says why and prints our side.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import platform
import signal
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from bench import floors, peer, seeding, throughput, timed_client
from bench import live as live_bench
from bench import queries as peer_queries
from bench.calls import SAMPLED, Call, CallClock, RequestRecorder, calls_within, shape, waves
from bench.naive import serve
from bench.run import BenchRun
from graph_api.graph.engine.context import Services
from graph_api.http.hosting import tune_collector
from graph_api.settings import Settings
from graph_api.store import admin
from tools import dynamodb_local

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "test-output"


# -- measuring ---------------------------------------------------------------------------


@dataclasses.dataclass
class Side:
    """One server's request body, and what its timed requests gave."""

    port: int
    body: bytes
    latencies: list[float] = dataclasses.field(default_factory=list)
    samples: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # ours: `measure`
    # Ours: `extensions.dynamodb.requests` of each timed request, as its answer said.
    counted: list[int | None] = dataclasses.field(default_factory=list)
    last: bytes = b""


def _answer(raw: bytes, what: str) -> dict[str, Any]:
    out = json.loads(raw)
    if out.get("errors") or "data" not in out:
        raise RuntimeError(f"{what}: {json.dumps(out.get('errors'))[:500]}")
    return out["data"]  # type: ignore[no-any-return]


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
    by bench/timed_client.py from a process of its own. Then `SAMPLED` more of ours,
    untimed, with the clock watching: their DynamoDB calls give the query's calls and waves,
    and the timed requests carry no probe."""
    sides = [ours] if theirs is None else [ours, theirs]
    asked = [{"port": side.port, "body": side.body.decode()} for side in sides]
    results = timed_client.timed(folder, asked, requests, warmup, block)
    for side, result in zip(sides, results, strict=True):
        side.last = result["last"].encode()
        side.latencies = [ended - started for started, ended in result["intervals"]]
    ours.counted = [(d or {}).get("requests") for d in results[0]["dynamodb"]]
    (sampled,), calls = clock.calls_of(
        lambda: timed_client.timed(folder, asked[:1], SAMPLED, 0, SAMPLED)
    )
    ours.samples = [
        _sample(within, dynamodb)
        for within, dynamodb in zip(
            calls_within(calls, sampled["intervals"]), sampled["dynamodb"], strict=True
        )
    ]


def _sample(calls: list[Call], dynamodb: dict[str, Any] | None) -> dict[str, Any]:
    """One request's figures: what its answer said, and its calls as the clock saw them."""
    count, wall, serial = waves(calls)
    return {
        "extensions": dynamodb,
        "calls": len(calls),
        "operations": dict(Counter(name for name, _, _ in calls)),
        "shape": shape(calls),
        "waves": count,
        "wall_ms": wall,
        "serial_ms": serial,
    }


def summarize(side: Side, httpbench: ModuleType) -> dict[str, Any]:
    out: dict[str, Any] = dict(httpbench.summarize_ms(side.latencies))
    if side.samples:
        requests = [n for n in side.counted if n is not None]
        out.update(
            {
                "dynamodb_requests": statistics.median(requests) if requests else None,
                "dynamodb_requests_range": [min(requests), max(requests)] if requests else None,
                "calls": statistics.median([s["calls"] for s in side.samples]),
                "operations": side.samples[-1]["operations"],
                # Waves are read off timings: the most frequent grouping is the plan's.
                "shape": Counter(s["shape"] for s in side.samples).most_common(1)[0][0],
                "waves": statistics.median([s["waves"] for s in side.samples]),
                "dynamodb_wall_ms": statistics.median([s["wall_ms"] for s in side.samples]),
                "dynamodb_serial_ms": statistics.median([s["serial_ms"] for s in side.samples]),
                "extensions": side.samples[-1]["extensions"],
            }
        )
    return out


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
        f"### make bench-plain, {result['started_utc']}",
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


# -- the floors' table (bench/floors.py measures them) -----------------------------------


def render_floors(floors: dict[str, Any]) -> list[str]:
    """The floors' table: of each query's us/peer, the part DynamoDB alone takes."""
    params, typename = floors["params"], floors["typename"]
    peer_typename = typename.get("peer")
    lines = [
        "What the backend alone takes: one more interleaved run "
        f"({params['warmup']} warm-up + {params['requests']} timed requests a side, blocks of "
        f"{params['block']}), each query on both sides beside its DynamoDB calls as our API "
        "sent them (recorded, signed), sent again one after another straight to its DynamoDB "
        "endpoint from the client process, with no API between: back to back, and at our "
        "pace, each call after the pause our API leaves before it (from the previous call's "
        "parsed answer to the next call's start: a lower bound), since the emulator answers "
        "slower after an idle spell. So us/peer = paced/peer + (us \u2212 paced)/peer, the "
        "last being what our API adds, in the peer's time. Our DynamoDB wall: the same calls "
        "timed in the API (serialize, send, parse), from untimed requests. "
        f"`{{ __typename }}` over HTTP, p50: us {typename['us']:.2f} ms"
        + (f", peer {peer_typename:.2f} ms." if peer_typename else "."),
        "",
        "| query | us p50 ms | peer p50 ms | DynamoDB alone p50 ms, back to back "
        "| at our pace (pauses ms) | our DynamoDB wall ms | us/peer | paced/peer "
        "| (us \u2212 paced)/peer |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for q in floors["queries"]:
        us, them, alone, paced = q["us_ms"], q["peer_ms"], q["alone_ms"], q["paced_ms"]
        calls = f"{q['calls']} call{'' if q['calls'] == 1 else 's'}"
        shown = f"{alone:.2f} ({calls})" if alone else f"n/a: {q['no_replay']}"
        pauses = ", ".join(f"{p:.2f}" for p in q["pauses_ms"])
        at_pace = f"{paced:.2f} ({pauses})" if paced else "n/a"
        ratios = ["n/a", "n/a", "n/a"]
        if them:
            ratios[0] = f"{us / them:.2f}\u00d7"
            if paced:
                ratios[1:] = [f"{paced / them:.2f}\u00d7", f"{(us - paced) / them:.2f}\u00d7"]
        lines.append(
            f"| {q['name']} | {us:.2f} | {_ms(them, 2)} | {shown} | {at_pace} "
            f"| {_ms(q['wall_ms'], 2)} | {' | '.join(ratios)} |"
        )
    return lines


# -- main ----------------------------------------------------------------------------------


def _on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100, help="timed requests a query a side")
    # Both sides run on JITs (DynamoDB Local's JVM, PostGraphile's V8), and what we compare
    # is their steady state. After 300 requests a query the peer was still getting faster,
    # and we much less: in four back-to-back pairs of runs on 11-28, 2,000 instead of 300
    # took Q4's ratio from 2.74-2.95x to 3.06-3.33x (README, "The runs so far").
    parser.add_argument(
        "--warmup", type=int, default=2000, help="untimed requests a query a side first"
    )
    parser.add_argument("--block", type=int, default=10, help="requests a side before switching")
    parser.add_argument("--workers", type=int, default=4, help="connections that seed")
    parser.add_argument("--no-peer", action="store_true", help="measure our side only")
    parser.add_argument("--clients", type=int, default=16, help="Q1 throughput: clients")
    parser.add_argument("--seconds", type=float, default=10.0, help="Q1 throughput: seconds")
    parser.add_argument(
        "--api-workers", type=int, help="Q1 throughput: serve's workers (default: one per core)"
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
        raise SystemExit(f"make bench-plain: {error}") from None
    mods = peer.modules(folder)
    dataset, httpbench = mods["dataset"], mods["httpbench"]
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
        public_personal_data=True,  # its school is generated: emails as the peer serves them
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
        asyncio.run(admin.create(services.dynamo, settings.table))
        server, port = serve(services)
        t0 = time.monotonic()
        mutations = seeding.seed(port, data, httpbench, args.workers)
        seeded = time.monotonic() - t0
        print(f"seeded {mutations} mutations in {seeded:.1f} s", flush=True)
        # The API's stream reader, in this process, then reads the seeding's records: timed
        # meanwhile, Q1 shared the process and DynamoDB Local with it (its p50 4.1-6.5 ms
        # from run to run, Q3-Q5 steady). Timing starts once it has caught up.
        reader = services.events.reader
        if reader is not None and not live_bench.caught_up(reader):
            print("the stream reader did not catch up with the seeding in 60 s", flush=True)
        clock = CallClock(services.dynamo)
        recorder = RequestRecorder(services.dynamo)

        with ExitStack() as stack:
            running: peer.Running | None = None
            if not unavailable:
                try:
                    running = stack.enter_context(peer.running(mods, node, data))
                except peer.PeerUnavailable as error:
                    unavailable = str(error)
                    print(f"peer unavailable: {unavailable}; measuring our side only", flush=True)
            bench = BenchRun(args, mods, data, targets, school, running)
            result = run(bench, port, clock, folder)
            if not args.no_floors:
                result["floors"] = floors.run(bench, port, recorder, clock, folder)
            if not args.no_throughput:
                result["throughput"] = throughput.run(bench, settings)
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
        asyncio.run(
            services.dynamo.call(
                "DeleteTable", {"TableName": settings.table}, None, missing_table=False
            )
        )
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
            # Which build ran: bench/README.md says how much the builds differ.
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
        raise SystemExit(
            "make bench-plain: live events not delivered as written: " + "; ".join(trouble)
        )


def run(bench: BenchRun, port: int, clock: CallClock, folder: Path) -> dict[str, Any]:
    """Our five queries and the peer's, each answer checked, then timed side by side."""
    args, running, httpbench = bench.args, bench.running, bench.httpbench
    data, targets, school = bench.data, bench.targets, bench.school
    env: dict[str, Any] = dict(running.versions) if running else {}
    ours_client = httpbench.GraphQLClient("127.0.0.1", port)
    theirs_client = httpbench.GraphQLClient("127.0.0.1", running.port) if running else None
    out = []
    for query in bench.queries():
        spec, theirs_spec = query.ours, query.theirs
        ours = Side(port, query.body)
        row: dict[str, Any] = {"name": spec.name, "title": spec.title, "query": spec.query}
        row["check"] = spec.check(ours_client.query(spec.query, spec.variables), school, targets)
        theirs = None
        if running is not None and theirs_client is not None and query.theirs_body is not None:
            theirs = Side(running.port, query.theirs_body)
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
