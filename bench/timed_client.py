"""The bench's timed requests, sent from a process of their own (`python -m bench.timed_client`).

`make bench` serves our API from its own process, a thread beside the clock that times the
API's DynamoDB calls. A client in that process shares the server's interpreter lock: once
our answer is sent, the client waits for the server's thread to finish the request (free its
objects, return to the event loop) before it can read the answer, a wait the peer's separate
server never imposes on it. Both sides' requests are sent from here instead, with the peer's
own client (`httpbench.GraphQLClient`), as before; the bench matches each timed request's
interval with the DynamoDB calls its clock saw in it (`time.perf_counter` is the system's
monotonic clock, the same in both processes).

A side can also be DynamoDB itself: a query's calls as the API sent them, recorded by the
bench (`calls.RequestRecorder`), sent again one after another straight to the emulator
(`Replayed`), back to back or with the API's pauses between them: what the backend alone
takes for that query, with no API between.

Reads a job on stdin: {"peer": folder, "sides": [{"port", "body", "headers" (optional)} or
{"port", "replay": [{"path", "headers", "body"}, ...], "host", "pauses" (optional)}, ...],
"requests", "warmup", "block"}; writes one result a side on stdout: {"intervals": [[start,
end], ...], "dynamodb": [extensions.dynamodb or null, ...], "last": answer}. An answer other
than HTTP 200, warm-up or timed, ends it with that answer on stderr and exit status 1. `timed`
runs it so.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench import peer

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class _Timings:
    """What a side's timed requests gave: each one's interval, its `extensions.dynamodb`
    (none for a replay, which has no API), and the last answer."""

    intervals: list[tuple[float, float]] = field(default_factory=list, kw_only=True)
    dynamodb: list[Any] = field(default_factory=list, kw_only=True)
    last: bytes = field(default=b"", kw_only=True)

    def result(self) -> dict[str, Any]:
        return {"intervals": self.intervals, "dynamodb": self.dynamodb, "last": self.last.decode()}


@dataclass
class Timed(_Timings):
    """One keep-alive connection to one server, and its timed requests."""

    client: Any
    body: bytes

    def post(self, timed: bool) -> None:
        started = time.perf_counter()
        status, raw = self.client.post_raw(self.body)
        ended = time.perf_counter()
        if status != 200:
            raise SystemExit(f"HTTP {status} from port {self.client.port}: {raw[:300]!r}")
        self.last = raw
        if timed:
            self.intervals.append((started, ended))
            # Read after the interval: parsing the answer is the client's time, not the server's.
            extensions = json.loads(raw).get("extensions") or {}
            self.dynamodb.append(extensions.get("dynamodb"))

    def close(self) -> None:
        self.client.close()


@dataclass
class Replayed(_Timings):
    """Recorded DynamoDB requests sent again, in their order, on one keep-alive connection
    to the emulator: one timed sample spans them all.

    With `pauses`, each request waits its pause first (the API's pauses between its calls,
    `calls.pauses`), and a sample spans the requests' own time, the pauses left out: what
    the emulator takes when it is called at the API's pace, idle in between.
    """

    conn: http.client.HTTPConnection
    requests: list[tuple[str, dict[str, str], bytes]]  # path, headers, body: as sent by the API
    pauses: list[float] = field(default_factory=list)  # seconds before each request

    def post(self, timed: bool) -> None:
        started = time.perf_counter()
        paused = 0.0
        for i, (path, headers, body) in enumerate(self.requests):
            if self.pauses:
                before = time.perf_counter()
                time.sleep(self.pauses[i])
                paused += time.perf_counter() - before
            self.conn.request("POST", path, body, headers)
            response = self.conn.getresponse()
            raw = response.read()
            if response.status != 200:
                raise SystemExit(
                    f"HTTP {response.status} from port {self.conn.port}: {raw[:300]!r}"
                )
            self.last = raw
        if timed:
            self.intervals.append((started, time.perf_counter() - paused))

    def close(self) -> None:
        self.conn.close()


class Client:
    """The peer's client's requests (`httpbench.GraphQLClient.post_raw`) with headers of the
    run's own added: a bearer token (`make bench BENCH_ARGS="--as teacher"`)."""

    def __init__(self, port: int, headers: dict[str, str]) -> None:
        self.port = port
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Connection": "keep-alive",
            **headers,
        }
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post_raw(self, body: bytes) -> tuple[int, bytes]:
        self.conn.request("POST", "/graphql", body, self.headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.conn.close()


class Side(Protocol):
    """What `alternate` sends requests through: a `Timed` or a `Replayed`."""

    def post(self, timed: bool) -> None: ...


def alternate(sides: Sequence[Side], requests: int, warmup: int, block: int) -> None:
    """Warm-up, then `requests` timed requests a side, the sides taking turns in blocks of
    `block` (the first side first in even blocks, last in odd ones)."""
    for _ in range(warmup):
        for side in sides:
            side.post(timed=False)
    done = 0
    while done < requests:
        n = min(block, requests - done)
        for side in sides if (done // block) % 2 == 0 else sides[::-1]:
            for _ in range(n):
                side.post(timed=True)
        done += n


def timed(folder: Path, sides: list[dict[str, Any]], requests: int, warmup: int, block: int) -> Any:
    """`sides` timed by this module run as a process of its own (`main`): one result a
    side. Called by the bench, in its process."""
    job = {
        "peer": str(folder),  # its client, httpbench.py
        "sides": sides,
        "requests": requests,
        "warmup": warmup,
        "block": block,
    }
    sent = subprocess.run(
        [sys.executable, "-m", "bench.timed_client"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if sent.returncode != 0:
        raise RuntimeError(f"the timed client failed: {sent.stderr.strip()[-2000:]}")
    return json.loads(sent.stdout)


def main() -> None:
    job = json.load(sys.stdin)
    httpbench = peer.modules(Path(job["peer"]))["httpbench"]
    sides: list[Timed | Replayed] = []
    for asked in job["sides"]:
        if "replay" in asked:
            host = asked.get("host", "127.0.0.1")
            conn = http.client.HTTPConnection(host, asked["port"], timeout=30)
            replay = [(r["path"], r["headers"], r["body"].encode()) for r in asked["replay"]]
            sides.append(Replayed(conn, replay, asked.get("pauses") or []))
        elif asked.get("headers"):
            client = Client(asked["port"], asked["headers"])
            sides.append(Timed(client, asked["body"].encode()))
        else:
            client = httpbench.GraphQLClient("127.0.0.1", asked["port"])
            sides.append(Timed(client, asked["body"].encode()))
    alternate(sides, job["requests"], job["warmup"], job["block"])
    for side in sides:
        side.close()
    json.dump([side.result() for side in sides], sys.stdout)


if __name__ == "__main__":
    main()
