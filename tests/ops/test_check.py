"""`graph-api check` finds each kind of damage a materialized graph can suffer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from old_layout import new_items, old_items, random_school
from support import awaited, make_settings, scan, wire_key

from graph_api import cli
from graph_api.errors import Unavailable
from graph_api.events.lease import Lease
from graph_api.model import keys
from graph_api.ops.check import Finding, check_table
from graph_api.settings import Settings
from graph_api.store import admin, codec, retry
from graph_api.store.admin import ScanGaveUp
from graph_api.store.client import Dynamo

SEED_STUDENTS = 12


@dataclass
class Graph:
    dynamo: Dynamo
    settings: Settings


@pytest.fixture
def graph(endpoint: str) -> Iterator[Graph]:
    """A fresh table holding a small, whole school."""
    settings = make_settings(endpoint)
    dynamo = Dynamo(settings)
    awaited(admin.create(dynamo, settings.table))
    awaited(admin.batch_write(dynamo, settings.table, new_items(random_school(SEED_STUDENTS, 5))))
    yield Graph(dynamo, settings)
    awaited(dynamo.call("DeleteTable", {"TableName": settings.table}, None, missing_table=False))


def call(graph: Graph, operation: str, **params: Any) -> Any:
    return awaited(
        graph.dynamo.call(
            operation, {"TableName": graph.settings.table, **params}, None, missing_table=False
        )
    )


def node(kind: str, id_: str) -> tuple[str, str]:
    return f"{kind}#{id_}", f"{kind}#{id_}"


def where(pk: str, sk: str) -> str:
    return f"{pk} / {sk}"


def set_attr(graph: Graph, pk: str, sk: str, path: str | tuple[str, ...], value: Any) -> None:
    """SET one attribute, or a document path into maps."""
    parts = (path,) if isinstance(path, str) else path
    at_path(graph, pk, sk, parts, "SET {} = :v", {":v": codec.encode_value(value)})


def remove_attr(graph: Graph, pk: str, sk: str, *path: str) -> None:
    at_path(graph, pk, sk, path, "REMOVE {}")


def at_path(
    graph: Graph,
    pk: str,
    sk: str,
    path: tuple[str, ...],
    clause: str,
    values: dict[str, Any] | None = None,
) -> None:
    """An UpdateItem of `clause`, its `{}` the document path `path` (each part a name)."""
    names = {f"#a{i}": part for i, part in enumerate(path)}
    extra = {"ExpressionAttributeValues": values} if values else {}
    call(
        graph,
        "UpdateItem",
        Key=wire_key(pk, sk),
        UpdateExpression=clause.format(".".join(names)),
        ExpressionAttributeNames=names,
        **extra,
    )


def put(graph: Graph, item: dict[str, Any]) -> None:
    call(graph, "PutItem", Item=codec.encode(item))


def findings(graph: Graph) -> list[Finding]:
    return awaited(check_table(graph.dynamo, graph.settings.table))


def kinds(graph: Graph) -> set[tuple[str, str]]:
    return {(f.kind, f.key) for f in findings(graph)}


def found(graph: Graph, kind: str) -> list[tuple[str, str]]:
    """(key, message) of every finding of `kind`."""
    return sorted((f.key, f.message) for f in findings(graph) if f.kind == kind)


def first_enrolment(graph: Graph) -> dict[str, Any]:
    return next(i for i in scan(graph) if i["type"] == "enrolment")


def student_with_home(graph: Graph) -> dict[str, Any]:
    return next(i for i in scan(graph) if i["type"] == "student" and "home" in i)


def test_a_seeded_school_is_clean(graph: Graph) -> None:
    assert findings(graph) == []


def test_edge_and_entries_of_a_missing_class_are_orphans(graph: Graph) -> None:
    edge = first_enrolment(graph)
    student, klass = edge["studentId"], edge["classId"]
    call(graph, "DeleteItem", Key=wire_key(*node("CLASS", klass)))
    assert (where(edge["PK"], edge["SK"]), f"class {klass} missing") in found(graph, "orphan-edge")
    assert (
        where(*node("STUDENT", student)),
        f"student {student}'s classes list class {klass}, which does not exist",
    ) in found(graph, "orphan-entry")


def test_gsi_key_that_disagrees_with_its_item(graph: Graph) -> None:
    edge = first_enrolment(graph)
    set_attr(graph, edge["PK"], edge["SK"], "GSI1PK", "STUDENT#elsewhere")
    assert found(graph, "bad-key") == [
        (where(edge["PK"], edge["SK"]), "GSI1PK disagree with its endpoints")
    ]


def test_location_keys_follow_the_home(graph: Graph) -> None:
    student = student_with_home(graph)
    set_attr(graph, student["PK"], student["SK"], ("home", "city"), "Elsewhere")
    assert found(graph, "bad-key") == [
        (where(student["PK"], student["SK"]), "GSI1SK disagree with the home's place")
    ]
    remove_attr(graph, student["PK"], student["SK"], "home")  # keys left without a home
    assert found(graph, "bad-key") == [
        (where(student["PK"], student["SK"]), "GSI1PK, GSI1SK disagree with the home's place")
    ]


def test_stale_student_name_on_an_edge(graph: Graph) -> None:
    edge = first_enrolment(graph)
    set_attr(graph, edge["PK"], edge["SK"], "studentName", "Old name")
    assert found(graph, "stale-copy") == [
        (where(edge["PK"], edge["SK"]), f"studentName differ from student {edge['studentId']}'s")
    ]


def test_stale_copy_in_a_map_entry(graph: Graph) -> None:
    edge = first_enrolment(graph)
    student, klass = edge["studentId"], edge["classId"]
    set_attr(graph, *node("STUDENT", student), ("classes", klass, "subject"), "Old subject")
    assert found(graph, "stale-copy") == [
        (
            where(*node("STUDENT", student)),
            f"student {student}'s classes list class {klass} with subject unlike the class's",
        )
    ]


def test_stale_teacher_name_on_a_class(graph: Graph) -> None:
    set_attr(graph, *node("CLASS", "cls-001"), "teacherName", "Somebody Else")
    assert ("stale-copy", where(*node("CLASS", "cls-001"))) in kinds(graph)


def roster_shards(class_id: str) -> list[keys.Key]:
    return keys.roster_shards(keys.Kind.CLASS, class_id)


def test_counters_that_differ_from_entries_and_edges(graph: Graph) -> None:
    for n, shard in enumerate(roster_shards("cls-002")):  # a class counts in its shards
        set_attr(graph, *shard, "count", 0 if n else 999)
    set_attr(graph, *node("STUDENT", "stu-0001"), "edgeCount", 0)
    set_attr(graph, *node("TEACHER", "tch-001"), "classCount", 7)
    counts = dict(found(graph, "count"))
    assert counts[where(*node("CLASS", "cls-002"))].startswith("studentCount is 999, edges say ")
    assert counts[where(*node("STUDENT", "stu-0001"))].startswith("edgeCount is 0, entries say ")
    assert counts[where(*node("TEACHER", "tch-001"))] == "classCount is 7, entries say 3"


def test_a_class_with_a_shard_missing_or_stamped_unlike_it_or_none(graph: Graph) -> None:
    first, second, *_ = roster_shards("cls-001")
    call(graph, "DeleteItem", Key=wire_key(*first))
    set_attr(graph, *second, "subject", "Not Its Subject")
    where_class = where(*node("CLASS", "cls-001"))
    assert found(graph, "roster-shard") == [
        (
            where_class,
            "class cls-001's roster counter lacks shard(s) 0 (`graph-api migrate` makes them)",
        )
    ]
    assert (where(*second), "subject unlike class cls-001's") in found(graph, "stale-copy")
    # A class whose count is on its item (before roster shards): migrate moves it into them.
    set_attr(graph, *node("CLASS", "cls-003"), "studentCount", 0)
    assert (
        where(*node("CLASS", "cls-003")),
        "studentCount is on the class item, not in shards (old layout: run `graph-api migrate`)",
    ) in found(graph, "old-layout")


def test_entry_without_its_edge(graph: Graph) -> None:
    edge = first_enrolment(graph)
    student, klass = edge["studentId"], edge["classId"]
    call(graph, "DeleteItem", Key=wire_key(edge["PK"], edge["SK"]))
    assert found(graph, "missing-edge") == [
        (
            where(*node("STUDENT", student)),
            f"student {student}'s classes list class {klass} but no enrolment edge",
        )
    ]
    assert ("count", where(*node("CLASS", klass))) in kinds(graph)  # one edge fewer


def test_edge_without_its_entry(graph: Graph) -> None:
    edge = first_enrolment(graph)
    student, klass = edge["studentId"], edge["classId"]
    remove_attr(graph, *node("STUDENT", student), "classes", klass)
    assert found(graph, "missing-entry") == [
        (
            where(edge["PK"], edge["SK"]),
            f"student {student}'s classes do not list class {klass}",
        )
    ]
    assert ("count", where(*node("STUDENT", student))) in kinds(graph)  # one entry fewer


def test_a_teacher_lists_exactly_the_classes_naming_it(graph: Graph) -> None:
    # cls-001 is tch-001's: listed by tch-002 as well, and no longer by tch-001.
    set_attr(graph, *node("TEACHER", "tch-002"), ("classes", "cls-001"), {"subject": "x"})
    remove_attr(graph, *node("TEACHER", "tch-001"), "classes", "cls-001")
    assert found(graph, "teaching") == [
        (
            where(*node("TEACHER", "tch-002")),
            "teacher tch-002's classes list class cls-001, whose teacher is tch-001",
        )
    ]
    assert found(graph, "missing-entry") == [
        (
            where(*node("CLASS", "cls-001")),
            "class cls-001 is not in the classes of its teacher tch-001",
        )
    ]


def test_a_map_past_its_bound(graph: Graph) -> None:
    sports = {f"spt-{i:03d}": {"name": f"Sport {i}"} for i in range(51)}
    set_attr(graph, *node("STUDENT", "stu-0001"), "sports", sports)
    assert found(graph, "bounds") == [
        (
            where(*node("STUDENT", "stu-0001")),
            "student stu-0001's sports has 51 entries, more than 50",
        )
    ]


def test_email_guard_without_student_and_student_without_guard(graph: Graph) -> None:
    call(graph, "DeleteItem", Key=wire_key("EMAIL#student1@school.example", "EMAIL"))
    put(
        graph,
        {"PK": "EMAIL#ghost@school.example", "SK": "EMAIL", "type": "email", "studentId": "ghost"},
    )
    found_kinds = kinds(graph)
    assert ("email-guard", where(*node("STUDENT", "stu-0001"))) in found_kinds
    assert ("email-guard", "EMAIL#ghost@school.example / EMAIL") in found_kinds


def test_items_of_the_old_layout_say_to_migrate(graph: Graph) -> None:
    old = {(i["PK"], i["SK"]): i for i in old_items(random_school(SEED_STUDENTS, 5))}
    home = next(i for i in old.values() if i["type"] == "home")
    teaching = old[("TEACHER#tch-001", "CLASS#cls-001")]
    enrolment = next(i for i in old.values() if i["type"] == "enrolment")
    for item in (home, teaching, enrolment):
        put(graph, item)
    remove_attr(graph, *node("TEACHER", "tch-002"), "classes")  # an old-layout node
    migrate = " (old layout: run `graph-api migrate`)"
    student, klass = enrolment["studentId"], enrolment["classId"]
    assert found(graph, "old-layout") == sorted(
        [
            (
                where(home["PK"], "HOME"),
                f"home of student {home['studentId']} is an item of its own" + migrate,
            ),
            (
                where("TEACHER#tch-001", "CLASS#cls-001"),
                "teaching edge of teacher tch-001 to class cls-001" + migrate,
            ),
            (
                where(enrolment["PK"], enrolment["SK"]),
                f"enrolment of student {student} in class {klass} is in the student's partition"
                + migrate,
            ),
            (where(*node("TEACHER", "tch-002")), "teacher tch-002 has no classes map" + migrate),
        ]
    )


def test_the_stream_readers_lease_is_no_finding(graph: Graph) -> None:
    async def hold() -> None:
        lease = Lease(graph.dynamo, graph.settings.table, 10.0)
        assert await lease.take()
        await lease.begin_stream("arn:stream", {"shard-1": "LATEST"})
        await lease.checkpoint("shard-1", "000000000000000000042")

    asyncio.run(hold())
    assert findings(graph) == []
    # Only the lease's own key: an item of that type anywhere else is unknown.
    put(graph, {"PK": "LEASE#other", "SK": "LEASE", "type": "lease"})
    assert found(graph, "unknown-item") == [
        (where("LEASE#other", "LEASE"), "item of unknown type 'lease'")
    ]


def test_cli_exit_status_says_clean_or_not(
    graph: Graph,
    endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("GRAPH_API_TABLE", graph.settings.table)
    assert cli.main(["check"]) == 0
    assert "clean" in capsys.readouterr().out
    set_attr(graph, *node("TEACHER", "tch-001"), "classCount", -1)
    assert cli.main(["check"]) == 1
    out = capsys.readouterr().out
    assert "TEACHER#tch-001" in out and "classCount is -1" in out and "1 finding(s)" in out


class ScanTimeouts:
    """A before-send hook on Scan: records each request and makes chosen ones time out, as
    botocore does when a page is not read within read_timeout (see tests/store/test_faults.py)."""

    def __init__(self, failing: Callable[[int], bool]) -> None:
        self.failing = failing  # by the request's number, from 1
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: Any, **_: Any) -> None:
        self.sent.append(json.loads(request.body))
        if self.failing(len(self.sent)):
            raise ReadTimeoutError(endpoint_url="http://injected")

    def install(self, dynamo: Dynamo) -> None:
        dynamo.register("before-send.dynamodb.Scan", self)


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff sleeps the scan asks for, recorded instead of slept."""
    asked: list[float] = []

    async def sleep(delay: float) -> None:
        asked.append(delay)

    monkeypatch.setattr(retry, "sleep", sleep)
    return asked


