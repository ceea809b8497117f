"""Helpers for the write-path tests: build a graph through mutations, read the table raw,
and ask the integrity checker whether the table is consistent."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import pytest
from conftest import Result, execute, make_settings

from graph_api.graph.context import Context, Services
from graph_api.graph.schema import schema
from graph_api.model import keys
from graph_api.model.items import email_guard
from graph_api.ops.check import check_table
from graph_api.store import admin, codec
from graph_api.store.codec import Item

STUDENT_FIELDS = "id name email version home { country state city street }"
# Every mutation document of the tests selects them: `ok` and `all_ok` check they are empty.
USER_ERRORS = "userErrors { code message field currentVersion }"


@contextlib.contextmanager
def fresh_services(endpoint: str, **settings: Any) -> Iterator[Services]:
    """Services over a new empty table (for fixtures wider than one test)."""
    services = Services.create(make_settings(endpoint, **settings))
    admin.create(services.dynamo, services.settings.table)
    try:
        yield services
    finally:
        services.dynamo.call_sync("DeleteTable", {"TableName": services.settings.table}, None)
        services.close()


def run(services: Services, query: str, variables: dict[str, Any] | None = None) -> Result:
    return execute(services, query, variables)


def ok(services: Services, query: str, variables: dict[str, Any] | None = None) -> Any:
    """Run an operation that must succeed (no errors, no user errors); return its data."""
    result = execute(services, query, variables)
    assert result.problems == [], result.problems
    if query.lstrip().startswith("mutation"):
        payloads = result.data.values()
        assert all("userErrors" in p for p in payloads), f"select userErrors in {query}"
    return result.data


def payload(result: Result, field: str) -> dict[str, Any]:
    """The payload of the mutation `field` in `result`."""
    assert isinstance(result.data, dict) and field in result.data, (result.data, result.errors)
    return result.data[field]  # type: ignore[no-any-return]


def single_user_error(result: Result, code: str) -> dict[str, Any]:
    """The one user error of `result`, of `code`; no GraphQL errors beside it."""
    assert result.errors == [], result.errors
    assert result.user_codes == [code], result.user_errors
    return result.user_errors[0]


def requests(result: Result) -> int:
    return result.extensions["dynamodb"]["requests"]  # type: ignore[no-any-return]


def scan(services: Services) -> list[Item]:
    """Every item of the test's table (`store.admin.scan`), sorted by key; not the stream
    reader's lease item, which an app that runs writes on its own."""
    lease = keys.stream_lease().as_item()
    kept = [
        item
        for item in admin.scan(services.dynamo, services.settings.table)
        if (item["PK"], item["SK"]) != (lease["PK"], lease["SK"])
    ]
    return sorted(kept, key=lambda i: (i["PK"], i["SK"]))


def seed(services: Services, nodes: list[Item], links: list[tuple[Any, Item, Item]]) -> None:
    """Write nodes and their relations directly (map entries, edge items, counts, email
    guards), as the mutations would leave them: (relation, owner item, target item) each."""
    out = list(nodes)
    for relation, owner, target in links:
        if (edge := relation.attach(owner, target)) is not None:
            out.append(edge)
    out += [email_guard(n) for n in nodes if n["type"] == "student"]
    admin.batch_write(services.dynamo, services.settings.table, out)


def get_item(services: Services, pk: str, sk: str) -> Item | None:
    response = services.dynamo.call_sync(
        "GetItem",
        {
            "TableName": services.settings.table,
            "Key": codec.encode({"PK": pk, "SK": sk}),
            "ConsistentRead": True,
        },
        None,
    )
    wire = response.get("Item")
    return codec.decode(wire) if wire else None


def of_type(items: list[Item], type_: str) -> list[Item]:
    return [i for i in items if i.get("type") == type_]


def assert_clean(services: Services) -> None:
    """The integrity checker finds nothing wrong with the table."""
    findings = check_table(services.dynamo, services.settings.table)
    assert findings == [], "\n".join(f"{f.kind}: {f.message}" for f in findings)


# -- building the graph through mutations ---------------------------------------------------


