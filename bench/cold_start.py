"""`python -m bench.cold_start`: the Lambda handler's cold start, measured.

Each round starts a fresh interpreter with the environment Lambda gives the function
(`AWS_LAMBDA_FUNCTION_NAME` set, so importing the handler builds its app and services as the
init phase does), pointed at a DynamoDB Local or embedded DynamoDB that this script seeds
with the demo school. The child reports, in seconds: `import` (the handler module, init
included), then `first` and `second` (one API Gateway HTTP API event each: a query that reads
one student, through Mangum), and which heavy packages the import loaded. Prints the medians
as Markdown. `--endpoint URL` uses a running DynamoDB; without it the embedded one is started.
`--package DIR` imports from a Lambda package instead of the venv (`make lambda-package
LAMBDA_PYTHON=3.11`, this interpreter's version): no site-packages, and no bytecode written,
as on Lambda, whose /var/task is read-only (the package ships no .pyc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
from typing import Any

TABLE = "cold-start"
# Packages a Lambda function has no use for: the command line's client, the embedded
# backend, the events pipeline, telemetry's exporters (tests/http/test_lambda_handler.py's list).
HEAVY = (
    *("boto3", "moto", "flask", "redis", "graph_api.events.reader", "graph_api.embedded"),
    *("prometheus_client", "opentelemetry.sdk"),
)

CHILD = r"""
import json, sys, time
clocks = [(time.perf_counter(), time.process_time())]
from graph_api.http import lambda_handler
clocks.append((time.perf_counter(), time.process_time()))
event = json.loads(sys.argv[1])
first = lambda_handler.handler(event, None)
clocks.append((time.perf_counter(), time.process_time()))
second = lambda_handler.handler(event, None)
clocks.append((time.perf_counter(), time.process_time()))
assert first["statusCode"] == second["statusCode"] == 200, first
figures = {"loaded": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}
for name, (a, b) in zip(("import", "first", "second"), zip(clocks, clocks[1:])):
    figures[name] = b[0] - a[0]
    figures[name + " cpu"] = b[1] - a[1]
print(json.dumps(figures))
"""


def event(query: str) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) POST /graphql event."""
    host = "abc123.execute-api.us-east-1.amazonaws.com"
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/graphql",
        "rawQueryString": "",
        "headers": {"host": host, "content-type": "application/json", "accept": "application/json"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": host,
            "domainPrefix": "abc123",
            "http": {
                "method": "POST",
                "path": "/graphql",
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "bench",
            },
            "requestId": "cold-start",
            "routeKey": "$default",
            "stage": "$default",
            "time": "29/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1795953600000,
        },
        "body": json.dumps({"query": query}),
        "isBase64Encoded": False,
    }


def seed(endpoint: str) -> str:
    """The demo school in TABLE; returns a student's id to read."""
    from graph_api.ops import demo
    from graph_api.settings import Settings
    from graph_api.store import admin
    from graph_api.store.client import Dynamo

    dynamo = Dynamo(Settings(backend="remote", endpoint_url=endpoint, table=TABLE))
    items = demo.generate(students=60, seed=11)

    async def created_and_seeded() -> None:
        await admin.create(dynamo, TABLE)  # or finds it: the demo's items are put again
        await admin.batch_write(dynamo, TABLE, items)

    asyncio.run(created_and_seeded())
    return next(i["id"] for i in items if i["type"] == "student")


def once(endpoint: str, student: str, package: str | None) -> dict[str, Any]:
    env = {
        **os.environ,
        "AWS_LAMBDA_FUNCTION_NAME": "graph-api-bench",
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "GRAPH_API_TABLE": TABLE,
        "GRAPH_API_CURSOR_SECRET": "bench-cold-start",
        "GRAPH_API_LOG_LEVEL": "WARNING",
    }
    env.pop("GRAPH_API_BACKEND", None)
    python, cwd = [sys.executable], None
    if package is not None:  # and not this checkout's graph_api, which `-c` would put first
        cwd = package
        env["PYTHONPATH"] = os.path.abspath(package)
        python += ["-S", "-B"]
    selection = "name classes { edges { node { subject } } }"
    query = f'{{ student(id: "{student}") {{ {selection} }} }}'
    args = [*python, "-c", CHILD, json.dumps(event(query)), json.dumps(HEAVY)]
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", help="a running DynamoDB (default: start the embedded one)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--package", help="a Lambda package directory to import from")
    args = parser.parse_args()
    server = None
    endpoint = args.endpoint
    if endpoint is None:
        from graph_api.embedded import EmbeddedDynamoDB

        server = EmbeddedDynamoDB()
        endpoint = server.start()
    try:
        student = seed(endpoint)
        rounds = [once(endpoint, student, args.package) for _ in range(args.rounds)]
    finally:
        if server is not None:
            server.stop()
    print(f"| {args.rounds} fresh interpreters, medians | wall s | CPU s |")
    print("|---|---|---|")
    for name in ("import", "first", "second"):
        wall, cpu = (statistics.median(r[key] for r in rounds) for key in (name, f"{name} cpu"))
        print(f"| {name} | {wall:.3f} | {cpu:.3f} |")
    print(f"\nloaded at import: {', '.join(rounds[0]['loaded']) or 'none of ' + ', '.join(HEAVY)}")


if __name__ == "__main__":
    main()
