"""`graph-api check` finds each kind of damage a materialized graph can suffer."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from conftest import make_settings

from graph_api import check, cli, demo
from graph_api.check import Finding, ScanGaveUp, check_table
from graph_api.errors import Unavailable
from graph_api.graph.context import Services
from graph_api.settings import Settings
from graph_api.store import codec, table
from graph_api.store.client import Dynamo

SEED_STUDENTS = 12


@pytest.fixture
def graph(endpoint: str) -> Iterator[Services]:
    """A fresh table holding a small, whole demo school."""
    services = Services.create(make_settings(endpoint))
    table.create(services.dynamo, services.settings.table)
    table.batch_write(services.dynamo, services.settings.table, demo.generate(SEED_STUDENTS, 5))
    yield services
    services.dynamo.call_sync("DeleteTable", {"TableName": services.settings.table}, None)
    services.close()


def call(services: Services, operation: str, **params: Any) -> Any:
    return services.dynamo.call_sync(
        operation, {"TableName": services.settings.table, **params}, None
    )


def key(pk: str, sk: str) -> dict[str, Any]:
    return codec.encode({"PK": pk, "SK": sk})


def set_attr(services: Services, pk: str, sk: str, name: str, value: Any) -> None:
    call(
        services,
        "UpdateItem",
        Key=key(pk, sk),
        UpdateExpression="SET #a = :v",
        ExpressionAttributeNames={"#a": name},
        ExpressionAttributeValues={":v": codec.encode_value(value)},
    )


def findings(services: Services) -> list[Finding]:
    return check_table(services.dynamo, services.settings.table)


def kinds(services: Services) -> set[tuple[str, str]]:
    return {(f.kind, f.key) for f in findings(services)}


def first_enrolment(services: Services) -> dict[str, Any]:
    items = [codec.decode(i) for i in call(services, "Scan")["Items"]]
    return sorted((i for i in items if i["type"] == "enrolment"), key=lambda i: (i["PK"], i["SK"]))[
        0
    ]


def test_a_seeded_school_is_clean(graph: Services) -> None:
    assert findings(graph) == []


def test_edge_without_its_class_is_an_orphan(graph: Services) -> None:
    edge = first_enrolment(graph)
    call(graph, "DeleteItem", Key=key(f"CLASS#{edge['classId']}", f"CLASS#{edge['classId']}"))
    assert ("orphan-edge", f"{edge['PK']} / {edge['SK']}") in kinds(graph)


def test_gsi_key_that_disagrees_with_its_item(graph: Services) -> None:
    edge = first_enrolment(graph)
    set_attr(graph, edge["PK"], edge["SK"], "GSI1PK", "CLASS#elsewhere")
    assert ("bad-key", f"{edge['PK']} / {edge['SK']}") in kinds(graph)


def test_stale_copy_on_an_edge(graph: Services) -> None:
    edge = first_enrolment(graph)
    set_attr(graph, edge["PK"], edge["SK"], "subject", "Old subject")
    found = [f for f in findings(graph) if f.kind == "stale-copy"]
    assert [f.key for f in found] == [f"{edge['PK']} / {edge['SK']}"]
    assert "subject" in found[0].message


def test_stale_teacher_name_on_a_class(graph: Services) -> None:
    set_attr(graph, "CLASS#cls-001", "CLASS#cls-001", "teacherName", "Somebody Else")
    assert ("stale-copy", "CLASS#cls-001 / CLASS#cls-001") in kinds(graph)


def test_counter_that_differs_from_its_edges(graph: Services) -> None:
    set_attr(graph, "CLASS#cls-002", "CLASS#cls-002", "studentCount", 999)
    set_attr(graph, "STUDENT#stu-0001", "STUDENT#stu-0001", "edgeCount", 0)
    found = kinds(graph)
    assert ("count", "CLASS#cls-002 / CLASS#cls-002") in found
    assert ("count", "STUDENT#stu-0001 / STUDENT#stu-0001") in found


def test_email_guard_without_student_and_student_without_guard(graph: Services) -> None:
    call(graph, "DeleteItem", Key=key("EMAIL#student1@school.example", "EMAIL"))
    call(
        graph,
        "PutItem",
        Item=codec.encode(
            {
                "PK": "EMAIL#ghost@school.example",
                "SK": "EMAIL",
                "type": "email",
                "studentId": "ghost",
            }
        ),
    )
    found = kinds(graph)
    assert ("email-guard", "STUDENT#stu-0001 / STUDENT#stu-0001") in found
    assert ("email-guard", "EMAIL#ghost@school.example / EMAIL") in found


def test_home_of_a_missing_student(graph: Services) -> None:
    call(
        graph,
        "PutItem",
        Item=codec.encode(
            {
                "PK": "STUDENT#gone",
                "SK": "HOME",
                "type": "home",
                "studentId": "gone",
                "studentName": "Gone",
                "country": "X",
                "state": "Y",
                "city": "Z",
            }
        ),
    )
    assert ("orphan-home", "STUDENT#gone / HOME") in kinds(graph)


def test_cli_exit_status_says_clean_or_not(
    graph: Services,
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
    set_attr(graph, "SPORT#spt-01", "SPORT#spt-01", "studentCount", -1)
    assert cli.main(["check"]) == 1
    out = capsys.readouterr().out
    assert "SPORT#spt-01" in out and "1 finding(s)" in out


class ScanTimeouts:
    """A before-send hook on Scan: records each request and makes chosen ones time out, as
    botocore does when a page is not read within read_timeout (see tests/test_faults.py)."""

    def __init__(self, failing: Callable[[int], bool]) -> None:
        self.failing = failing  # by the request's number, from 1
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: Any, **_: Any) -> None:
        self.sent.append(json.loads(request.body))
        if self.failing(len(self.sent)):
            raise ReadTimeoutError(endpoint_url="http://injected")

    def install(self, dynamo: Dynamo) -> None:
        dynamo.client.meta.events.register("before-send.dynamodb.Scan", self)


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff sleeps the scan asks for, recorded instead of slept."""
    asked: list[float] = []
    monkeypatch.setattr(check, "sleep", asked.append)
    return asked