def create_student(
    services: Services,
    name: str = "Ada",
    email: str | None = None,
    id: str | None = None,
    home: dict[str, Any] | None = None,
) -> dict[str, Any]:
    input_: dict[str, Any] = {"name": name, "email": email or f"{(id or name).lower()}@ex.org"}
    if id is not None:
        input_["id"] = id
    if home is not None:
        input_["home"] = home
    data = ok(
        services,
        f"""mutation($i: CreateStudentInput!) {{
          createStudent(input: $i) {{ student {{ {STUDENT_FIELDS} }} {USER_ERRORS} }} }}""",
        {"i": input_},
    )
    return data["createStudent"]["student"]  # type: ignore[no-any-return]


def create_teacher(services: Services, id: str, name: str | None = None) -> dict[str, Any]:
    data = ok(
        services,
        f"""mutation($i: CreateTeacherInput!) {{
          createTeacher(input: $i) {{ teacher {{ id name version }} {USER_ERRORS} }} }}""",
        {"i": {"id": id, "name": name or f"Teacher {id}"}},
    )
    return data["createTeacher"]["teacher"]  # type: ignore[no-any-return]


def create_class(
    services: Services, id: str, teacher_id: str, subject: str | None = None
) -> dict[str, Any]:
    data = ok(
        services,
        f"""mutation($i: CreateClassInput!) {{
          createClass(input: $i) {{
            class {{ id subject studentCount version teacher {{ id name }} }} {USER_ERRORS}
          }} }}""",
        {"i": {"id": id, "teacherId": teacher_id, "subject": subject or f"Subject {id}"}},
    )
    return data["createClass"]["class"]  # type: ignore[no-any-return]


def create_sport(
    services: Services, id: str, name: str | None = None, coach: str | None = None
) -> dict[str, Any]:
    data = ok(
        services,
        f"""mutation($i: CreateSportInput!) {{
          createSport(input: $i) {{ sport {{ id name coach studentCount version }} {USER_ERRORS} }}
        }}""",
        {"i": {"id": id, "name": name or f"Sport {id}", "coach": coach}},
    )
    return data["createSport"]["sport"]  # type: ignore[no-any-return]


def _edge_mutation(
    services: Services, field: str, target: str, student_id: str, target_id: str
) -> Result:
    """Link or unlink; the payload answers its target (`class` or `sport`) as
    { id studentCount }."""
    node = target.removesuffix("Id")
    query = f"""mutation($s: ID!, $t: ID!) {{
      {field}(studentId: $s, {target}: $t) {{ {node} {{ id studentCount }} {USER_ERRORS} }} }}"""
    return execute(services, query, {"s": student_id, "t": target_id})


def enroll(services: Services, student_id: str, class_id: str) -> Result:
    return _edge_mutation(services, "enrollStudent", "classId", student_id, class_id)


def unenroll(services: Services, student_id: str, class_id: str) -> Result:
    return _edge_mutation(services, "unenrollStudent", "classId", student_id, class_id)


def join(services: Services, student_id: str, sport_id: str) -> Result:
    return _edge_mutation(services, "joinSport", "sportId", student_id, sport_id)


def leave(services: Services, student_id: str, sport_id: str) -> Result:
    return _edge_mutation(services, "leaveSport", "sportId", student_id, sport_id)


# -- reading it back --------------------------------------------------------------------------


def all_pages(services: Services, query: str, path: list[str], **variables: Any) -> list[Any]:
    """Every node of a connection at `path`, paging with `first: 100` / `after`."""
    nodes: list[Any] = []
    after = None
    while True:
        data = ok(services, query, {**variables, "after": after})
        for step in path:
            data = data[step]
        nodes += [edge["node"] for edge in data["edges"]]
        if not data["pageInfo"]["hasNextPage"]:
            return nodes
        after = data["pageInfo"]["endCursor"]


def class_students(services: Services, class_id: str) -> list[dict[str, Any]]:
    return all_pages(
        services,
        """query($id: ID!, $after: String) { class(id: $id) {
          students(first: 100, after: $after) {
            edges { node { id name } } pageInfo { hasNextPage endCursor }
          } } }""",
        ["class", "students"],
        id=class_id,
    )


def sport_students(services: Services, sport_id: str) -> list[dict[str, Any]]:
    return all_pages(
        services,
        """query($id: ID!, $after: String) { sport(id: $id) {
          students(first: 100, after: $after) {
            edges { node { id name } } pageInfo { hasNextPage endCursor }
          } } }""",
        ["sport", "students"],
        id=sport_id,
    )


