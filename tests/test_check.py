"""`graph-api check` finds each kind of damage a materialized graph can suffer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import make_settings

from graph_api import cli, demo
from graph_api.check import Finding, check_table
from graph_api.graph.context import Services
from graph_api.store import codec, table

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
