"""No DynamoDB read before every gate has passed.

Every request runs through Strawberry's own pipeline (its extensions, then graphql-core's
execution), so a check the request fails reads nothing, whether or not its document ran
before, and a gate added later as a Strawberry extension (an authorization rule, trusted
documents, a rate limit) covers every read too.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from support import AUTH, Result
from test_request_counts import Q1, Q2, Q3, Q4, Q5, targets

from graph_api.graph.auth.tokens import AuthResult, Principal
from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import GraphSchema, build_schema
from graph_api.store.codec import Item
from graph_api.store.table import Table

STUDENTS = "query($ids: [ID!]!) { students(ids: $ids) { name } }"


@pytest.fixture(scope="module")
def five(demo_items: list[Item]) -> dict[str, Any]:
    return targets(demo_items)


def run(
    services: Services,
    query: str,
    variables: dict[str, Any],
    auth: AuthResult | None = None,
    schema: GraphSchema | None = None,
) -> Result:
    async def go() -> Result:
        # This loop's DynamoDB client made and connected, as a serving process has it: the
        # first call of a loop opens it, which takes more loop turns than a request does.
        await services.dynamo.call("DescribeTable", {"TableName": services.settings.table}, None)
        context = Context.create(services, f"test-{uuid.uuid4().hex[:8]}", auth)
        result = await (schema or build_schema(services.settings)).execute(
            query, variable_values=variables, context_value=context
        )
        errors = [e.formatted for e in result.errors or []]
        return Result(result.data, errors, result.extensions or {}, context)

    return asyncio.run(go())


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read asked of the table, as it is asked (before anything is sent or awaited)."""
    asked: list[str] = []
    for name in ("get", "get_many", "query"):
        method = getattr(Table, name)

        def counted(
            self: Table, *args: Any, _name: str = name, _method: Any = method, **kwargs: Any
        ) -> Any:
            asked.append(_name)
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(Table, name, counted)
    return asked


def fresh(query: str) -> str:
    """The query as a text no request has sent yet (a comment of its own)."""
    return f"{query}\n# {uuid.uuid4().hex}"


class OnePerCaller(SchemaExtension):
    """A rate limit, as a later gate would be written: the first request passes, every
    later one is refused before execution."""

    passed = 0

    def on_execute(self) -> Iterator[None]:
        if OnePerCaller.passed:
            error = GraphQLError("slow down", extensions={"code": "RATE_LIMITED"})
            self.execution_context.result = ExecutionResult(data=None, errors=[error])
        OnePerCaller.passed += 1
        yield


def gated(services: Services) -> GraphSchema:
    """The served schema with one more extension after its own."""
    served = build_schema(services.settings)
    schema = GraphSchema(
        query=served.query,
        mutation=served.mutation,
        subscription=served.subscription,
        extensions=[*served.extensions, OnePerCaller],
        execution_context_class=served.execution_context_class,
    )
    schema.settings = services.settings
    return schema


@pytest.mark.parametrize("name", ["Q1", "Q2", "Q3", "Q4", "Q5"])
def test_a_gate_added_as_an_extension_covers_every_read_of_a_query_that_ran(
    services: Services, five: dict[str, Any], reads: list[str], name: str
) -> None:
    query, variables = {
        "Q1": (Q1, {"ids": five["students"]}),
        "Q2": (Q2, {"id": five["class"]}),
        "Q3": (Q3, {"id": five["teacher"]}),
        "Q4": (Q4, {"id": five["sport"]}),
        "Q5": (Q5, {"country": five["country"], "state": five["state"]}),
    }[name]
    schema, query = gated(services), fresh(query)
    OnePerCaller.passed = 0
    first = run(services, query, variables, schema=schema)
    assert first.errors == [] and first.data and first.context.ledger.requests >= 1
    assert reads
    reads.clear()
    again = run(services, query, variables, schema=schema)
    assert [e["extensions"]["code"] for e in again.errors] == ["RATE_LIMITED"]
    assert again.data is None
    assert reads == []


def test_an_error_of_a_root_field_is_the_fields_own(services: Services) -> None:
    query = fresh(STUDENTS)
    assert run(services, query, {"ids": ["stu-0001"]}).errors == []
    refused = [run(services, query, {"ids": ids}) for ids in (["a b"], ["x"] * 101)]
    for result in refused:
        assert result.data is None
        assert [(e["path"], e["extensions"]["code"]) for e in result.errors] == [
            (["students"], "BAD_USER_INPUT")
        ]
        assert result.context.ledger.requests == 0


# Two root fields, so that the one the refusal is not about would have read.
TWO_ROOTS = """query($ids: [ID!]!, $country: String!) { students(ids: $ids) { name }
  studentsByLocation(country: $country, first: 1) { edges { node { name } } } }"""


@pytest.mark.parametrize(
    ("query", "variables", "code"),
    [
        (STUDENTS, {"ids": [True]}, "BAD_USER_INPUT"),  # not an ID: graphql-core refuses it
        (TWO_ROOTS, {"ids": ["stu-0001"], "country": "\ud800"}, "BAD_USER_INPUT"),  # lone surrogate
        (STUDENTS, {"ids": ["stu-0001"] * 11}, "QUERY_TOO_COSTLY"),  # 11 ids cost 11, over 10
    ],
)
def test_a_refused_request_of_a_query_that_ran_sends_nothing(
    services_with: Any, query: str, variables: dict[str, Any], code: str
) -> None:
    services = services_with(max_cost=10)
    query = fresh(query)
    ran = run(services, query, {"ids": ["stu-0001"], "country": "Germany"})
    assert ran.errors == [] and ran.context.ledger.requests >= 1
    refused = run(services, query, variables)
    assert [e["extensions"]["code"] for e in refused.errors] == [code]
    assert refused.context.ledger.requests == 0


def test_a_caller_refused_reads_sends_nothing(services_with: Any) -> None:
    services = services_with(**AUTH, auth_reads=True)
    query = fresh(STUDENTS)
    signed_in = AuthResult(principal=Principal("user-1"))
    assert run(services, query, {"ids": ["stu-0001"]}, signed_in).errors == []
    refused = run(services, query, {"ids": ["stu-0001"]})
    assert [e["extensions"]["code"] for e in refused.errors] == ["UNAUTHENTICATED"]
    assert refused.context.ledger.requests == 0


def test_a_failed_read_is_masked_every_time(services: Services, broken_get_many: None) -> None:
    query = fresh(STUDENTS)
    for result in [run(services, query, {"ids": ["stu-0001"]}) for _ in range(2)]:
        assert [(e["path"], e["extensions"]["code"]) for e in result.errors] == [
            (["students"], "INTERNAL_SERVER_ERROR")
        ]
        assert "secret detail" not in str(result.errors)


@pytest.mark.parametrize("name", [{}, [], 7])
def test_an_operation_name_that_is_not_a_string_is_refused(client: Any, name: Any) -> None:
    query = fresh("query Named { __typename }")
    assert client.post("/graphql", json={"query": query}).status_code == 200
    response = client.post("/graphql", json={"query": query, "operationName": name})
    assert response.status_code == 400
    assert response.json()["errors"][0]["extensions"]["code"] != "INTERNAL_SERVER_ERROR"
