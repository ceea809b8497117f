"""What DynamoDB alone takes for each query's calls, beside our API and the peer, in one
more interleaved run of `make bench-plain` (bench/plain.py renders it).

Each query's calls are recorded as our API sends them (`calls.RequestRecorder`), then sent
again straight to the emulator from the timed client's process (bench/timed_client.py), with
no API between: back to back, and at the API's pace (each after the pause the API leaves
before it, `calls.pauses`), since DynamoDB Local answers slower after an idle spell.
`{ __typename }` on both sides gives each server's own HTTP and GraphQL floor.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import timed_client
from bench.calls import (
    SAMPLED,
    CallClock,
    RequestRecorder,
    calls_within,
    group,
    pauses,
    record_calls,
    waves,
)
from bench.run import BenchRun

TYPENAME = json.dumps({"query": "{ __typename }"}).encode()


def measure(
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
    its DynamoDB calls sent again straight to the emulator, one after another (back to back,
    and paced as the API sends them), plus `{ __typename }` on both sides (each server's HTTP
    and GraphQL floor). A query whose calls overlap (Q3's Queries) gets no replay: one after
    another they would take longer than the API takes for them."""
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
    # Our requests again, untimed, the clock watching (not on the timed ones: it costs the
    # API CPU): each query's calls as the API makes them, and its pauses between them,
    # which pace a second replay of its calls.
    ours = [sides[row["us"]] for row in rows]
    sampled, calls = clock.calls_of(lambda: timed_client.timed(folder, ours, SAMPLED, 0, SAMPLED))
    within = [calls_within(calls, s["intervals"]) for s in sampled]
    for row, requests_calls in zip(rows, within, strict=True):
        paced = pauses(requests_calls) if "alone" in row else None
        if paced is not None:
            row["pauses"] = paced
            row["paced"] = len(sides)
            sides.append({**sides[row["alone"]], "pauses": paced})
    typename = {"us": len(sides)}
    sides.append({"port": port, "body": TYPENAME.decode()})
    if theirs_port is not None:
        typename["peer"] = len(sides)
        sides.append({"port": theirs_port, "body": TYPENAME.decode()})
    results = timed_client.timed(folder, sides, requests, warmup, block)

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
                "paced_ms": p50(row.get("paced")),
                "pauses_ms": [round(p * 1000, 3) for p in row.get("pauses", [])],
                # The same calls as the API's clock saw them: serialize, send, parse.
                "wall_ms": statistics.median([waves(c)[1] for c in within[i]]),
                "calls": row.get("calls"),
                "no_replay": row.get("no_replay"),
            }
            for i, row in enumerate(rows)
        ],
    }


WARMUP = 50  # both sides are warm by now: the five queries ran before


def run(
    bench: BenchRun, port: int, recorder: RequestRecorder, clock: CallClock, folder: Path
) -> dict[str, Any]:
    """`measure` for the bench's five queries, the peer's beside ours when it runs; prints
    what DynamoDB alone took for each."""
    httpbench, running = bench.httpbench, bench.running
    bodies = [(q.name, q.body, q.theirs_body) for q in bench.queries()]
    floors = measure(
        port,
        running.port if running else None,
        bodies,
        recorder,
        clock,
        folder,
        httpbench,
        bench.args.requests,
        WARMUP,
        bench.args.block,
    )
    alone = ", ".join(
        f"{q['name']} {q['alone_ms']:.2f} ms"
        + (f" ({q['paced_ms']:.2f} ms at our pace)" if q["paced_ms"] else "")
        for q in floors["queries"]
        if q["alone_ms"]
    )
    print(f"DynamoDB alone: {alone}", flush=True)
    return floors
