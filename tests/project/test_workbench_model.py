"""schema/workbench-model.json: the NoSQL Workbench model, checked in and kept current."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

from graph_api import cli
from graph_api.model.keys import GSI1PK, GSI1SK, GSI2PK, GSI2SK
from graph_api.ops import workbench
from graph_api.store.admin import definition

MODEL_FILE = ROOT / "schema" / "workbench-model.json"


def test_committed_model_matches_export_model(tmp_path: Path) -> None:
    exported = tmp_path / "model.json"
    assert cli.main(["export-model", "-o", str(exported)]) == 0
    assert MODEL_FILE.read_text(encoding="utf-8") == exported.read_text(encoding="utf-8"), (
        "schema/workbench-model.json is stale: run `make model`"
    )


def test_export_model_to_stdout_is_deterministic(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export-model"]) == 0
    first = capsys.readouterr().out
    assert cli.main(["export-model"]) == 0
    assert capsys.readouterr().out == first


@pytest.fixture(scope="module")
def table() -> dict[str, Any]:
    model = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    assert model["ModelMetadata"]["AWSService"] == "Amazon DynamoDB"
    assert model["ModelMetadata"]["Version"] == "3.0"
    (only,) = model["DataModel"]
    found: dict[str, Any] = only
    return found


def key(schema: list[dict[str, str]], role: str) -> str:
    return next(k["AttributeName"] for k in schema if k["KeyType"] == role)


def test_the_model_has_the_tables_keys_index_and_billing(table: dict[str, Any]) -> None:
    code = definition(table["TableName"])
    keys = table["KeyAttributes"]
    assert keys["PartitionKey"]["AttributeName"] == key(code["KeySchema"], "HASH")
    assert keys["SortKey"]["AttributeName"] == key(code["KeySchema"], "RANGE")
    indexes, code_indexes = table["GlobalSecondaryIndexes"], code["GlobalSecondaryIndexes"]
    assert [i["IndexName"] for i in indexes] == [i["IndexName"] for i in code_indexes]
    for index, code_index, (pk, sk) in zip(
        indexes, code_indexes, [(GSI1PK, GSI1SK), (GSI2PK, GSI2SK)], strict=True
    ):
        assert index["KeyAttributes"]["PartitionKey"]["AttributeName"] == pk
        assert index["KeyAttributes"]["SortKey"]["AttributeName"] == sk
        assert index["Projection"] == code_index["Projection"]
    assert table["BillingMode"] == code["BillingMode"]


def test_the_sample_items_show_every_item_type_and_the_gsi_view(table: dict[str, Any]) -> None:
    items = table["TableData"]
    types = {item["type"]["S"] for item in items}
    assert types == {f["FacetName"] for f in table["TableFacets"]}
    assert set(workbench.FACET_KEYS) == types
    # A student's home and a teacher's classes live on their node items: no item of their own.
    assert types == {
        "student",
        "email",
        "enrolment",
        "membership",
        "teacher",
        "class",
        "sport",
        "counter",
    }
    # Every attribute an item carries is declared, with the type it is stored as.
    declared = {a["AttributeName"]: a["AttributeType"] for a in table["NonKeyAttributes"]}
    for item in items:
        for name, wire in item.items():
            if name not in ("PK", "SK"):
                (tag,) = wire
                assert tag in (declared[name], "NULL"), (name, tag)
    # Edges live in their target's partition (a class's students, beside the class)...
    enrolments = [i for i in items if i["type"]["S"] == "enrolment"]
    assert enrolments
    assert all(i["PK"]["S"] == f"CLASS#{i['classId']['S']}" for i in enrolments)
    # ...and GSI1 holds them inverted, under their owner (a student's enrolments).
    in_gsi = [i for i in items if GSI1PK in i]
    assert any(
        i["type"]["S"] == "enrolment" and i[GSI1PK]["S"] == f"STUDENT#{i['studentId']['S']}"
        for i in in_gsi
    )
    assert any(i[GSI1PK]["S"].startswith("CATALOG#") for i in in_gsi)
    # A student with a home is in GSI1 at its location, with its home map on the item.
    assert any(
        i["type"]["S"] == "student" and i[GSI1PK]["S"].startswith("COUNTRY#") and "home" in i
        for i in in_gsi
    )
