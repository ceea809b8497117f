"""`make bench`'s five queries executed in process, DynamoDB's answers served from memory.

What this measures is GraphQL execution and our own code only: the schema with all its
extensions, the request context, loaders and resolvers, over a `Table` whose reads answer
from the demo school's items kept in memory (no boto3, no threads, no JSON). It prints the
CPU time per request and per resolved field of each query; `make profile` runs it under
py-spy for a flame graph.

    python -m bench.replay                      # all five, 3 s each
    python -m bench.replay --query Q1 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench import queries as peer_queries
from graph_api.graph.auth.tokens import AuthResult
from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import GraphSchema, build_schema
from graph_api.http.hosting import tune_collector
from graph_api.model import keys
from graph_api.model.items import LOCATION_KEYS, TYPE
from graph_api.model.keys import GSI1PK, GSI1SK, PK, SK, Key, Range
from graph_api.ops import demo
from graph_api.settings import Settings
from graph_api.store import codec
from graph_api.store.codec import Item
from graph_api.store.ledger import Ledger
from graph_api.store.loaders import Loaders
from graph_api.store.retry import RetryBudget
from graph_api.store.table import Page, Table, key_names

STUDENTS = 500  # the size of the peer's school
SEED = 11


class _NoClient:
    """Stands in for `Dynamo`: a MemoryTable never calls DynamoDB, so it never retries."""

    budget = RetryBudget()


class MemoryTable(Table):
    """A `Table` whose reads answer from items in memory, in DynamoDB's key order.

    Each read counts one request in the ledger, as the real one would (one wave of
    BatchGetItem below 100 keys, one Query per page).
    """

    def __init__(self, store: MemoryStore, ledger: Ledger) -> None:
        super().__init__(_NoClient(), "memory", ledger=ledger)  # type: ignore[arg-type]
        self.store = store

    def _count(self) -> None:
        if self.ledger is not None:
            self.ledger.requests += 1

    async def get(self, key: Key, *, consistent: bool = False) -> Item | None:
        self._count()
        return self.store.items.get(key)

    async def call(self, operation: str, params: dict[str, Any], *, recorded: bool = True) -> Any:
        """The one call made outside the reads above: a GetItem by key (`store/layout.py`)."""
        if operation != "GetItem":
            raise NotImplementedError(f"a MemoryTable answers no {operation}")
        if recorded:
            self._count()
        wanted = codec.decode(params["Key"])
        item = self.store.items.get(Key(wanted[PK], wanted[SK]))
        return {"Item": codec.encode(item)} if item is not None else {}

    async def get_many(
        self,
        keys: Iterable[Key],
        *,
        consistent: bool = False,
        attributes: frozenset[str] | None = None,
    ) -> dict[Key, Item]:
        self._count()
        items = self.store.items
        found = {key: items[key] for key in keys if key in items}
        if attributes is None:
            return found
        kept = attributes | {PK, SK}  # as a ProjectionExpression answers (`Table.get_many`)
        return {key: {k: v for k, v in item.items() if k in kept} for key, item in found.items()}

    async def query(
        self,
        rng: Range,
        *,
        limit: int | None = None,
        start: dict[str, str] | None = None,
        consistent: bool = False,
        forward: bool = True,
    ) -> Page:
        self._count()
        sort_keys, items = self.store.partition(rng.index, rng.pk)
        lo = bisect.bisect_left(sort_keys, rng.prefix)
        hi = bisect.bisect_left(sort_keys, rng.prefix + "\U0010ffff")
        if not forward:  # ScanIndexForward: false, from `start` (or the end) backward
            if start:
                hi = min(hi, bisect.bisect_left(sort_keys, start[rng.sk_name]))
            begin = lo if limit is None else max(lo, hi - limit)
            back = items[begin:hi][::-1]
            more = limit is not None and begin > lo and back
            last = {name: back[-1][name] for name in key_names(rng.index)} if more else None
            return Page(back, last)
        if start:
            lo = max(lo, bisect.bisect_right(sort_keys, start[rng.sk_name]))
        end = hi if limit is None else min(hi, lo + limit)
        page = items[lo:end]
        last = None
        if limit is not None and end < hi and page:
            last = {name: page[-1][name] for name in key_names(rng.index)}
        return Page(page, last)


class MemoryStore:
    """The demo school's items by key, and each partition of the table and GSI1 sorted."""

    def __init__(self, items: list[Item]) -> None:
        self.items = {Key(item[PK], item[SK]): item for item in items}
        groups: dict[tuple[str | None, str], list[tuple[str, Item]]] = defaultdict(list)
        for item in items:
            groups[(None, item[PK])].append((item[SK], item))
            if all(name in item for name in LOCATION_KEYS):
                groups[(keys.GSI1, item[GSI1PK])].append((item[GSI1SK], item))
        self.partitions = {
            where: ([k for k, _ in sorted_], [i for _, i in sorted_])
            for where, rows in groups.items()
            for sorted_ in [sorted(rows, key=lambda row: row[0])]
        }

    def partition(self, index: str | None, pk: str) -> tuple[list[str], list[Item]]:
        return self.partitions.get((index, pk), ([], []))


