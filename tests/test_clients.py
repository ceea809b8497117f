"""The field's GraphQL clients, pinned in tests/clients/ and at their default settings,
against `graph-api serve`: urql (@urql/core), Apollo Client, graphql-ws and graphql-sse each
run a query, a mutation and a subscription that hears a mutation made elsewhere."""

from __future__ import annotations

import subprocess

from support import ROOT, npm_package, tool

CLIENTS = ROOT / "tests" / "clients"
# The script bounds its own waits (a subscription's event: 120 s); this is a backstop.
NODE_SECONDS = 600


def test_urql_apollo_graphql_ws_and_graphql_sse_pass_at_their_defaults(demo_api: str) -> None:
    node = tool("node", "apt-get install nodejs npm")
    npm_package(CLIENTS)
    result = subprocess.run(
        [node, str(CLIENTS / "clients.mjs"), f"{demo_api}/graphql"],
        capture_output=True,
        text=True,
        timeout=NODE_SECONDS,
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    for client in ("urql", "apollo", "graphql-ws", "graphql-sse"):
        for operation in ("query", "mutation", "subscription"):
            assert f"ok   {client}: {operation}" in report, report
    print(report)