def item_count(services: Services) -> int:
    return int(call(services, "Scan", Select="COUNT")["Count"])


def test_a_page_that_times_out_is_retried_smaller_and_the_scan_pages_on(
    graph: Services, endpoint: str, pauses: list[float]
) -> None:
    dynamo = Dynamo(make_settings(endpoint, table=graph.settings.table))
    timeouts = ScanTimeouts(lambda n: n in (2, 3))  # the second page, twice
    timeouts.install(dynamo)
    scanned: list[int] = []
    try:
        assert check_table(dynamo, graph.settings.table, scanned.append, page_size=40) == []
    finally:
        dynamo.close()
    assert scanned[-1] == item_count(graph)  # every item, none twice
    first, failed, retried, smaller = timeouts.sent[:4]
    assert "ExclusiveStartKey" not in first
    # The same page again, from where the scan was, asking for fewer items each time.
    assert failed["ExclusiveStartKey"] == retried["ExclusiveStartKey"]
    assert retried["ExclusiveStartKey"] == smaller["ExclusiveStartKey"]
    assert [r["Limit"] for r in (first, failed, retried, smaller)] == [40, 40, 20, 10]
    assert len(pauses) == 2 and all(0 <= p <= check.SCAN_BACKOFF_CAP for p in pauses)


def test_the_check_gives_up_on_a_page_saying_how_far_it_got(
    graph: Services,
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
    progress, error = captured.err.rstrip("\n").split("\n")
    assert progress.endswith("checking " + graph.settings.table + ": 25 items scanned")
    assert error.startswith(
        f"graph-api: check gave up after 25 items scanned: the next Scan page failed"
        f" {check.SCAN_ATTEMPTS} time(s): DynamoDB did not answer"
    )
    assert len(timeouts.sent) == 1 + check.SCAN_ATTEMPTS  # bounded
    assert len(pauses) == check.SCAN_ATTEMPTS - 1


def test_scan_gave_up_carries_the_count_and_the_last_error(
    graph: Services, endpoint: str, pauses: list[float]
) -> None:
    dynamo = Dynamo(make_settings(endpoint, table=graph.settings.table))
    ScanTimeouts(lambda n: n > 2).install(dynamo)
    try:
        with pytest.raises(ScanGaveUp) as raised:
            check_table(dynamo, graph.settings.table, page_size=10)
    finally:
        dynamo.close()
    assert (raised.value.scanned, raised.value.pages) == (20, 2)
    cause = raised.value.__cause__
    assert isinstance(cause, Unavailable) and isinstance(cause.__cause__, ReadTimeoutError)
