"""GraphiQL in a real browser (Debian's headless Chromium), offline: the page loads from the
API alone, runs a query with a nested connection and shows its data; then runs a
subscription over its websocket and shows the event of an enrolment another client makes;
and acts as each role of the embedded demo's picker. The screenshots land in
test-output/graphiql.png and test-output/graphiql-subscription.png."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from support import ROOT, missing, npm_package, tool

from graph_api.http import graphiql
from graph_api.model.items import Item
from graph_api.ops import demo

SCRIPT = ROOT / "tests" / "http" / "e2e" / "graphiql.mjs"
SCREENSHOT = ROOT / "test-output" / "graphiql.png"
SUBSCRIPTION_SCREENSHOT = ROOT / "test-output" / "graphiql-subscription.png"
STUDENTS, SEED = 20, 7  # the school `demo_api` serves (conftest.py)
# The script's own waits are bounded (60 s a step, 150 s for the event); this is a backstop.
NODE_SECONDS = 600


@cache
def school() -> tuple[Item, ...]:
    """The demo school the server loads (same size, same seed)."""
    return tuple(demo.generate(students=STUDENTS, seed=SEED))


def expected_values() -> list[str]:
    """stu-0001's name, and its classes' subjects and teachers (the nested connection)."""
    items = school()
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


@dataclass(frozen=True)
class Enrolment:
    student_id: str
    class_id: str
    expected: list[str]  # what the rosterChanged event shows in GraphiQL's result pane


def enrolment_to_make() -> Enrolment:
    """The first student (by id) and class (by id) the student is not in, and the values of
    the event their enrolment makes: the name, JOINED, the class's count plus one."""
    items = school()
    taken = {(i["studentId"], i["classId"]) for i in items if i["type"] == "enrolment"}
    students = sorted((i for i in items if i["type"] == "student"), key=lambda i: i["id"])
    classes = sorted((i for i in items if i["type"] == "class"), key=lambda i: i["id"])
    student, klass = next(
        (s, c) for s in students for c in classes if (s["id"], c["id"]) not in taken
    )
    joined = [e for e in items if e["type"] == "enrolment" and e["classId"] == klass["id"]]
    return Enrolment(
        student["id"],
        klass["id"],
        [  # as GraphiQL prints the event's JSON
            '"kind": "JOINED"',
            f'"studentId": "{student["id"]}"',
            json.dumps(student["name"], ensure_ascii=False),
            f'"studentCount": {len(joined) + 1}',
        ],
    )