def item_count(graph: Graph) -> int:
    return int(call(graph, "Scan", Select="COUNT")["Count"])


def test_a_page_that_times_out_is_retried_smaller_and_the_scan_pages_on(
    graph: Graph, endpoint: str, pauses: list[float]
) -> None:
    dynamo = Dynamo(make_settings(endpoint, table=graph.settings.table))
    timeouts = ScanTimeouts(lambda n: n in (2, 3))  # the second page, twice
    timeouts.install(dynamo)
    scanned: list[int] = []
    assert awaited(check_table(dynamo, graph.settings.table, scanned.append, page_size=40)) == []
    assert scanned[-1] == item_count(graph)  # every item, none twice
    first, failed, retried, smaller = timeouts.sent[:4]
    assert "ExclusiveStartKey" not in first
    # The same page again, from where the scan was, asking for fewer items each time.
    assert failed["ExclusiveStartKey"] == retried["ExclusiveStartKey"]
    assert retried["ExclusiveStartKey"] == smaller["ExclusiveStartKey"]
    assert [r["Limit"] for r in (first, failed, retried, smaller)] == [40, 40, 20, 10]
    assert len(pauses) == 2 and all(0 <= p <= retry.OFFLINE.cap for p in pauses)


def test_the_check_gives_up_on_a_page_saying_how_far_it_got(
    graph: Graph,
    endpoint: str,
    pauses: list[float],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    timeouts = ScanTimeouts(lambda n: n > 1)  # the first page answers, then none

    class Timing(Dynamo):
        def __init__(self, settings: Settings) -> None:
            super().__init__(settings)
            timeouts.install(self)

    monkeypatch.setattr(cli, "Dynamo", Timing)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("GRAPH_API_TABLE", graph.settings.table)
    assert cli.main(["check", "--page-size", "25"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no verdict on half a table
    assert "Traceback" not in captured.err
    assert "\r" not in captured.err  # not a terminal: the last progress line only, once
    where, progress, error = captured.err.rstrip("\n").split("\n")
    assert where == f"graph-api: DynamoDB at {endpoint}, table {graph.settings.table}"
    assert progress.endswith("checking " + graph.settings.table + ": 25 items scanned")
    assert error.startswith(
        f"graph-api: check gave up after 25 items scanned: the next Scan page failed"
        f" {admin.SCAN_ATTEMPTS} time(s): DynamoDB did not answer"
    )
    assert len(timeouts.sent) == 1 + admin.SCAN_ATTEMPTS  # bounded
    assert len(pauses) == admin.SCAN_ATTEMPTS - 1


def test_scan_gave_up_carries_the_count_and_the_last_error(
    graph: Graph, endpoint: str, pauses: list[float]
) -> None:
    dynamo = Dynamo(make_settings(endpoint, table=graph.settings.table))
    ScanTimeouts(lambda n: n > 2).install(dynamo)
    with pytest.raises(ScanGaveUp) as raised:
        awaited(check_table(dynamo, graph.settings.table, page_size=10))
    assert (raised.value.scanned, raised.value.pages) == (20, 2)
    cause = raised.value.__cause__
    assert isinstance(cause, Unavailable) and isinstance(cause.__cause__, ReadTimeoutError)