def student_classes(services: Services, student_id: str) -> list[dict[str, Any]]:
    data = ok(
        services,
        """query($id: ID!) { student(id: $id) { classes(first: 100) {
          edges { node { id subject teacher { id name } } } } } }""",
        {"id": student_id},
    )
    return [e["node"] for e in data["student"]["classes"]["edges"]]


def student_sports(services: Services, student_id: str) -> list[dict[str, Any]]:
    data = ok(
        services,
        """query($id: ID!) { student(id: $id) { sports(first: 100) {
          edges { node { id name } } } } }""",
        {"id": student_id},
    )
    return [e["node"] for e in data["student"]["sports"]["edges"]]


def teacher_classes(services: Services, teacher_id: str) -> list[dict[str, Any]]:
    data = ok(
        services,
        """query($id: ID!) { teacher(id: $id) { classes(first: 100) {
          edges { node { id subject teacher { id name } } } } } }""",
        {"id": teacher_id},
    )
    return [e["node"] for e in data["teacher"]["classes"]["edges"]]


def catalog(services: Services, field: str) -> list[str]:
    data = ok(services, f"{{ {field}(first: 100) {{ edges {{ node {{ id }} }} }} }}")
    return [e["node"]["id"] for e in data[field]["edges"]]


def by_location(
    services: Services, country: str, state: str | None = None, city: str | None = None
) -> list[dict[str, Any]]:
    data = ok(
        services,
        """query($c: String!, $s: String, $t: String) {
          studentsByLocation(country: $c, state: $s, city: $t, first: 100) {
            edges { node { id name } } } }""",
        {"c": country, "s": state, "t": city},
    )
    return [e["node"] for e in data["studentsByLocation"]["edges"]]


# -- many operations at once --------------------------------------------------------------


async def execute_async(
    services: Services, query: str, variables: dict[str, Any] | None = None
) -> Result:
    """`conftest.execute` inside a running event loop: its own request context."""
    context = Context.create(services, f"test-{uuid.uuid4().hex[:8]}")
    result = await schema.execute(query, variable_values=variables, context_value=context)
    errors = [e.formatted for e in result.errors or []]
    return Result(result.data, errors, result.extensions or {}, context)


def execute_concurrently(
    services: Services,
    operations: Sequence[tuple[str, dict[str, Any] | None]],
    *,
    in_flight: int = 16,
) -> list[Result]:
    """Run the (query, variables) operations at once on one event loop, at most `in_flight`
    at a time (so that none waits past its request deadline); results in the same order."""

    async def run_all() -> list[Result]:
        slots = asyncio.Semaphore(in_flight)

        async def one(query: str, variables: dict[str, Any] | None) -> Result:
            async with slots:
                return await execute_async(services, query, variables)

        return list(await asyncio.gather(*(one(q, v) for q, v in operations)))

    return asyncio.run(run_all())


def all_ok(results: Sequence[Result]) -> None:
    """No errors and no user errors in any of `results`."""
    problems = [e for r in results for e in r.problems]
    assert problems == [], problems[:3]


CREATE_STUDENT_MIN = f"""mutation($i: CreateStudentInput!) {{
  createStudent(input: $i) {{ student {{ id }} {USER_ERRORS} }} }}"""
ENROLL_MIN = f"""mutation($s: ID!, $c: ID!) {{
  enrollStudent(studentId: $s, classId: $c) {{ class {{ id }} {USER_ERRORS} }} }}"""


# -- interleavings forced step by step ------------------------------------------------------
#
# A writer reads, then writes one transaction. `interleave` runs another mutation to
# completion between the two steps, by wrapping the module's `transact` so that the first
# transaction of the mutation under test waits for the intruding mutation first.

Transact = Callable[..., Awaitable[None]]


def interleave(
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    services: Services,
    query: str,
    variables: dict[str, Any] | None = None,
) -> list[Result]:
    """Before `module`'s next transaction, run `query` (once); returns its results."""
    original: Transact = module.transact
    intruders: list[Result] = []
    started: list[bool] = []  # set first: the intruder's own transactions pass straight on

    async def transact_after_intruder(*args: Any, **kwargs: Any) -> None:
        if not started:
            started.append(True)
            intruders.append(await execute_async(services, query, variables))
        await original(*args, **kwargs)

    monkeypatch.setattr(module, "transact", transact_after_intruder)
    return intruders
