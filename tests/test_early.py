"""A query that has run before sends its root reads as it arrives (graph/early.py).

What a client notices: the answer, its errors and its DynamoDB requests are those of the
first run, and a request that a check refuses sends nothing, whether or not its document
ran before. What the start changes is when the first read leaves: before execution begins
(counted here at the executor's construction), where the first run sends it after.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from support import AUTH, Result
from test_request_counts import Q1, Q2, Q3, Q4, Q5, targets, wave_shape

from graph_api.graph import execution
from graph_api.graph.context import Context, Services
from graph_api.graph.schema import build_schema
from graph_api.graph.tokens import AuthResult, Principal
from graph_api.store.codec import Item

STUDENTS = "query($ids: [ID!]!) { students(ids: $ids) { name } }"


@pytest.fixture(scope="module")
def five(demo_items: list[Item]) -> dict[str, Any]:
    return targets(demo_items)


@pytest.fixture
def sent_before_execution(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The requests each operation had sent when its executor was made."""
    seen: list[int] = []
    made = execution.ExecutionContext.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        context = self.context_value
        seen.append(context.ledger.requests if isinstance(context, Context) else -1)

    monkeypatch.setattr(execution.ExecutionContext, "__init__", init)
    return seen


def run(
    services: Services, query: str, variables: dict[str, Any], auth: AuthResult | None = None
) -> Result:
    async def go() -> Result:
        # This loop's DynamoDB client made and connected, as a serving process has it: the
        # first call of a loop opens it, which takes more loop turns than a request does.
        await services.dynamo.call("DescribeTable", {"TableName": services.settings.table}, None)
        context = Context.create(services, f"test-{uuid.uuid4().hex[:8]}", auth)
        result = await build_schema(services.settings).execute(
            query, variable_values=variables, context_value=context
        )
        errors = [e.formatted for e in result.errors or []]
        return Result(result.data, errors, result.extensions or {}, context)

    return asyncio.run(go())


def fresh(query: str) -> str:
    """The query as a text no request has sent yet (a comment of its own)."""
    return f"{query}\n# {uuid.uuid4().hex}"


def shape(result: Result) -> tuple[Any, ...]:
    """What a client sees of a result, and what it cost."""
    errors = [(e["message"], e.get("path"), e["extensions"]["code"]) for e in result.errors]
    return result.data, errors, result.extensions.get("dynamodb"), wave_shape(result)


@pytest.mark.parametrize("name", ["Q1", "Q2", "Q3", "Q4", "Q5"])
def test_a_query_run_again_reads_first_and_answers_the_same(
    services: Services, five: dict[str, Any], sent_before_execution: list[int], name: str
) -> None:
    query, variables = {
        "Q1": (Q1, {"ids": five["students"]}),
        "Q2": (Q2, {"id": five["class"]}),
        "Q3": (Q3, {"id": five["teacher"]}),
        "Q4": (Q4, {"id": five["sport"]}),
        "Q5": (Q5, {"country": five["country"], "state": five["state"]}),
    }[name]
    query = fresh(query)
    first = run(services, query, variables)
    again = run(services, query, variables)
    assert first.errors == [] and first.data
    assert shape(again) == shape(first)
    assert sent_before_execution == [0, 1]
    assert again.context.started == {}  # execution took each started field's task


def test_each_request_reads_its_own_variables(
    services: Services, five: dict[str, Any], sent_before_execution: list[int]
) -> None:
    query = fresh(STUDENTS)
    some, others = five["students"][:3], five["students"][3:5]
    run(services, query, {"ids": some})
    result = run(services, query, {"ids": others})
    alone = run(services, fresh(STUDENTS), {"ids": others})
    assert result.data == alone.data and len(result.data["students"]) == 2
    assert sent_before_execution == [0, 1, 0]


def test_an_error_of_a_started_field_is_the_fields_own(
    services: Services, sent_before_execution: list[int]
) -> None:
    query = fresh(STUDENTS)
    assert run(services, query, {"ids": ["stu-0001"]}).errors == []
    refused = [run(services, query, {"ids": ids}) for ids in (["a b"], ["x"] * 101)]
    for result in refused:
        assert result.data is None
        assert [(e["path"], e["extensions"]["code"]) for e in result.errors] == [
            (["students"], "BAD_USER_INPUT")
        ]
        assert result.context.ledger.requests == 0
    assert (
        refused[0].errors[0]["message"]
        == run(services, fresh(STUDENTS), {"ids": ["a b"]}).errors[0]["message"]
    )


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
    signed_in = AuthResult(principal=Principal("user-1", {}))
    assert run(services, query, {"ids": ["stu-0001"]}, signed_in).errors == []
    refused = run(services, query, {"ids": ["stu-0001"]})
    assert [e["extensions"]["code"] for e in refused.errors] == ["UNAUTHENTICATED"]
    assert refused.context.ledger.requests == 0


def test_a_mutation_is_never_started(
    empty_services: Services, sent_before_execution: list[int]
) -> None:
    mutation = fresh(
        'mutation { createSport(input: {id: "sp-early", name: "Early"}) { userErrors { code } } }'
    )
    first = run(empty_services, mutation, {})
    again = run(empty_services, mutation, {})
    assert first.user_codes == [] and again.user_codes == ["ALREADY_EXISTS"]
    assert sent_before_execution == [0, 0]


def test_a_failed_read_of_a_started_field_is_masked_as_before(
    services: Services, broken_get_many: None, sent_before_execution: list[int]
) -> None:
    query = fresh(STUDENTS)
    first, again = (run(services, query, {"ids": ["stu-0001"]}) for _ in range(2))
    for result in (first, again):
        assert [(e["path"], e["extensions"]["code"]) for e in result.errors] == [
            (["students"], "INTERNAL_SERVER_ERROR")
        ]
        assert "secret detail" not in str(result.errors)
    assert len(sent_before_execution) == 2


@pytest.mark.parametrize("name", [{}, [], 7])
def test_an_operation_name_that_is_not_a_string_is_refused_as_before(
    client: Any, name: Any
) -> None:
    query = fresh("query Named { __typename }")
    assert client.post("/graphql", json={"query": query}).status_code == 200
    response = client.post("/graphql", json={"query": query, "operationName": name})
    assert response.status_code == 400
    assert response.json()["errors"][0]["extensions"]["code"] != "INTERNAL_SERVER_ERROR"
