"""Live events for `make bench-plain`: write-to-event latency with 1,000 subscriptions on one
instance, what reading the change stream costs with 1 subscriber and with 1,000, and what
resolving each subscriber's selection costs.

The API is the bench's own in-process server (uvicorn on a thread, `bench.naive.serve`), so
the stream reader's request counter (`StreamReader.requests`) and the hub's size are read
directly: no app hook, no log to scrape. The subscribers run in a child process (`python -m
bench.live subscribers`: graphql-transport-ws connections on websockets' asyncio
client), so that parsing thousands of events does not take the server's GIL. Both processes
time with `time.monotonic()`, CLOCK_MONOTONIC on Linux: one clock for the whole machine.

Each phase connects its subscriptions, waits until the hub holds them all, sends the writes
through the API one at a time (enrolments, unenrolments, renames, spaced 0.6-1.4x the mean
so that they neither fall into one GetRecords batch nor lock onto the reader's 0.25 s poll),
then waits for every expected event. What each write must reach is computed from the
dataset and the writes before it; each subscription's events arrive in stream order, so its
k-th event answers the k-th write that concerns it, and its content (joined/left, which
student, the new name) is checked against that write. Missing, extra and mismatched events
are counted and printed before any latency.

    python -m bench.live            # alone: DynamoDB Local, the peer's dataset seeded
    python -m bench.live --table T  # on a table a bench's seeding made (dev)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import http.client
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson

# graph_api and the other tools are imported where they are used: the subscribers' child
# process imports this module too, and needs only websockets and orjson.
if TYPE_CHECKING:
    from bench.queries import School
    from graph_api.events.reader import StreamReader
    from graph_api.graph.engine.context import Services

ROOT = Path(__file__).resolve().parent.parent
TARGET_P95_MS = 1000.0  # issue 15: p95 write-to-event latency on DynamoDB Local
ANY = "*"  # an expected value that is not checked (a name read after a later write)
# After the last write, the reader has read every record well within this (it polls an
# idle shard every 0.25 s): its requests are counted over the writes and this much after.
READER_SETTLE_SECONDS = 1.5
# After every expected event arrived, wait this long for repeats before disconnecting.
REPEAT_GRACE_SECONDS = 1.0

# Selections: what a class page, a roster widget and a student page would ask for.
COUNT = "kind enrolment { kind studentId } class { studentCount }"
CLASS_PAGE = (
    "kind enrolment { kind studentId student { name } } class { subject studentCount"
    " teacher { name } }"
)
ROSTER = "kind studentId student { name } class { studentCount }"
STUDENT = "kind student { name classes { totalCount } }"


@dataclasses.dataclass(frozen=True, slots=True)
class Sub:
    """One subscription: its topic (`class:c001`, `roster:c001`, `student:s0001`) and
    the graphql-transport-ws id and document it is sent with."""

    id: str
    topic: str
    selection: str

    @property
    def query(self) -> str:
        kind, node = self.topic.split(":")
        field, arg = {
            "class": ("classChanged", "id"),
            "roster": ("rosterChanged", "classId"),
            "student": ("studentChanged", "id"),
        }[kind]
        return f'subscription {{ {field}({arg}: "{node}") {{ {self.selection} }} }}'


@dataclasses.dataclass(frozen=True, slots=True)
class Write:
    kind: str  # enrol, unenrol, rename
    student: str
    klass: str = ""
    name: str = ""

    def request(self) -> tuple[str, dict[str, Any]]:
        if self.kind == "rename":
            return (
                "mutation($s: ID!, $n: String!) { updateStudent(id: $s, input: {name: $n})"
                " { userErrors { code message } } }",
                {"s": self.student, "n": self.name},
            )
        field = "enrollStudent" if self.kind == "enrol" else "unenrollStudent"
        return (
            f"mutation($s: ID!, $c: ID!) {{ {field}(studentId: $s, classId: $c)"
            " { userErrors { code message } } }",
            {"s": self.student, "c": self.klass},
        )


Sig = tuple[str, str | None]  # what an event says: (kind, student id or name)


# -- the plan: subscriptions and writes ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Plan:
    hot: list[str]  # classes the writes enrol in, hot[0] the one with 100 counting subscribers
    subs: list[Sub]
    pairs: list[tuple[str, str]]  # (student, class) enrolled, then unenrolled
    order: list[tuple[str, int]]  # ("enrol"|"unenrol", pair) or ("rename", student index)
    renamed: list[str]


def make_plan(school: School, hot0: str, total: int, writes: int, seed: int = 15) -> Plan:
    """A deterministic mix of `total` subscriptions and the skeleton of `writes` writes."""
    rng = random.Random(seed)
    by_size = sorted(school.klass, key=lambda c: (-len(school.roster[c]), c))
    hot = [hot0, *[c for c in by_size if c != hot0][:4]]
    cold = [c for c in sorted(school.klass) if c not in hot]
    renames = writes // 5
    pair_count = (writes - renames) // 2
    renames = writes - 2 * pair_count
    students = sorted(school.student)
    writers = rng.sample(students, max(pair_count, renames))
    pairs = []
    for i, student in enumerate(writers[:pair_count]):
        free = [c for c in hot[i % len(hot) :] + hot if c not in school.classes_of[student]]
        pairs.append((student, free[0]))
    renamed = writers[:renames]
    others = [s for s in students if s not in writers]
    rng.shuffle(others)

    # Shares of 1,000: a class page watched by 100 (one id, the same selection), class
    # pages and rosters of the written classes, quiet classes and students that only hear
    # renames or nothing, and the written students' own pages, several each.
    groups: list[tuple[int, list[str], str]] = [
        (100, [f"class:{hot[0]}"], COUNT),
        (100, [f"class:{c}" for c in hot[1:]], CLASS_PAGE),
        (110, [f"class:{c}" for c in cold], COUNT),
        (200, [f"roster:{c}" for c in hot], ROSTER),
        (90, [f"roster:{c}" for c in cold], ROSTER),
        (200, [f"student:{s}" for s in writers], STUDENT),
        (200, [f"student:{s}" for s in others], STUDENT),
    ]
    subs: list[Sub] = []
    for share, topics, selection in groups:
        count = total * share // 1000
        subs += [Sub("", topics[i % len(topics)], selection) for i in range(count)]
    while len(subs) < total:  # what rounding left: students nobody else watches
        subs.append(Sub("", f"student:{others[len(subs) % len(others)]}", STUDENT))
    rng.shuffle(subs)  # every connection carries a mix, as a client with several widgets
    subs = [dataclasses.replace(sub, id=str(i)) for i, sub in enumerate(subs)]

    tokens = [("pair", i) for i in range(pair_count) for _ in range(2)]
    tokens += [("rename", i) for i in range(renames)]
    rng.shuffle(tokens)
    seen: set[int] = set()
    order = []
    for kind, i in tokens:  # a pair's first token enrols, its second unenrols
        if kind == "rename":
            order.append(("rename", i))
        else:
            order.append(("unenrol" if i in seen else "enrol", i))
            seen.add(i)
    return Plan(hot, subs, pairs, order, renamed)


def writes_of(plan: Plan, school: School, tag: str) -> list[Write]:
    """The writes of one phase; renames take names no earlier run or phase used."""
    out = []
    for n, (kind, i) in enumerate(plan.order):
        if kind == "rename":
            student = plan.renamed[i]
            name = f"{school.student[student]['name']} ({tag}{n})"
            out.append(Write("rename", student, name=name))
        else:
            student, klass = plan.pairs[i]
            out.append(Write(kind, student, klass))
    return out


def expected(
    writes: Sequence[Write], subs: Sequence[Sub], school: School
) -> dict[str, list[tuple[int, Sig]]]:
    """Per subscription, the writes it must hear of, in order, with what each event says."""
    by_topic: dict[str, list[str]] = defaultdict(list)
    for sub in subs:
        by_topic[sub.topic].append(sub.id)
    classes: dict[str, set[str]] = defaultdict(set)
    for student, ids in school.classes_of.items():
        classes[student] = set(ids)
    out: dict[str, list[tuple[int, Sig]]] = {sub.id: [] for sub in subs}
    for n, write in enumerate(writes):
        s = write.student
        events: list[tuple[str, Sig]]
        if write.kind == "rename":
            # The student's page, and every class whose roster shows the name.
            events = [(f"student:{s}", ("UPDATED", write.name))]
            events += [(f"class:{c}", ("UPDATED", None)) for c in sorted(classes[s])]
        else:
            joined = write.kind == "enrol"
            (classes[s].add if joined else classes[s].discard)(write.klass)
            kind = "JOINED" if joined else "LEFT"
            events = [
                (f"class:{write.klass}", (kind, s)),
                (f"roster:{write.klass}", (kind, s)),
                (f"student:{s}", ("UPDATED", ANY)),  # its name: whatever it is when read
            ]
        for topic, sig in events:
            for sub_id in by_topic.get(topic, ()):
                out[sub_id].append((n, sig))
    return out


# -- the subscribers' process --------------------------------------------------------------


def _signature(field: str, data: dict[str, Any]) -> Sig:
    if field == "classChanged":
        enrolment = data.get("enrolment")
        if enrolment:
            return str(enrolment["kind"]), str(enrolment["studentId"])
        return str(data["kind"]), None
    if field == "rosterChanged":
        return str(data["kind"]), str(data["studentId"])
    return str(data["kind"]), (data.get("student") or {}).get("name")


async def _subscribers(url: str, connections: list[list[dict[str, str]]]) -> None:
    """Open the connections, subscribe, then print each event as one JSON line
    `[id, arrival, kind, detail, requests]` (errors as `["!", id, message]`) until stdin
    says stop."""
    from websockets.asyncio.client import ClientConnection, connect
    from websockets.typing import Subprotocol

    def emit(value: Any) -> None:
        sys.stdout.write(orjson.dumps(value).decode() + "\n")
        sys.stdout.flush()

    async def read(ws: ClientConnection) -> None:
        async for raw in ws:
            arrived = time.monotonic()
            message = orjson.loads(raw)
            kind = message.get("type")
            if kind == "next":
                payload = message["payload"]
                if payload.get("errors"):
                    emit(["!", message["id"], json.dumps(payload["errors"])[:300]])
                    continue
                ((field, data),) = payload["data"].items()
                requests = ((payload.get("extensions") or {}).get("dynamodb") or {}).get("requests")
                emit([message["id"], arrived, *_signature(field, data), requests])
            elif kind == "ping":
                await ws.send('{"type":"pong"}')
            elif kind in ("error", "complete"):
                emit(["!", message.get("id"), f"{kind}: {message.get('payload')}"])

    sockets: list[ClientConnection] = []
    try:
        for subs in connections:
            # proxy=None: a proxy in the environment must not carry loopback traffic.
            ws = await connect(url, subprotocols=[Subprotocol("graphql-transport-ws")], proxy=None)
            sockets.append(ws)
            await ws.send('{"type":"connection_init"}')
            ack = orjson.loads(await ws.recv())
            if ack.get("type") != "connection_ack":
                raise RuntimeError(f"no connection_ack: {ack}")
            for sub in subs:
                message = {"id": sub["id"], "type": "subscribe", "payload": {"query": sub["query"]}}
                await ws.send(orjson.dumps(message).decode())
        readers = [asyncio.create_task(read(ws)) for ws in sockets]
        emit({"ready": sum(len(subs) for subs in connections)})
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    finally:
        for ws in sockets:
            await ws.close()
    for task in readers:
        task.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    emit({"done": True})


class Subscribers:
    """The subscribers' child process, seen from the bench: their events as they arrive."""

    def __init__(self, url: str, subs: Sequence[Sub], per_connection: int) -> None:
        connections = [
            [{"id": s.id, "query": s.query} for s in subs[i : i + per_connection]]
            for i in range(0, len(subs), per_connection)
        ]
        self.events: list[tuple[str, float, str, str | None, int | None]] = []
        self.errors: list[str] = []
        self.ready = False
        self._changed = threading.Condition()
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.live", "subscribers", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=ROOT,
        )
        assert self.process.stdin is not None
        self.process.stdin.write(orjson.dumps(connections) + b"\n")
        self.process.stdin.flush()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            value = orjson.loads(line)
            with self._changed:
                if isinstance(value, dict):
                    self.ready = self.ready or "ready" in value
                elif value[0] == "!":
                    self.errors.append(f"subscription {value[1]}: {value[2]}")
                else:
                    self.events.append(tuple(value))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait(self, condition: Callable[[], bool], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        with self._changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not condition()):
                    return condition()
                self._changed.wait(min(left, 0.5))
            return True

    def arrivals(self) -> list[tuple[str, float, str, str | None, int | None]]:
        with self._changed:
            return list(self.events)

    def failure(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process.poll() is None and self.process.stdin is not None:
            try:
                self.process.stdin.write(b"stop\n")
                self.process.stdin.flush()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        self._pump.join(timeout=10)
        self._log.close()


# -- one phase ---------------------------------------------------------------------------


class CallCounter:
    """Every HTTP request the API's DynamoDB client sends, by operation: a cross-check of
    the events' own `extensions.dynamodb.requests`, counted where nothing can hide."""

    def __init__(self, dynamo: Any) -> None:
        self.counts: Counter[str] = Counter()
        dynamo.register("before-send.dynamodb", self._count)  # every event loop's client

    def _count(self, event_name: str, **_: Any) -> None:
        self.counts[event_name.rsplit(".", 1)[-1]] += 1  # += on a Counter: GIL-atomic enough

    def snapshot(self) -> Counter[str]:
        return Counter(self.counts)


def _percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)] if ordered else float("nan")


