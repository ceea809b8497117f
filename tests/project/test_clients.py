"""The field's GraphQL clients, pinned in tests/project/clients/ and at their default settings,
against `graph-api serve`: urql (@urql/core), Apollo Client, graphql-ws and graphql-sse each
run a query, a mutation and a subscription that hears a mutation made elsewhere; Apollo
Client's persisted-queries link (tests/project/clients/persisted.mjs) runs APQ's miss-then-register
flow, and a trusted server's manifest ids."""

from __future__ import annotations

from pathlib import Path

from support import OPERATIONS, ROOT, node_script

from graph_api import cli
from tools.api_server import serving

CLIENTS = ROOT / "tests" / "project" / "clients"
# The script bounds its own waits (a subscription's event: 120 s); this is a backstop.
NODE_SECONDS = 600


def test_urql_apollo_graphql_ws_and_graphql_sse_pass_at_their_defaults(demo_api: str) -> None:
    result = node_script(CLIENTS, "clients.mjs", f"{demo_api}/graphql", timeout=NODE_SECONDS)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    for client in ("urql", "apollo", "graphql-ws", "graphql-sse"):
        for operation in ("query", "mutation", "subscription"):
            assert f"ok   {client}: {operation}" in report, report
    print(report)


def run_persisted(*arguments: str) -> str:
    result = node_script(CLIENTS, "persisted.mjs", *arguments, timeout=NODE_SECONDS)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    return report


def test_apollos_persisted_queries_link_misses_registers_then_sends_the_hash(demo_api: str) -> None:
    report = run_persisted(f"{demo_api}/graphql")
    assert "ok   apollo persisted: a miss, then the text registered" in report, report
    assert "ok   apollo persisted: the hash alone over GET" in report, report


def test_apollos_persisted_queries_link_runs_manifest_ids_on_a_trusted_server(
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "manifest.json"
    operations = str(OPERATIONS)
    assert cli.main(["persist", operations, "--add-typename", "-o", str(manifest)]) == 0
    settings = {
        "GRAPH_API_DOCUMENTS": "trusted",
        "GRAPH_API_DOCUMENTS_MANIFEST": str(manifest),
        # The manifest's operations read emails without a token (tests/ops/operations).
        "GRAPH_API_PUBLIC_PERSONAL_DATA": "true",
    }
    with serving(students=20, **settings) as url:
        report = run_persisted(f"{url}/graphql", str(manifest))
    assert "ok   apollo persisted: a manifest operation runs by its id" in report, report
    assert "ok   apollo persisted: an operation not in the manifest is refused" in report, report
