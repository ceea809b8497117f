"""Writes as a client makes them over HTTP, and subscribers over SSE: what the subscription
tests write and hear."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from support import ERRORS, WAIT, mutate

from graph_api.store.codec import Item, encode

if TYPE_CHECKING:
    from starlette.testclient import TestClient

    from graph_api.graph.engine.context import Services


def refused(client: TestClient, query: str) -> list[str]:
    """A mutation refused with user errors: their codes (nothing was written)."""
    body = client.post("/graphql", json={"query": query}).json()
    assert "errors" not in body, body
    return [e["code"] for p in body["data"].values() for e in (p or {}).get("userErrors", [])]


class SSE:
    """One GraphQL-over-SSE subscription read on a thread: its lines, as they come."""

    def __init__(
        self, client: TestClient, query: str, headers: dict[str, str] | None = None
    ) -> None:
        self.lines: list[str] = []
        self.status = 0
        self._thread = threading.Thread(target=self._listen, args=(client, query, headers or {}))
        self._thread.start()

    def _listen(self, client: TestClient, query: str, headers: dict[str, str]) -> None:
        with client.stream(
            "POST",
            "/graphql",
            json={"query": query},
            headers={"accept": "text/event-stream", **headers},
        ) as response:
            self.status = response.status_code
            for line in response.iter_lines():
                self.lines.append(line)
                if line.startswith("event: complete"):
                    return

    @property
    def data(self) -> list[dict[str, Any]]:
        """Every `next` event's payload so far."""
        return [json.loads(line[6:]) for line in self.lines if line.startswith("data: {")]

    def join(self) -> None:
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "the SSE stream did not end"


def put(boto: Any, services: Services, item: Item) -> None:
    boto.put_item(TableName=services.settings.table, Item=encode(item))


DELETE_TEACHER = f"mutation($id: ID!) {{ deleteTeacher(id: $id) {{ {ERRORS} }} }}"
CREATE_CLASS = f"""mutation($id: ID!, $subject: String!, $teacher: ID!) {{
  createClass(input: {{id: $id, subject: $subject, teacherId: $teacher}})
  {{ class {{ id }} {ERRORS} }} }}"""
UPDATE_CLASS = f"""mutation($id: ID!, $subject: String!, $version: Int) {{
  updateClass(id: $id, input: {{subject: $subject}}, expectedVersion: $version)
  {{ class {{ id }} {ERRORS} }} }}"""
DELETE_CLASS = f"mutation($id: ID!) {{ deleteClass(id: $id) {{ {ERRORS} }} }}"
CREATE_STUDENT = f"""mutation($id: ID!, $name: String!) {{
  createStudent(input: {{id: $id, name: $name, email: "{{}}@example.org",
    home: {{country: "France", state: "IDF", city: "Paris"}}}})
  {{ student {{ id }} {ERRORS} }} }}"""
RENAME_STUDENT = f"""mutation($id: ID!, $name: String!) {{
  updateStudent(id: $id, input: {{name: $name}}) {{ student {{ id }} {ERRORS} }} }}"""
DELETE_STUDENT = f"mutation($id: ID!) {{ deleteStudent(id: $id) {{ {ERRORS} }} }}"
ENROLL = f"""mutation($s: ID!, $c: ID!) {{
  enrollStudent(studentId: $s, classId: $c) {{ student {{ id }} {ERRORS} }} }}"""
UNENROLL = f"""mutation($s: ID!, $c: ID!) {{
  unenrollStudent(studentId: $s, classId: $c) {{ student {{ id }} {ERRORS} }} }}"""
CREATE_SPORT = f"""mutation($id: ID!, $name: String!) {{
  createSport(input: {{id: $id, name: $name}}) {{ sport {{ id }} {ERRORS} }} }}"""
RENAME_SPORT = f"""mutation($id: ID!, $name: String!) {{
  updateSport(id: $id, input: {{name: $name}}) {{ sport {{ id }} {ERRORS} }} }}"""
DELETE_SPORT = f"mutation($id: ID!) {{ deleteSport(id: $id) {{ {ERRORS} }} }}"
JOIN = f"""mutation($s: ID!, $p: ID!) {{
  joinSport(studentId: $s, sportId: $p) {{ student {{ id }} {ERRORS} }} }}"""
LEAVE = f"""mutation($s: ID!, $p: ID!) {{
  leaveSport(studentId: $s, sportId: $p) {{ student {{ id }} {ERRORS} }} }}"""


def school_class(client: TestClient, id_: str, subject: str, teacher_id: str) -> None:
    mutate(client, CREATE_CLASS, {"id": id_, "subject": subject, "teacher": teacher_id})


def student(client: TestClient, id_: str, name: str) -> None:
    mutate(client, CREATE_STUDENT.replace("{}", id_), {"id": id_, "name": name})