@dataclasses.dataclass
class Sent:
    """The writes as sent: when each request left (monotonic s), what each took."""

    at: list[float] = dataclasses.field(default_factory=list)
    ms: list[float] = dataclasses.field(default_factory=list)
    requests: int = 0  # the mutations' own DynamoDB requests (extensions.dynamodb)


def send(port: int, writes: Sequence[Write], spacing: float, rng: random.Random) -> Sent:
    """The writes through the API, one at a time on one keep-alive connection, each
    `spacing` x 0.6-1.4 after the one before was sent (or as soon as it answered)."""
    out = Sent()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    next_at = time.monotonic()
    try:
        for write in writes:
            time.sleep(max(0.0, next_at - time.monotonic()))
            query, variables = write.request()
            body = json.dumps({"query": query, "variables": variables})
            # Timed from just before the request: the latency a writer would see, the
            # commit being somewhere inside it (its own time is reported beside).
            t0 = time.monotonic()
            conn.request("POST", "/graphql", body, {"content-type": "application/json"})
            answer = json.loads(conn.getresponse().read())
            out.ms.append((time.monotonic() - t0) * 1000)
            out.at.append(t0)
            payload = next(iter((answer.get("data") or {}).values()), None) or {}
            if answer.get("errors") or payload.get("userErrors"):
                raise RuntimeError(f"{write}: {answer}")
            out.requests += answer["extensions"]["dynamodb"]["requests"]
            next_at = t0 + rng.uniform(0.6 * spacing, 1.4 * spacing)
    finally:
        conn.close()
    return out


