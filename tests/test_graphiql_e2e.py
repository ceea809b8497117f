"""GraphiQL in a real browser (Debian's headless Chromium), offline: the page loads from the
API alone, runs a query with a nested connection and shows its data. The screenshot lands
in test-output/graphiql.png."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from node_support import missing, npm_package, tool

from graph_api import demo, graphiql
from tools.api_server import serving

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "e2e" / "graphiql.mjs"
SCREENSHOT = ROOT / "test-output" / "graphiql.png"
STUDENTS, SEED = 20, 7


def expected_values() -> list[str]:
    """stu-0001's name, and its classes' subjects and teachers (the nested connection)."""
    items = demo.generate(students=STUDENTS, seed=SEED)
    student = next(i for i in items if i["type"] == "student" and i["id"] == "stu-0001")
    teachers = {i["id"]: i["name"] for i in items if i["type"] == "teacher"}
    classes = {i["id"]: i for i in items if i["type"] == "class"}
    enrolments = [i for i in items if i["type"] == "enrolment" and i["studentId"] == "stu-0001"]
    assert enrolments, "the demo student takes no class: pick another"
    taken = [classes[e["classId"]] for e in enrolments]  # subject and teacher: the class's
    return [
        student["name"],
        *sorted({c["subject"] for c in taken}),
        *sorted({teachers[c["teacherId"]] for c in taken}),
    ]


def test_graphiql_runs_a_nested_query_in_headless_chromium() -> None:
    chromium = os.environ.get("CHROMIUM") or tool("chromium", "apt-get install chromium")
    node = tool("node", "apt-get install nodejs npm")
    if not graphiql.assets_present():
        missing("GraphiQL's assets are not built: run make (python -m tools.graphiql_assets)")
    npm_package(SCRIPT.parent)
    SCREENSHOT.unlink(missing_ok=True)

    with serving(students=STUDENTS, GRAPH_API_DEMO_SEED=str(SEED)) as url:
        result = subprocess.run(
            [node, str(SCRIPT), f"{url}/graphql", str(SCREENSHOT), *expected_values()],
            env={**os.environ, "CHROMIUM": chromium},
            capture_output=True,
            text=True,
            timeout=180,
        )

    assert result.returncode == 0, result.stdout + result.stderr
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert SCREENSHOT.stat().st_size > 10_000  # a rendered page, not a blank one
    print(f"screenshot: {SCREENSHOT}")
