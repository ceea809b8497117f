"""Clients' own conventions (README, "Relay: node ids, backward pages, totals"), run with the
clients' own tools, pinned in tests/project/relay (npm ci from its lock):

- Relay's runtime (relay-runtime) with the README's compiler `schemaConfig` and the
  Environment's `getDataID`, against `graph-api serve`: a roster's second page loaded through
  `node(id:)` (as usePaginationFragment's loadNext does) lands on the roster's own record,
  a `node(id:)` refetch on the record the roster's edge holds, and a student and a teacher
  sharing an id stay two records. With Relay's default getDataID they do not (what the
  README warns of).
- GraphQL Code Generator (typescript-operations, through @graphql-codegen/core: its CLI's
  own call) types the README's example operations.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from graphql import OperationDefinitionNode, parse
from support import README_BLOCKS, RELAY, ROOT, npm_package, tool

SCHEMA_FILE = ROOT / "schema" / "schema.graphql"
README_TEXT = (ROOT / "README.md").read_text(encoding="utf-8")
GET_DATA_ID = "getDataID: (o) => o.nodeId"
NODE_SECONDS = 120  # a backstop: each run takes seconds
PAGE = 2  # the roster page runtime.js loads, twice


def readme_schema_config() -> dict[str, str]:
    found = re.search(r'"schemaConfig":\s*(\{[^}]*\})', README_TEXT)
    assert found, "the README's Relay section gives the compiler's schemaConfig"
    config: dict[str, str] = json.loads(found.group(1))
    return config


def node_run(*args: str, cwd: Path = RELAY) -> str:
    node = tool("node", "apt-get install nodejs npm")
    result = subprocess.run(
        [node, *args], cwd=cwd, capture_output=True, text=True, timeout=NODE_SECONDS
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def post(api: str, query: str, variables: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        f"{api}/graphql",
        json.dumps({"query": query, "variables": variables or {}}).encode(),
        {"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=NODE_SECONDS) as response:
        body = json.load(response)
    assert "errors" not in body, body
    return body["data"]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/project/relay/runtime's documents compiled with the README's schemaConfig."""
    tool("node", "apt-get install nodejs npm")
    npm_package(RELAY)
    folder = tmp_path_factory.mktemp("relay")
    output = folder / "__generated__"
    output.mkdir()
    config = {
        "src": str(RELAY / "runtime"),
        "schema": str(SCHEMA_FILE),
        "language": "javascript",
        "artifactDirectory": str(output),
        "eagerEsModules": False,  # CommonJS artifacts, which runtime.js requires
        "schemaConfig": readme_schema_config(),
    }
    (folder / "relay.config.json").write_text(json.dumps(config))
    compiler = RELAY / "node_modules" / "relay-compiler" / "cli.js"
    node_run(str(compiler), str(folder / "relay.config.json"), cwd=folder)
    return output


@pytest.fixture(scope="module")
def school(demo_api: str) -> tuple[str, str, list[str]]:
    """A class with two pages of students, its first two pages' student ids, and a fresh id
    that a new student and a new teacher share."""
    classes = post(demo_api, "{ classes(first: 50) { edges { node { id studentCount } } } }")
    class_id = next(
        e["node"]["id"] for e in classes["classes"]["edges"] if e["node"]["studentCount"] > 2 * PAGE
    )
    roster = post(
        demo_api,
        "query($id: ID!, $n: Int!) { class(id: $id) { students(first: $n) {"
        " edges { node { id } } } } }",
        {"id": class_id, "n": 2 * PAGE},
    )
    expected = [e["node"]["id"] for e in roster["class"]["students"]["edges"]]
    twin = f"twin-{uuid.uuid4().hex[:12]}"
    created = post(
        demo_api,
        "mutation($id: ID!, $email: String!) {"
        ' createStudent(input: {id: $id, name: "Twin Student", email: $email}) {'
        " userErrors { code } }"
        ' createTeacher(input: {id: $id, name: "Twin Teacher"}) { userErrors { code } } }',
        {"id": twin, "email": f"{twin}@example.org"},
    )
    assert created == {
        "createStudent": {"userErrors": []},
        "createTeacher": {"userErrors": []},
    }
    return class_id, twin, expected


def run_relay(api: str, artifacts: Path, school: tuple[str, str, list[str]], mode: str) -> Any:
    class_id, twin, _ = school
    out = node_run(
        str(RELAY / "runtime.js"), f"{api}/graphql", str(artifacts), class_id, twin, mode
    )
    return json.loads(out.splitlines()[-1])


def test_the_readme_and_the_harness_give_relay_the_same_settings() -> None:
    assert GET_DATA_ID in README_TEXT
    assert GET_DATA_ID in (RELAY / "runtime.js").read_text(encoding="utf-8")
    assert readme_schema_config() == {
        "nodeInterfaceIdField": "nodeId",
        "nodeInterfaceIdVariableName": "nodeId",
    }


def test_relay_with_the_readme_settings_keeps_one_record_per_node(
    demo_api: str, artifacts: Path, school: tuple[str, str, list[str]]
) -> None:
    class_id, twin, expected = school
    seen = run_relay(demo_api, artifacts, school, "nodeId")
    # The second page came through node(id: "Class:...") and joined the roster's connection.
    assert seen["rosterRecord"] == seen["pageRecord"] == f"Class:{class_id}"
    assert seen["variables"]["nodeId"] == f"Class:{class_id}"
    assert seen["firstPage"] == expected[:PAGE]
    assert seen["roster"] == expected
    # node(id:) refetched the student the roster's first edge holds: the same record.
    assert seen["nodeRecord"] == seen["edgeRecord"] == f"Student:{expected[0]}"
    assert seen["twins"] == {
        "student": "Twin Student",
        "teacher": "Twin Teacher",
        "records": [f"Student:{twin}", f"Teacher:{twin}"],
    }


def test_relay_by_default_splits_a_node_and_merges_twins(
    demo_api: str, artifacts: Path, school: tuple[str, str, list[str]]
) -> None:
    """What the README's getDataID prevents: Relay's default keys records by `id`."""
    _, twin, expected = school
    seen = run_relay(demo_api, artifacts, school, "default")
    assert seen["rosterRecord"] != seen["pageRecord"]  # the page landed on a second record
    assert seen["roster"] == seen["firstPage"] == expected[:PAGE]  # the roster never grew
    assert seen["twins"]["records"] == [twin, twin]
    assert seen["twins"]["student"] == seen["twins"]["teacher"]  # one overwrote the other


def test_graphql_code_generator_types_the_readme_operations(tmp_path: Path) -> None:
    tool("node", "apt-get install nodejs npm")
    npm_package(RELAY)
    documents = tmp_path / "documents"
    documents.mkdir()
    operations = []
    for n, block in enumerate(README_BLOCKS, 1):
        (documents / f"readme-{n}.graphql").write_text(block, encoding="utf-8")
        operations += [
            (d.name.value if d.name else "", d.operation.value.capitalize())
            for d in parse(block).definitions
            if isinstance(d, OperationDefinitionNode)
        ]
    output = tmp_path / "operations.ts"
    files = sorted(str(f) for f in documents.iterdir())
    node_run(str(RELAY / "codegen.js"), str(SCHEMA_FILE), str(output), *files)
    typed = output.read_text(encoding="utf-8")
    assert len(operations) == len(README_BLOCKS)
    for name, kind in operations:
        assert f"export type {name}{kind} = " in typed, (name, kind)
        assert f"export type {name}{kind}Variables = " in typed, (name, kind)
