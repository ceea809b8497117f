from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import botocore.exceptions
import pytest
from starlette.testclient import TestClient
from support import (
    Faults,
    Gql,
    awaited,
    create_class,
    create_sport,
    create_student,
    create_teacher,
    dynamodb_requests,
    enroll,
    join,
    run,
)

from graph_api.graph.engine.context import Services
from graph_api.model import keys
from graph_api.model.keys import Kind
from graph_api.store import codec


@pytest.mark.parametrize(
    "query",
    [
        "{ nope }",
        '{ student(id: "stu-0001") { nope } }',
        "{ student { id } }",
        '{ teachers(first: "ten") { edges { cursor } } }',
    ],
    ids=["unknown root field", "unknown nested field", "missing argument", "argument type"],
)
def test_invalid_document_is_bad_user_input(gql: Gql, query: str) -> None:
    result = gql(query)
    assert result.data is None
    assert result.errors
    assert set(result.codes) == {"BAD_USER_INPUT"}
    assert dynamodb_requests(result) == 0


def test_syntax_error_is_bad_user_input(gql: Gql) -> None:
    result = gql("{ student(id: ")
    assert result.data is None
    assert len(result.errors) == 1
    assert result.errors[0].get("extensions", {}).get("code") == "BAD_USER_INPUT"


def test_wrong_variable_type_is_bad_user_input(gql: Gql) -> None:
    result = gql(
        "query($first: Int) { teachers(first: $first) { edges { cursor } } }", {"first": "x"}
    )
    assert result.codes == ["BAD_USER_INPUT"]


# -- unexpected errors are masked and logged ---------------------------------------------


@pytest.mark.usefixtures("broken_get_many")
def test_unexpected_exception_is_masked_with_the_request_id(
    gql: Gql, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        result = gql('{ student(id: "stu-0001") { id } teachers(first: 1) { edges { cursor } } }')
    request_id = result.context.request_id
    assert result.data["student"] is None
    assert len(result.data["teachers"]["edges"]) == 1
    assert result.codes == ["INTERNAL_SERVER_ERROR"]
    (error,) = result.errors
    assert request_id in error["message"]
    assert error["extensions"] == {"code": "INTERNAL_SERVER_ERROR", "requestId": request_id}
    assert error["path"] == ["student"]
    text = json.dumps(result.errors)
    assert "secret detail" not in text
    assert "Traceback" not in text
    assert "RuntimeError" not in text
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert len(logged) == 1
    assert logged[0].levelno == logging.ERROR
    assert logged[0].exc_info is not None
    assert isinstance(logged[0].exc_info[1], RuntimeError)
    assert "secret detail" in caplog.text


@pytest.mark.usefixtures("broken_get_many")
def test_masked_error_over_http_names_the_response_request_id(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        response = client.post(
            "/graphql",
            json={"query": '{ student(id: "stu-0001") { id } }'},
            headers={"X-Request-ID": "trace-42"},
        )
    assert response.status_code == 200
    assert response.headers["x-request-id"] == "trace-42"
    (error,) = response.json()["errors"]
    assert error["extensions"] == {"code": "INTERNAL_SERVER_ERROR", "requestId": "trace-42"}
    assert "trace-42" in error["message"]
    assert "secret detail" not in response.text
    assert any("trace-42" in r.getMessage() for r in caplog.records)


def test_client_errors_are_not_logged(gql: Gql, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="graph_api"):
        result = gql('{ student(id: "a#b") { id } nope }')
    assert result.errors
    assert caplog.records == []


# -- DynamoDB trouble ---------------------------------------------------------------------


def client_error(code: str, operation: str) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError({"Error": {"Code": code, "Message": "inner"}}, operation)


@pytest.fixture
def fail_operation(services: Services) -> Iterator[Callable[[str, Exception], None]]:
    """`fail(operation, error)`: every call of the operation raises `error` where botocore's
    `before-send` event is emitted, on boto3's path and on the direct one alike."""
    faults = Faults(services.dynamo)
    yield lambda operation, error: faults.fail(operation, None, lambda: error)
    faults.undo()


SIBLINGS = (
    '{ a: class(id: "cls-001") { id students(first: 3) { edges { cursor } } }'
    ' b: student(id: "stu-0001") { name } }'
)


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "ThrottlingException"])
def test_throttled_query_is_unavailable_on_its_field_only(
    gql: Gql,
    services: Services,
    demo_items: list[Any],
    fail_operation: Callable[[str, Exception], None],
    code: str,
) -> None:
    fail_operation("Query", client_error(code, "Query"))
    result = gql(SIBLINGS)
    name = next(i["name"] for i in demo_items if i["type"] == "student" and i["id"] == "stu-0001")
    assert result.data == {"a": None, "b": {"name": name}}
    (error,) = result.errors
    assert error["extensions"] == {"code": "UNAVAILABLE"}
    # `class(id) { students }` reads the class and its first page in one Query: that field.
    assert error["path"] == ["a"]
    assert "inner" not in error["message"]