def pick_targets(items: list[Item]) -> dict[str, Any]:
    """Targets like the peer's: the first 30 students, the largest class, teacher and sport,
    the most populous state."""
    nodes: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        if item.get(TYPE) and item[PK] == item[SK]:
            nodes[item[TYPE]].append(item)
    enrolled: dict[str, int] = defaultdict(int)  # a class's (sport's) count is in shards: its edges
    for item in items:
        if item.get(TYPE) == "enrolment":
            enrolled[item["classId"]] += 1
        elif item.get(TYPE) == "membership":
            enrolled[item["sportId"]] += 1
    students = sorted(nodes["student"], key=lambda s: s["id"])
    states: dict[tuple[str, str], int] = defaultdict(int)
    for student in students:
        home = student.get("home")
        if home:
            states[(home["country"], home["state"])] += 1
    country, state = max(states, key=lambda place: states[place])
    return {
        "q1_student_ids": [s["id"] for s in students[:30]],
        "q2_class_id": max(nodes["class"], key=lambda c: enrolled[c["id"]])["id"],
        "q3_teacher_id": max(nodes["teacher"], key=lambda t: len(t.get("classes") or {}))["id"],
        "q4_sport_id": max(nodes["sport"], key=lambda s: enrolled[s["id"]])["id"],
        "q5_country": country,
        "q5_state": state,
    }


@dataclass(frozen=True)
class Replay:
    name: str
    query: str
    variables: dict[str, Any]


def replays(targets: dict[str, Any]) -> list[Replay]:
    return [
        Replay("Q1", peer_queries.Q1, {"ids": targets["q1_student_ids"]}),
        Replay("Q2", peer_queries.Q2, {"id": targets["q2_class_id"]}),
        Replay("Q3", peer_queries.Q3, {"id": targets["q3_teacher_id"]}),
        Replay("Q4", peer_queries.Q4, {"id": targets["q4_sport_id"]}),
        Replay(
            "Q5", peer_queries.Q5, {"country": targets["q5_country"], "state": targets["q5_state"]}
        ),
    ]


def count_fields(value: Any) -> int:
    """Resolved fields of an answer: every key of every object in it."""
    if isinstance(value, dict):
        return len(value) + sum(count_fields(inner) for inner in value.values())
    if isinstance(value, list):
        return sum(count_fields(inner) for inner in value)
    return 0


class Harness:
    def __init__(self, students: int = STUDENTS, seed: int = SEED) -> None:
        items = demo.generate(students=students, seed=seed)
        self.store = MemoryStore(items)
        self.targets = pick_targets(items)
        # As `make bench` serves: personal data private, no auth, the default limits.
        settings = Settings(cursor_secret=b"replay", endpoint_url="http://127.0.0.1:9")
        self.services = Services.create(settings)
        self.schema: GraphSchema = build_schema(settings)

    def context(self) -> Context:
        ledger = Ledger()
        table = MemoryTable(self.store, ledger)
        return Context("replay", self.services, ledger, table, Loaders(table), AuthResult())

    async def run(self, replay: Replay) -> dict[str, Any]:
        result = await self.schema.execute(
            replay.query, variable_values=replay.variables, context_value=self.context()
        )
        if result.errors:
            raise RuntimeError(f"{replay.name}: {[e.formatted for e in result.errors]}")
        assert isinstance(result.data, dict)
        return result.data

    async def measure(self, replay: Replay, seconds: float, rounds: int = 5) -> dict[str, Any]:
        """CPU per request, the best of `rounds` rounds: the machine is shared, and the least
        disturbed round is the closest to what the code costs."""
        fields = count_fields(await self.run(replay))  # warm: parser and validation caches
        best, runs = float("inf"), 0
        for _ in range(rounds):
            count, started, cpu = 0, time.perf_counter(), time.process_time()
            while time.perf_counter() - started < seconds / rounds or count < 3:
                await self.run(replay)
                count += 1
            best = min(best, (time.process_time() - cpu) / count)
            runs += count
        return {
            "query": replay.name,
            "runs": runs,
            "fields": fields,
            "cpu_ms": round(best * 1e3, 3),
            "us_per_field": round(best * 1e6 / fields, 2),
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", action="append", help="Q1..Q5 (repeatable; default: all)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per query")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    args = parser.parse_args(argv)
    harness = Harness()
    tune_collector()  # as `graph-api serve` does once its services are built
    chosen = [r for r in replays(harness.targets) if not args.query or r.name in args.query]

    async def run_all() -> list[dict[str, Any]]:
        return [await harness.measure(replay, args.seconds) for replay in chosen]

    results = asyncio.run(run_all())
    if args.json:
        for row in results:
            print(json.dumps(row))
        return
    print("| query | CPU ms / request | resolved fields | µs / field | runs |")
    print("|---|---:|---:|---:|---:|")
    for row in results:
        print(
            f"| {row['query']} | {row['cpu_ms']:.2f} | {row['fields']} |"
            f" {row['us_per_field']:.1f} | {row['runs']} |"
        )


if __name__ == "__main__":
    main()
