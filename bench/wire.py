"""Client CPU of one DynamoDB call on the production path (TLS), through the API's client.

Starts DynamoDB Local behind the TLS terminator (stunnel, its CA as AWS_CA_BUNDLE, as
`make bench`), seeds the demo school (seed 11), then measures `Dynamo.call` (aiodynamo's
`send_request` on our wire: SigV4, aiohttp and TLS, orjson, the CRC32 check) with the
project's codec decoding every item, for a class roster Query (21 items) and a BatchGetItem
of 30 students: CPU µs per call of this process, one call in flight and sixteen, the median
of `--rounds` rounds taken in shuffled order.

    .venv/bin/python -m bench.wire [--rounds 5] [--calls 192] [--base main]

With `--base REF`, that ref's `graph_api` is measured too, the sides taking turns round by
round (each round a process of its own, against the same table), so a busy machine weighs
on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from graph_api.model.keys import Kind, node, roster
from graph_api.ops import demo
from graph_api.settings import Settings
from graph_api.store import admin, codec
from graph_api.store.client import LOCAL_CREDENTIALS, Dynamo
from tools import dynamodb_local, tls_terminator

TABLE = "wire-bench"
ROOT = Path(__file__).resolve().parent.parent


async def per_call_us(
    dynamo: Dynamo, operation: str, params: dict[str, Any], calls: int, in_flight: int
) -> float:
    """CPU µs of this process per call, `in_flight` calls at a time, every item decoded."""

    async def one() -> None:
        answer = await dynamo.call(operation, params, None)
        pages = answer["Responses"].values() if "Responses" in answer else [answer["Items"]]
        for page in pages:
            for item in page:
                codec.decode(item)

    started = time.process_time_ns()
    for _ in range(calls // in_flight):
        await asyncio.gather(*(one() for _ in range(in_flight)))
    return (time.process_time_ns() - started) / 1000 / (calls // in_flight * in_flight)


async def measure(
    dynamo: Dynamo, reads: dict[str, tuple[str, dict[str, Any]]], rounds: int, calls: int
) -> dict[tuple[str, int], float]:
    cases = [(name, flight) for name in reads for flight in (1, 16)]
    for name, _ in cases:  # warm: connections open, credentials resolved
        await per_call_us(dynamo, *reads[name], 16, 16)
    samples: dict[tuple[str, int], list[float]] = {case: [] for case in cases}
    for _ in range(rounds):
        random.shuffle(cases)
        for name, flight in cases:
            samples[(name, flight)].append(await per_call_us(dynamo, *reads[name], calls, flight))
    await dynamo.aclose()
    return {case: statistics.median(kept) for case, kept in samples.items()}


def worker(rounds: int, calls: int) -> None:
    """One side's rounds, in this process: the table seeded, the endpoint in the env."""
    dynamo = Dynamo(Settings(table=TABLE, endpoint_url=None, region="us-east-1"))
    reads = reads_of(demo.generate(students=500, seed=11))
    gc.collect()
    gc.freeze()  # the generated school is no collection's work during the rounds
    results = asyncio.run(measure(dynamo, reads, rounds, calls))
    print(json.dumps({f"{name}|{flight}": us for (name, flight), us in results.items()}))


def side(checkout: Path, env: dict[str, str], rounds: int, calls: int) -> dict[str, float]:
    """A round of `worker` run by the `graph_api` of `checkout` (this tree's bench)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.wire", "--worker", f"--rounds={rounds}", f"--calls={calls}"],
        cwd=checkout,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=192)
    parser.add_argument("--base", help="a git ref whose graph_api to measure beside this one")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.rounds, args.calls)
        return

    local = dynamodb_local.start()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            tls = tls_terminator.start(local.endpoint, Path(workdir))
            try:
                sides = {"head": ROOT}
                if args.base:
                    base = Path(workdir) / "base"
                    base.mkdir()
                    archive = subprocess.run(
                        ["git", "archive", args.base, "graph_api"],
                        cwd=ROOT,
                        capture_output=True,
                        check=True,
                    )
                    subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
                    sides["base"] = base
                figures = run_sides(local.endpoint, tls, sides, args.rounds, args.calls)
            finally:
                tls.stop()
    finally:
        local.stop()
    print(f"CPU µs per call, TLS, median of {args.rounds} shuffled rounds of {args.calls} calls")
    names = list(sides)
    print("| call | in flight | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for name in ("Query, 21 items", "BatchGetItem, 30 students"):
        for flight in (1, 16):
            cells = " | ".join(f"{figures[s][f'{name}|{flight}']:,.0f}" for s in names)
            print(f"| {name} | {flight} | {cells} |")


def run_sides(
    endpoint: str, tls: Any, sides: dict[str, Path], rounds: int, calls: int
) -> dict[str, dict[str, float]]:
    """Seed the table, then each side's rounds one at a time, the sides in shuffled turns;
    the median of each side's rounds."""
    env = {
        **os.environ,
        "AWS_CA_BUNDLE": str(tls.ca_bundle),
        "AWS_ACCESS_KEY_ID": LOCAL_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": LOCAL_CREDENTIALS["aws_secret_access_key"],
        "AWS_REGION": "us-east-1",
    }
    seeder = Dynamo(Settings(table=TABLE, endpoint_url=endpoint))
    asyncio.run(admin.create(seeder, TABLE))
    asyncio.run(admin.batch_write(seeder, TABLE, demo.generate(students=500, seed=11)))
    # As production reaches it: AWS_ENDPOINT_URL_DYNAMODB, botocore's credentials.
    env["AWS_ENDPOINT_URL_DYNAMODB"] = tls.endpoint
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for _ in range(rounds):
        order = list(sides)
        random.shuffle(order)
        for name in order:
            samples[name].append(side(sides[name], env, 1, calls))
    return {
        name: {case: statistics.median(r[case] for r in kept) for case in kept[0]}
        for name, kept in samples.items()
    }


def reads_of(items: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    students = [i["id"] for i in items if i.get("type") == "student"][:30]
    keys = [codec.encode(node(Kind.STUDENT, s).as_item()) for s in students]
    batch = {"RequestItems": {TABLE: {"Keys": keys}}}
    rng = roster(Kind.CLASS, "cls-001", Kind.STUDENT)
    query = {
        "TableName": TABLE,
        "KeyConditionExpression": "PK = :pk AND begins_with(SK, :prefix)",
        "ExpressionAttributeValues": {":pk": {"S": rng.pk}, ":prefix": {"S": rng.prefix}},
    }
    return {
        "Query, 21 items": ("Query", query),
        "BatchGetItem, 30 students": ("BatchGetItem", batch),
    }


if __name__ == "__main__":
    main()