def run_phase(
    services: Services,
    port: int,
    counter: CallCounter,
    subs: Sequence[Sub],
    writes: Sequence[Write],
    school: School,
    *,
    per_connection: int,
    spacing: float,
    drain_seconds: float,
    rng: random.Random,
    dynamodb_pid: int | None,
) -> dict[str, Any]:
    events, reader = services.events, services.events.reader
    if reader is None:
        raise RuntimeError("the API runs no stream reader")
    want = expected(writes, subs, school)
    total = sum(len(v) for v in want.values())
    if not caught_up(reader):
        raise RuntimeError(
            "the stream reader is not reading the table's stream, or never catches up (an "
            "endpoint in AWS_ENDPOINT_URL_DYNAMODB wants AWS_ENDPOINT_URL_DYNAMODB_STREAMS too)"
        )
    began = time.monotonic()
    subscribers = Subscribers(f"ws://127.0.0.1:{port}/graphql", subs, per_connection)
    try:
        ok = subscribers.wait(lambda: subscribers.ready, 60) and _until(
            lambda: events.hub.size == len(subs), 30
        )
        if not ok or subscribers.errors:
            raise RuntimeError(
                f"{len(subs)} subscriptions not in place (hub: {events.hub.size}): "
                f"{subscribers.errors[:3]} {subscribers.failure()}"
            )
        connected = time.monotonic() - began
        from bench.proc import cpu_seconds

        others = [subscribers.process.pid, *([dynamodb_pid] if dynamodb_pid else [])]
        cpu_before = [time.process_time(), *(cpu_seconds([pid]) for pid in others)]
        reader_before, calls_before = Counter(reader.requests), counter.snapshot()
        start = time.monotonic()
        sent = send(port, writes, spacing, rng)
        last = time.monotonic()
        time.sleep(READER_SETTLE_SECONDS)
        reader_window = time.monotonic() - start
        reader_requests = Counter(reader.requests)
        reader_requests.subtract(reader_before)
        drained = subscribers.wait(lambda: len(subscribers.events) >= total, drain_seconds)
        if drained:
            time.sleep(REPEAT_GRACE_SECONDS)
        drain = time.monotonic() - last
        cpu_after = [time.process_time(), *(cpu_seconds([pid]) for pid in others)]
        calls = counter.snapshot()
        calls.subtract(calls_before)
    finally:
        subscribers.stop()
    _until(lambda: events.hub.size == 0, 30)  # the server let go of every subscription
    score = _score(want, subscribers.arrivals(), sent.at, subs)
    cpu = [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
    # The reader's lease writes go through a DynamoDB client of its own (events.live), so
    # what the API's client sent is the mutations' and the events'.
    return {
        "subscriptions": len(subs),
        "connections": math.ceil(len(subs) / per_connection),
        "writes": len(writes),
        "write_kinds": dict(Counter(w.kind for w in writes)),
        "connect_seconds": connected,
        "writes_seconds": last - start,
        "seconds": time.monotonic() - began,
        "expected": total,
        **score,
        "errors": subscribers.errors[:10],
        "drained": drained,
        "drain_seconds": drain,
        "mutation_ms": {"p50": _percentile(sent.ms, 0.5), "p95": _percentile(sent.ms, 0.95)},
        "cpu_seconds": {
            "api": cpu[0],  # this process: the API, and the bench's sender
            "subscribers": cpu[1],
            **({"dynamodb_local": cpu[2]} if dynamodb_pid else {}),
        },
        "reader": {"seconds": reader_window, "requests": dict(+reader_requests)},
        "resolution": {
            **score.pop("resolution"),
            "client_requests": sum(calls.values()) - sent.requests,
            "client_operations": dict(+calls),
            "mutation_requests": sent.requests,
        },
    }


def _score(
    want: dict[str, list[tuple[int, Sig]]],
    arrived: list[tuple[str, float, str, str | None, int | None]],
    sent: list[float],
    subs: Sequence[Sub],
) -> dict[str, Any]:
    """Each subscription's events against the writes it should have heard of, in order:
    lost, extra, wrong, and the latency of each right one."""
    got: dict[str, list[tuple[float, Sig, int | None]]] = defaultdict(list)
    for sub_id, at, kind, detail, requests in arrived:
        got[sub_id].append((at, (kind, detail), requests))
    hot0 = _most_watched_class(subs)
    sub_of = {sub.id: sub for sub in subs}
    latencies: list[float] = []
    by_write: dict[int, list[float]] = defaultdict(list)
    lost = extra = wrong = 0
    worst: tuple[float, int, str] = (0.0, -1, "")
    resolution: dict[tuple[str, str], list[int]] = defaultdict(list)
    for sub_id, wanted in want.items():
        heard = got.get(sub_id, [])
        lost += max(0, len(wanted) - len(heard))
        extra += max(0, len(heard) - len(wanted))
        for (n, sig), (at, said, requests) in zip(wanted, heard, strict=False):
            if sig[0] != said[0] or (sig[1] != ANY and sig[1] != said[1]):
                wrong += 1
                continue
            latency = (at - sent[n]) * 1000
            latencies.append(latency)
            by_write[n].append(latency)
            worst = max(worst, (latency, n, sub_of[sub_id].topic))
            if requests is not None:
                resolution[_group(sub_of[sub_id], hot0)].append(requests)
    watchers = Counter(_group(sub, hot0) for sub in subs)
    firsts = [min(v) for v in by_write.values()]
    lasts = [max(v) for v in by_write.values()]
    return {
        "delivered": len(latencies),
        "lost": lost,
        "extra": extra,
        "wrong": wrong,
        "latency_ms": {
            "p50": _percentile(latencies, 0.5),
            "p95": _percentile(latencies, 0.95),
            "max": max(latencies, default=float("nan")),
            "worst": {"ms": worst[0], "write": worst[1], "topic": worst[2]},
            # Per write: its first subscriber (the pipeline) and its last (the fan-out).
            "first_p50": _percentile(firsts, 0.5),
            "last_p50": _percentile(lasts, 0.5),
        },
        "resolution": {
            "by_group": [
                {
                    "subscriptions": field,
                    "selection": selection,
                    "count": watchers[(field, selection)],
                    "events": len(values),
                    "requests": sum(values),
                }
                for (field, selection), values in sorted(resolution.items())
            ],
            "events_requests": sum(sum(v) for v in resolution.values()),
        },
    }


def caught_up(reader: StreamReader, quiet: float = 1.0, seconds: float = 60.0) -> bool:
    """Reading, and nothing published for `quiet` s: what was written before a phase (the
    seeding, a run before) is not heard during it."""
    deadline = time.monotonic() + seconds
    if not _until(lambda: reader.reading.is_set(), seconds):  # its lease may take 10 s
        return False
    while time.monotonic() < deadline:
        published = reader.published
        time.sleep(quiet)
        if reader.published == published and reader.reading.is_set():
            return True
    return False


def _most_watched_class(subs: Sequence[Sub]) -> str:
    """The class watched by the most `classChanged` subscribers (the plan's hot[0])."""
    counts = Counter(s.topic for s in subs if s.topic.startswith("class:"))
    return counts.most_common(1)[0][0] if counts else ""


def _group(sub: Sub, hot0: str) -> tuple[str, str]:
    """(subscriptions, selection) for the resolution table: the most watched class alone."""
    field = {"class": "classChanged", "roster": "rosterChanged", "student": "studentChanged"}
    kind, node = sub.topic.split(":")
    return (f"{field[kind]}({node})" if sub.topic == hot0 else field[kind]), sub.selection


def _until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# -- both phases ---------------------------------------------------------------------------


def run(
    services: Services,
    port: int,
    school: School,
    targets: dict[str, Any],
    *,
    writes: int = 100,
    connections: int = 10,
    per_connection: int = 100,
    spacing: float = 0.2,
    drain_seconds: float = 20.0,
    dynamodb_pid: int | None = None,
) -> dict[str, Any]:
    """1 subscription, then `connections` x `per_connection`, each hearing the same writes."""
    if per_connection > services.settings.max_subscriptions_per_connection:
        raise SystemExit(
            f"--live-per-connection {per_connection} is above the server's limit of "
            f"{services.settings.max_subscriptions_per_connection} a websocket"
        )
    plan = make_plan(school, targets["q2_class_id"], connections * per_connection, writes)
    counter = CallCounter(services.dynamo)
    tag = os.urandom(2).hex()  # names this run's renames give are new to the table
    phases = []
    for label, subs in (
        ("a", [Sub("0", f"class:{plan.hot[0]}", COUNT)]),
        ("b", plan.subs),
    ):
        phase = run_phase(
            services,
            port,
            counter,
            subs,
            writes_of(plan, school, f"{tag}{label}"),
            school,
            per_connection=per_connection,
            spacing=spacing,
            drain_seconds=drain_seconds,
            rng=random.Random(7),  # the same gaps in both phases
            dynamodb_pid=dynamodb_pid,
        )
        print(_progress(phase), flush=True)
        phases.append(phase)
    return {
        "hot_classes": plan.hot,
        "spacing_s": spacing,
        "target_p95_ms": TARGET_P95_MS,
        "phases": phases,
    }


def _progress(phase: dict[str, Any]) -> str:
    lat = phase["latency_ms"]
    return (
        f"live events, {phase['subscriptions']} subscription(s): {phase['delivered']} of "
        f"{phase['expected']} events (lost {phase['lost']}, extra {phase['extra']}, wrong "
        f"{phase['wrong']}), p50 {_ms(lat['p50'])} ms, p95 {_ms(lat['p95'])} ms"
    )


def problems(result: dict[str, Any]) -> list[str]:
    """What went wrong with delivery, one line each: a bench that loses events says so."""
    out = []
    for phase in result["phases"]:
        bad = {k: phase[k] for k in ("lost", "extra", "wrong") if phase[k]}
        if bad or phase["errors"]:
            out.append(
                f"with {phase['subscriptions']} subscription(s), of {phase['expected']} "
                "expected events: "
                + ", ".join(f"{v} {k}" for k, v in bad.items())
                + (f"; errors: {phase['errors'][:3]}" if phase["errors"] else "")
            )
    return out


# -- report ------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return "n/a" if value != value else f"{value:.0f}"


def render(result: dict[str, Any]) -> str:
    phases = result["phases"]
    b = phases[-1]
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(b["write_kinds"].items()))
    target = result["target_p95_ms"]
    lines = [
        "",
        f"Live events: graphql-transport-ws subscriptions to the same API (in this process, "
        f"its stream reader polling DynamoDB Local), held by a child process: 1, then "
        f"{b['subscriptions']:,} on {b['connections']} websockets. Each phase sends the same "
        f"{b['writes']} writes through the API ({kinds}; enrolments in "
        f"{', '.join(result['hot_classes'])}), one every {0.6 * result['spacing_s']:.2f}-"
        f"{1.4 * result['spacing_s']:.2f} s. Latency: from just before the mutation's "
        "request is sent to the event's arrival at each subscriber that should get it; "
        "every expected event is checked to arrive once, in order, saying the right thing.",
        "",
        "| subscriptions | events expected | delivered once | lost | repeated | wrong "
        "| p50 ms | p95 ms | target p95 | max ms | a write's first / last subscriber p50 ms "
        "| mutation p50 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for phase in phases:
        lat = phase["latency_ms"]
        bad = phase["lost"] or phase["extra"] or phase["wrong"]
        p95 = _ms(lat["p95"]) + (" **over**" if lat["p95"] > target else "")
        lines.append(
            f"| {phase['subscriptions']:,} | {phase['expected']:,} | {phase['delivered']:,} "
            f"| {_loud(phase['lost'])} | {_loud(phase['extra'])} | {_loud(phase['wrong'])} "
            f"| {_ms(lat['p50'])} | {p95}{' (of those delivered)' if bad else ''} "
            f"| ≤ {target:.0f} | {_ms(lat['max'])} "
            f"| {_ms(lat['first_p50'])} / {_ms(lat['last_p50'])} "
            f"| {_ms(phase['mutation_ms']['p50'])} |"
        )
    lines += [
        "",
        "Stream reading: the reader's own DynamoDB requests (`StreamReader.requests`) from "
        f"the first write to {READER_SETTLE_SECONDS} s after the last, and the CPU each "
        "process spent from the first write until every event had arrived.",
        "",
        "| subscriptions | seconds | GetRecords | GetShardIterator | DescribeStream "
        "| DescribeTable | checkpoints | other lease writes | reader requests a write "
        "| CPU s: API / subscribers / DynamoDB Local |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for phase in phases:
        r = phase["reader"]["requests"]
        lease = sum(v for k, v in r.items() if k.startswith("UpdateItem:"))
        checkpoints = r.get("UpdateItem:checkpoint", 0)
        cpu = phase["cpu_seconds"]
        local = cpu.get("dynamodb_local")
        lines.append(
            f"| {phase['subscriptions']:,} | {phase['reader']['seconds']:.1f} "
            f"| {r.get('GetRecords', 0)} | {r.get('GetShardIterator', 0)} "
            f"| {r.get('DescribeStream', 0)} | {r.get('DescribeTable', 0)} | {checkpoints} "
            f"| {lease - checkpoints} | {sum(r.values()) / phase['writes']:.2f} "
            f"| {cpu['api']:.1f} / {cpu['subscribers']:.1f} / "
            f"{'n/a' if local is None else f'{local:.1f}'} |"
        )
    res = b["resolution"]
    events = sum(g["events"] for g in res["by_group"])
    lines += [
        "",
        f"Resolving the subscribers' selections, with {b['subscriptions']:,} subscriptions: "
        "the DynamoDB requests each delivered event carries (`extensions.dynamodb`; the "
        "subscribers of one event share its reads, so each shows the shared count).",
        "",
        "| subscriptions | selection | events | DynamoDB requests | per event |",
        "|---|---|---:|---:|---:|",
    ]
    for g in res["by_group"]:
        lines.append(
            f"| {g['count']} \u00d7 {g['subscriptions']} | `{g['selection']}` "
            f"| {g['events']:,} | {g['requests']:,} "
            f"| {g['requests'] / max(1, g['events']):.2f} |"
        )
    lines += [
        f"| all | | {events:,} | {res['events_requests']:,} "
        f"| {res['events_requests'] / max(1, events):.2f} |",
        "",
        f"At the API's boto3 client over the same phase: "
        f"{sum(res['client_operations'].values()):,} requests = "
        f"{res['mutation_requests']:,} the mutations' + {res['client_requests']:,} resolving "
        f"{events:,} deliveries ({res['client_requests'] / max(1, events):.3f} a delivery).",
    ]
    trouble = problems(result)
    if trouble:
        lines += ["", *(f"**EVENTS NOT DELIVERED AS WRITTEN**: {line}" for line in trouble)]
    return "\n".join(lines)


def _loud(count: int) -> str:
    return f"**{count}**" if count else "0"


# -- alone -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    if sys.argv[1:2] == ["subscribers"]:  # the child process
        connections = orjson.loads(sys.stdin.readline())
        asyncio.run(_subscribers(sys.argv[2], connections))
        return
    parser.add_argument("--table", help="an existing table seeded by make bench (no seeding)")
    add_arguments(parser)
    args = parser.parse_args()
    import dataclasses as dc
    import uuid

    from bench import peer
    from bench.naive import serve
    from bench.seeding import seed
    from graph_api.graph.engine.context import Services
    from graph_api.settings import Settings
    from graph_api.store import admin
    from tools import dynamodb_local

    mods = peer.modules(peer.copy())
    data = mods["dataset"].generate()
    settings = dc.replace(
        Settings.from_env(),
        table=args.table or f"bench-live-{uuid.uuid4().hex[:8]}",
        jwks_url="",
        jwt_secret="",
        auth_reads=False,
        public_personal_data=True,  # its school is generated: emails as the peer serves them
    )
    local = None
    streams_beside_dynamodb()
    if not os.environ.get("AWS_ENDPOINT_URL_DYNAMODB"):
        local = dynamodb_local.start()
        settings = dc.replace(settings, backend="remote", endpoint_url=local.endpoint)
    services = Services.create(settings)
    server = None
    try:
        if not args.table:
            asyncio.run(admin.create(services.dynamo, settings.table))
        server, port = serve(services)
        if not args.table:
            seed(port, data, mods["httpbench"], 4)
        targets = mods["dataset"].pick_targets(data)
        pid = local.process.pid if local else None
        result = run_from_args(args, services, port, data, targets, pid)
        print(render(result))
    finally:
        if server is not None:
            server.stop()
        if not args.table:
            asyncio.run(
                services.dynamo.call(
                    "DeleteTable", {"TableName": settings.table}, None, missing_table=False
                )
            )
        services.close()
        if local is not None:
            local.stop()
    if problems(result):
        raise SystemExit("live events: " + "; ".join(problems(result)))


def streams_beside_dynamodb() -> None:
    """An emulator in AWS_ENDPOINT_URL_DYNAMODB serves Streams on the same port; botocore
    would send the reader's Streams calls to AWS unless told (a DynamoDB Local the bench
    starts is handed to both clients by the settings)."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    if endpoint:
        os.environ.setdefault("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", endpoint)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--live-writes", type=int, default=100, help="live events: writes")
    parser.add_argument("--live-connections", type=int, default=10, help="live events: sockets")
    parser.add_argument(
        "--live-per-connection", type=int, default=100, help="live events: subscriptions a socket"
    )
    parser.add_argument(
        "--live-spacing", type=float, default=0.2, help="live events: mean seconds between writes"
    )


def run_from_args(
    args: argparse.Namespace,
    services: Services,
    port: int,
    data: dict[str, Any],
    targets: dict[str, Any],
    dynamodb_pid: int | None,
) -> dict[str, Any]:
    from bench import queries as peer_queries

    return run(
        services,
        port,
        peer_queries.School(data),
        targets,
        writes=args.live_writes,
        connections=args.live_connections,
        per_connection=args.live_per_connection,
        spacing=args.live_spacing,
        dynamodb_pid=dynamodb_pid,
    )


if __name__ == "__main__":
    main()
