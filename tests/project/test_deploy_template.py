"""deploy/template.yaml agrees with the code: the table `create-table` makes, the handler,
the settings, and IAM limited to this table and its index."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import yaml
from support import ROOT

from graph_api.model.keys import GSI1, GSI2
from graph_api.settings import Settings
from graph_api.store.admin import definition

TEMPLATE = ROOT / "deploy" / "template.yaml"


class CloudFormationLoader(yaml.SafeLoader):
    """A safe loader that keeps intrinsic tags (!Ref, !GetAtt, !Sub, ...) as plain data."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


CloudFormationLoader.add_multi_constructor("!", _intrinsic)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.load(TEMPLATE.read_text(encoding="utf-8"), CloudFormationLoader)
    return loaded


def resource(template: dict[str, Any], type_: str) -> dict[str, Any]:
    (found,) = [r for r in template["Resources"].values() if r["Type"] == type_]
    return found


def test_the_table_is_the_one_create_table_makes(template: dict[str, Any]) -> None:
    table = resource(template, "AWS::DynamoDB::Table")["Properties"]
    code = definition("graph")
    for prop in ("KeySchema", "AttributeDefinitions", "BillingMode"):
        assert table[prop] == code[prop], prop
    project = ("IndexName", "KeySchema", "Projection")
    assert [{k: i[k] for k in project} for i in table["GlobalSecondaryIndexes"]] == [
        {k: i[k] for k in project} for i in code["GlobalSecondaryIndexes"]
    ]
    # Whatever else the code's definition grows must be reflected here too.
    assert set(code) - {"TableName"} <= set(table)
    # CloudFormation's StreamSpecification has no StreamEnabled: a view type means on.
    assert code["StreamSpecification"]["StreamEnabled"] is True
    assert table["StreamSpecification"] == {
        "StreamViewType": code["StreamSpecification"]["StreamViewType"]
    }


def test_the_table_is_protected(template: dict[str, Any]) -> None:
    table = resource(template, "AWS::DynamoDB::Table")
    props = table["Properties"]
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"


def function(template: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = resource(template, "AWS::Serverless::Function")["Properties"]
    return props


def test_the_function_runs_the_lambda_handler_with_the_tables_settings(
    template: dict[str, Any],
) -> None:
    props = function(template)
    module, _, name = props["Handler"].rpartition(".")
    handler = getattr(importlib.import_module(module), name)
    assert callable(handler)
    env = props["Environment"]["Variables"]
    assert env["GRAPH_API_TABLE"] == {"Ref": "Table"}
    assert env["GRAPH_API_BACKEND"] == "remote"
    assert "resolve:secretsmanager:${CursorSecret}" in env["GRAPH_API_CURSOR_SECRET"]["Fn::Sub"]
    (event,) = props["Events"].values()
    assert event["Type"] == "HttpApi"


def statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for p in function(template)["Policies"] for s in p["Statement"]]


def actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def test_the_function_may_do_what_the_api_does_and_no_more(template: dict[str, Any]) -> None:
    granted = {a for s in statements(template) for a in actions(s)}
    assert granted == {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    }
    table_arn = {"Fn::GetAtt": ["Table", "Arn"]}
    index_arns = [{"Fn::Sub": f"${{Table.Arn}}/index/{index}"} for index in (GSI1, GSI2)]
    queried = []
    for statement in statements(template):
        assert statement["Effect"] == "Allow"
        resources = statement["Resource"]
        resources = resources if isinstance(resources, list) else [resources]
        assert all(r == table_arn or r in index_arns for r in resources), statement
        if any(arn in resources for arn in index_arns):
            assert actions(statement) == ["dynamodb:Query"]
            queried += resources
    assert all(arn in queried for arn in index_arns)  # both indexes may be queried


def test_only_the_operator_policy_may_scan(template: dict[str, Any]) -> None:
    operator = resource(template, "AWS::IAM::ManagedPolicy")["Properties"]["PolicyDocument"]
    assert any("dynamodb:Scan" in actions(s) for s in operator["Statement"])
    assert all("*" not in a for s in operator["Statement"] for a in actions(s))


def test_the_function_resumes_from_a_snapstart_snapshot(template: dict[str, Any]) -> None:
    """SnapStart runs on Python 3.12 and later, for published versions: the API invokes the
    alias that each deploy publishes."""
    props = function(template)
    assert props["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    major, minor = map(int, props["Runtime"].removeprefix("python").split("."))
    assert (major, minor) >= (3, 12)
    assert props["AutoPublishAlias"]


def test_cors_is_the_apis_own_fed_by_the_same_setting(template: dict[str, Any]) -> None:
    # API Gateway's CORS would answer preflights itself and override the function's
    # headers: the API answers CORS from GRAPH_API_CORS_ORIGINS, as in a container.
    http_api = resource(template, "AWS::Serverless::HttpApi")["Properties"]
    assert "CorsConfiguration" not in http_api
    env = function(template)["Environment"]["Variables"]
    assert env["GRAPH_API_CORS_ORIGINS"] == {"Ref": "AllowedOrigins"}
    # Its default, as the function reads it: no origin until the operator names one.
    default = template["Parameters"]["AllowedOrigins"]["Default"]
    settings = Settings.from_env({"GRAPH_API_BACKEND": "remote", "GRAPH_API_CORS_ORIGINS": default})
    assert (settings.cors_origins, settings.cors_origin_regex) == ("", "")