def test_unreachable_dynamodb_is_unavailable(
    gql: Gql, services: Services, fail_operation: Callable[[str, Exception], None]
) -> None:
    error = botocore.exceptions.EndpointConnectionError(endpoint_url="http://nowhere")
    fail_operation("Query", error)
    result = gql(SIBLINGS)
    assert result.codes == ["UNAVAILABLE"]
    assert result.data["b"] is not None


def test_throttled_batch_get_is_unavailable_while_a_query_sibling_answers(
    gql: Gql, services: Services, fail_operation: Callable[[str, Exception], None]
) -> None:
    error = client_error("ProvisionedThroughputExceededException", "BatchGetItem")
    fail_operation("BatchGetItem", error)
    result = gql('{ student(id: "stu-0001") { id } sports(first: 2) { edges { cursor } } }')
    assert result.data["student"] is None
    assert len(result.data["sports"]["edges"]) == 2
    assert result.codes == ["UNAVAILABLE"]
    assert result.errors[0]["path"] == ["student"]


def test_other_dynamodb_error_is_masked_as_internal(
    gql: Gql, services: Services, fail_operation: Callable[[str, Exception], None]
) -> None:
    fail_operation("Query", client_error("ValidationException", "Query"))
    result = gql(SIBLINGS)
    assert result.codes == ["INTERNAL_SERVER_ERROR"]
    assert "inner" not in json.dumps(result.errors)
    assert result.data["b"] is not None


def test_throttled_root_connection_nulls_only_itself(
    gql: Gql, services: Services, fail_operation: Callable[[str, Exception], None]
) -> None:
    # Connections are nullable: the failed one is null, its siblings answer.
    error = client_error("ProvisionedThroughputExceededException", "Query")
    fail_operation("Query", error)
    result = gql('{ student(id: "stu-0001") { id } teachers(first: 1) { edges { cursor } } }')
    assert result.codes == ["UNAVAILABLE"]
    assert result.errors[0]["path"] == ["teachers"]
    assert result.data == {"student": {"id": "stu-0001"}, "teachers": None}


# -- messages name ids, never keys -----------------------------------------------------------


@pytest.mark.parametrize("kind", [Kind.CLASS, Kind.SPORT])
def test_a_damaged_count_is_reported_by_id_not_by_key(empty_services: Services, kind: Kind) -> None:
    svc = empty_services
    create_student(svc, "Ada", id="s1")
    if kind is Kind.CLASS:
        create_teacher(svc, "t1")
        create_class(svc, "n1", "t1")
        assert enroll(svc, "s1", "n1").errors == []
    else:
        create_sport(svc, "n1")
        assert join(svc, "s1", "n1").errors == []
    # A count damaged behind the API's back (a bad import, a hand edit): deleting the
    # student cannot move its roster shard below zero, and says so.
    node = keys.node(kind, "n1")
    shard = keys.roster_shard(kind, "n1", "s1")
    awaited(
        svc.dynamo.call(
            "UpdateItem",
            {
                "TableName": svc.settings.table,
                "Key": codec.encode(shard.as_item()),
                "UpdateExpression": "SET #count = :zero",
                "ExpressionAttributeNames": {"#count": "count"},
                "ExpressionAttributeValues": {":zero": codec.encode_value(0)},
            },
            None,
            missing_table=False,
        )
    )
    result = run(  # `execute` also checks every message for '#'
        svc, 'mutation { deleteStudent(id: "s1") { deletedId userErrors { code message } } }'
    )
    message = f"{kind.lower()} n1 counts no students; run graph-api check"
    assert result.user_errors == [{"code": "CONFLICT", "message": message}]
    assert node.pk not in message and shard.sk not in message


def test_a_missing_table_is_unavailable_naming_it_and_create_table(endpoint: str) -> None:
    from support import close_services, make_settings

    services = Services.create(make_settings(endpoint, table="no-such-table"))
    try:
        result = run(services, '{ student(id: "stu-0001") { name } }')
        assert result.codes == ["UNAVAILABLE"]
        message = result.errors[0]["message"]
        assert "no-such-table" in message and "graph-api create-table" in message
        assert dynamodb_requests(result) == 1  # the same again would fail again: no retry
    finally:
        close_services(services)