def browse(node: str, chromium: str, script: Path, api: str, plan: dict[str, Any]) -> None:
    """Run a page script of tests/http/e2e in headless Chromium against `api`; it must pass."""
    result = subprocess.run(
        [node, str(script), f"{api}/graphql", json.dumps(plan)],
        env={**os.environ, "CHROMIUM": chromium},
        capture_output=True,
        text=True,
        timeout=NODE_SECONDS,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    print(result.stdout)


def test_graphiql_runs_a_query_and_a_subscription_in_headless_chromium(demo_api: str) -> None:
    chromium = os.environ.get("CHROMIUM") or tool("chromium", "apt-get install chromium")
    node = tool("node", "apt-get install nodejs npm")
    if not graphiql.assets_present():
        missing("GraphiQL's assets are not built: run make (python -m tools.graphiql_assets)")
    npm_package(SCRIPT.parent)
    for screenshot in (SCREENSHOT, SUBSCRIPTION_SCREENSHOT):
        screenshot.unlink(missing_ok=True)
    enrolment = enrolment_to_make()
    plan = {
        "query": {"expected": expected_values(), "screenshot": str(SCREENSHOT)},
        "subscription": {
            "studentId": enrolment.student_id,
            "classId": enrolment.class_id,
            "expected": enrolment.expected,
            "screenshot": str(SUBSCRIPTION_SCREENSHOT),
        },
    }

    browse(node, chromium, SCRIPT, demo_api, plan)
    for screenshot in (SCREENSHOT, SUBSCRIPTION_SCREENSHOT):
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert screenshot.stat().st_size > 10_000  # a rendered page, not a blank one
        print(f"screenshot: {screenshot}")


CORS_SCRIPT = ROOT / "tests" / "http" / "e2e" / "cors.mjs"


def test_a_front_end_on_another_origin_queries_and_mutates_through_cors(demo_api: str) -> None:
    """`make run`'s CORS default, in the browser: a page served on another local port reads
    a query's answer and makes a mutation (after its preflight); the same page from an
    origin not allowed reads nothing, and its mutation never reaches the API."""
    chromium = os.environ.get("CHROMIUM") or tool("chromium", "apt-get install chromium")
    node = tool("node", "apt-get install nodejs npm")
    npm_package(CORS_SCRIPT.parent)
    plan = {"studentId": "stu-0019", "name": "Cross Origin", "refusedName": "Never Written"}
    browse(node, chromium, CORS_SCRIPT, demo_api, plan)
    check = urllib.request.Request(
        f"{demo_api}/graphql",
        data=json.dumps({"query": '{ student(id: "stu-0019") { name } }'}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(check, timeout=60) as response:
        student = json.load(response)["data"]["student"]
    assert student["name"] == "Cross Origin"  # the refused page's mutation never ran


# A student of no class (the test creates it): no teacher reads its email, no guardian's.
LONE = {"id": "stu-roles", "name": "Lone Student", "email": "lone.student@example.org"}
ROLES_QUERY = '{ students(ids: ["stu-0001", "stu-0002", "stu-roles"]) { id email } }'


def taught_by(teacher_id: str) -> set[str]:
    """The demo school's students in a class `teacher_id` teaches."""
    items = school()
    classes = {i["id"] for i in items if i["type"] == "class" and i["teacherId"] == teacher_id}
    return {i["studentId"] for i in items if i["type"] == "enrolment" and i["classId"] in classes}


def create_lone_student(api: str) -> None:
    """LONE, in no class (`demo_api` takes writes without a token); there already when this
    session's server has it."""
    query = (
        f'mutation {{ createStudent(input: {{id: "{LONE["id"]}", name: "{LONE["name"]}",'
        f' email: "{LONE["email"]}"}}) {{ userErrors {{ code }} }} }}'
    )
    request = urllib.request.Request(
        f"{api}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.load(response)
    codes = {e["code"] for e in answer["data"]["createStudent"]["userErrors"]}
    assert codes <= {"ALREADY_EXISTS"}, answer


def test_graphiql_acts_as_each_role_of_the_demo_in_one_click(demo_api: str) -> None:
    """The embedded demo's role picker, in the browser: each of its five buttons sets the
    headers editor (a bearer token; anonymous: empty again), and the same query answers as
    the policy says: the student (stu-0001) reads its own email only; the teacher (tch-001)
    and the guardian (of stu-0001 and stu-0002) read those two and not a student of no
    class; admin reads all three; anonymous none."""
    chromium = os.environ.get("CHROMIUM") or tool("chromium", "apt-get install chromium")
    node = tool("node", "apt-get install nodejs npm")
    if not graphiql.assets_present():
        missing("GraphiQL's assets are not built: run make (python -m tools.graphiql_assets)")
    npm_package(SCRIPT.parent)
    emails = {i["id"]: i["email"] for i in school() if i["type"] == "student"}
    own, other, lone = emails["stu-0001"], emails["stu-0002"], LONE["email"]
    assert {"stu-0001", "stu-0002"} <= taught_by("tch-001"), "pick students tch-001 teaches"
    create_lone_student(demo_api)
    steps = [
        {"role": "student", "shown": [own, "FORBIDDEN"], "hidden": [other, lone]},
        {"role": "teacher", "shown": [own, other, "FORBIDDEN"], "hidden": [lone]},
        {"role": "admin", "shown": [own, other, lone], "hidden": ["FORBIDDEN"]},
        {"role": "guardian", "shown": [own, other, "FORBIDDEN"], "hidden": [lone]},
        {
            "role": "anonymous",
            "shown": ['"stu-0002"', "UNAUTHENTICATED"],
            "hidden": [own, other, lone, "no sign-in configured"],
        },
    ]
    browse(node, chromium, SCRIPT, demo_api, {"roles": {"query": ROLES_QUERY, "steps": steps}})
