"""`python -m bench.http_cost [--base REF]`: the HTTP path's own CPU per request, `{ __typename }`
through the whole stack (the server, Starlette, our middleware, Strawberry's view, the answer),
with no DynamoDB call in it.

Each checkout runs `graph-api serve --workers 1` on the embedded backend (its stream reader
idle: polled once an hour); one keep-alive connection a side, the sides taking turns in
blocks, the order reversed every block, so the machine's drift hits both alike. The figure
is the `serve` process's own user + system CPU over the timed requests (`/proc`), divided by
their number; the embedded DynamoDB (a child process) is not counted.

On a shared machine that figure moves by 5-10 % between runs, more than a change to our own
layer does; each checkout's Python calls per request (`CALLS`, run by its own interpreter:
the app on uvicorn in one process, counted by cProfile, lifespan off) do not move.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
from contextlib import ExitStack

from bench import proc, servers

BODY = json.dumps({"query": "{ __typename }"}).encode()
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
ENV = {
    "GRAPH_API_BACKEND": "embedded",
    "GRAPH_API_DEMO_STUDENTS": "5",
    "GRAPH_API_OPEN_WRITES": "true",
    # The stream reader and its lease: idle during the run, not on the clock.
    "GRAPH_API_STREAM_POLL_SECONDS": "3600",
    "GRAPH_API_STREAM_LEASE_SECONDS": "7200",
}


# Run by each checkout's interpreter in its own folder, so it uses only the API every version
# has: settings from the environment, `Services.create`, `create_app`, uvicorn.
CALLS = """
import cProfile, http.client, json, pstats, sys, threading, time
import uvicorn
from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.settings import Settings
settings = Settings.from_env({"GRAPH_API_BACKEND": "remote", "GRAPH_API_OPEN_WRITES": "true",
    "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:9", "GRAPH_API_CURSOR_SECRET": "calls"})
app = create_app(Services.create(settings))
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
    lifespan="off", http="h11"))
n = int(sys.argv[1])
def client():
    while not server.started:
        time.sleep(0.05)
    conn = http.client.HTTPConnection("127.0.0.1", server.servers[0].sockets[0].getsockname()[1])
    for _ in range(n):
        conn.request("POST", "/graphql", BODY, HEADERS)
        conn.getresponse().read()
    server.should_exit = True
threading.Thread(target=client).start()
profile = cProfile.Profile()
profile.runcall(server.run)
print(pstats.Stats(profile).total_calls / n)
"""


def calls_per_request(checkout: servers.Checkout, requests: int = 500) -> float:
    """The Python calls the checkout's server makes for one `{ __typename }`, counted by
    cProfile in its main thread (the client's thread is not profiled)."""
    prelude = f"BODY = {BODY!r}\nHEADERS = {HEADERS!r}\n"
    done = subprocess.run(
        [str(checkout.root / ".venv" / "bin" / "python"), "-c", prelude + CALLS, str(requests)],
        cwd=checkout.root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{checkout.label}: {done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def post(conn: http.client.HTTPConnection) -> None:
    conn.request("POST", "/graphql", BODY, HEADERS)
    response = conn.getresponse()
    raw = response.read()
    if response.status != 200 or b'"Query"' not in raw:
        raise SystemExit(f"HTTP {response.status}: {raw[:300]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", help="a git ref served beside this checkout")
    parser.add_argument("--requests", type=int, default=6000, help="timed requests a side")
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--block", type=int, default=500)
    args = parser.parse_args()
    checkouts = [servers.head()]
    if args.base:
        checkouts.append(servers.base(args.base))
    with ExitStack() as stack:
        served = [stack.enter_context(servers.serving(c, ENV, workers=1)) for c in checkouts]
        conns = [http.client.HTTPConnection("127.0.0.1", s.port, timeout=30) for s in served]
        for conn in conns:
            for _ in range(args.warmup):
                post(conn)
        cpu = [0.0] * len(served)
        per_block: list[list[float]] = [[] for _ in served]
        done, block = 0, 0
        while done < args.requests:
            n = min(args.block, args.requests - done)
            order = list(range(len(served)))
            if block % 2:
                order.reverse()
            for i in order:
                before = proc.cpu_seconds([served[i].pid])
                for _ in range(n):
                    post(conns[i])
                used = proc.cpu_seconds([served[i].pid]) - before
                cpu[i] += used
                per_block[i].append(used / n * 1e6)
            done += n
            block += 1
        for conn in conns:
            conn.close()
    for checkout, total, blocks in zip(checkouts, cpu, per_block, strict=True):
        print(
            f"{checkout.label} ({checkout.commit}): {total / args.requests * 1e6:.0f} µs CPU"
            f" per request (median of blocks {statistics.median(blocks):.0f} µs)"
        )
    if len(cpu) == 2:
        print(f"head/base: {cpu[0] / cpu[1]:.2f}x")
    calls = [calls_per_request(checkout) for checkout in checkouts]
    print(
        "Python calls per request: "
        + ", ".join(f"{c.label} {n:.0f}" for c, n in zip(checkouts, calls, strict=True))
    )


if __name__ == "__main__":
    main()
