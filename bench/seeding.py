"""The peer's school (its seed-11 dataset) written into our table through our own GraphQL
mutations, so the items follow whatever layout the API's writes produce: `make bench`,
`make bench-plain` and `make bench-layers` seed this way.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

HOME_FIELDS = ("country", "state", "city", "street")
ALIASES = 20  # mutations per seeding request (the API allows 30 aliases)


def _document(
    field: str, types: dict[str, str], rows: list[dict[str, Any]]
) -> tuple[str, dict[str, Any]]:
    params, selections, variables = [], [], {}
    for i, row in enumerate(rows):
        args = []
        for name, type_ in types.items():
            params.append(f"${name}{i}: {type_}")
            args.append(f"{name}: ${name}{i}")
            variables[f"{name}{i}"] = row[name]
        selections.append(f"m{i}: {field}({', '.join(args)}) {{ userErrors {{ code message }} }}")
    return f"mutation Seed({', '.join(params)}) {{\n" + "\n".join(selections) + "\n}", variables


def seed(port: int, data: dict[str, Any], httpbench: ModuleType, workers: int) -> int:
    """Write the dataset through the API's mutations; returns how many were sent."""
    home = {h["student_id"]: h for h in data["homes"]}
    phases: list[tuple[str, dict[str, str], list[dict[str, Any]]]] = [
        (
            "createTeacher",
            {"input": "CreateTeacherInput!"},
            [{"input": {"id": t["id"], "name": t["name"]}} for t in data["teachers"]],
        ),
        (
            "createClass",
            {"input": "CreateClassInput!"},
            [
                {"input": {"id": c["id"], "subject": c["subject"], "teacherId": c["teacher_id"]}}
                for c in data["classes"]
            ],
        ),
        (
            "createSport",
            {"input": "CreateSportInput!"},
            [
                {"input": {"id": s["id"], "name": s["name"], "coach": s["coach"]}}
                for s in data["sports"]
            ],
        ),
        (
            "createStudent",
            {"input": "CreateStudentInput!"},
            [
                {
                    "input": {
                        "id": s["id"],
                        "name": s["name"],
                        "email": s["email"],
                        "home": {k: home[s["id"]][k] for k in HOME_FIELDS},
                    }
                }
                for s in data["students"]
            ],
        ),
        (
            "enrollStudent",
            {"studentId": "ID!", "classId": "ID!"},
            [{"studentId": e["student_id"], "classId": e["class_id"]} for e in data["enrollments"]],
        ),
        (
            "joinSport",
            {"studentId": "ID!", "sportId": "ID!"},
            [
                {"studentId": x["student_id"], "sportId": x["sport_id"]}
                for x in data["student_sports"]
            ],
        ),
    ]
    local = threading.local()

    def send(job: tuple[str, dict[str, Any]]) -> None:
        if not hasattr(local, "client"):
            local.client = httpbench.GraphQLClient("127.0.0.1", port, timeout=120)
        out = local.client.query(*job)  # raises on GraphQL errors
        refused = [e for payload in out.values() for e in payload["userErrors"]]
        if refused:
            raise RuntimeError(f"seeding refused: {refused[:3]}")

    sent = 0
    with ThreadPoolExecutor(workers) as pool:
        # Phases in order (an edge needs both its nodes); requests of a phase concurrently.
        for field, types, rows in phases:
            chunks = [rows[i : i + ALIASES] for i in range(0, len(rows), ALIASES)]
            list(pool.map(send, [_document(field, types, chunk) for chunk in chunks]))
            sent += len(rows)
    return sent
