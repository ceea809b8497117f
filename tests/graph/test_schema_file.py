from __future__ import annotations

from pathlib import Path

import pytest
from support import ROOT

from graph_api import cli

SCHEMA_FILE = ROOT / "schema" / "schema.graphql"


def test_committed_schema_matches_export_schema(tmp_path: Path) -> None:
    exported = tmp_path / "s.graphql"
    assert cli.main(["export-schema", "-o", str(exported)]) == 0
    assert SCHEMA_FILE.read_text(encoding="utf-8") == exported.read_text(encoding="utf-8"), (
        "schema/schema.graphql is stale: run `make schema`"
    )


def test_export_schema_to_stdout_matches_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export-schema"]) == 0
    assert capsys.readouterr().out == SCHEMA_FILE.read_text(encoding="utf-8")
