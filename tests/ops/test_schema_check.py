"""`graph-api schema-check`: breaking changes since schema/released.graphql fail CI unless
recorded as intended; dangerous ones are printed and pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import ROOT

from graph_api import cli
from graph_api.graph.schema import schema
from graph_api.ops import schema_check

RELEASED = ROOT / "schema" / "released.graphql"
INTENDED = ROOT / "schema" / "intended-breaking-changes.txt"
CURRENT = schema.as_str()

# Released schemas that differ from the code's in one way each.
STUDENT = "type Student implements Node {\n"
WITH_NICKNAME = CURRENT.replace(STUDENT, f"{STUDENT}  nickname: String\n", 1)
NICKNAME_REMOVED = "Field Student.nickname was removed."
STATE = "    state: String = null\n"  # of studentsByLocation
WITH_OTHER_DEFAULT = CURRENT.replace(STATE, STATE.replace("null", '"Ohio"'), 1)


def run(tmp_path: Path, released: str, intended: str | None = None) -> tuple[int, str]:
    """Check `released` against the code; returns the exit code and the intended file."""
    released_file = tmp_path / "released.graphql"
    released_file.write_text(released, encoding="utf-8")
    intended_file = tmp_path / "intended.txt"
    if intended is not None:
        intended_file.write_text(intended, encoding="utf-8")
    argv = ["schema-check", "--released", str(released_file), "--intended", str(intended_file)]
    code = cli.main(argv)
    return code, str(intended_file)


def test_the_code_has_no_unrecorded_breaking_change_since_the_release() -> None:
    intended = INTENDED.read_text(encoding="utf-8") if INTENDED.exists() else ""
    report = schema_check.check(RELEASED.read_text(encoding="utf-8"), CURRENT, intended)
    assert report.passed, schema_check.render(report)


def test_the_committed_check_passes_through_the_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    assert cli.main(["schema-check"]) == 0
    assert "BREAKING" not in capsys.readouterr().out


def test_a_removed_field_is_breaking_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert WITH_NICKNAME != CURRENT
    code, _ = run(tmp_path, WITH_NICKNAME)
    out = capsys.readouterr().out
    assert code == 1
    assert f"BREAKING   FIELD_REMOVED: {NICKNAME_REMOVED}" in out
    assert "1 breaking change(s) not recorded" in out


def test_a_recorded_breaking_change_passes_and_shows_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    intended = f"# intended breaking changes\n\n{NICKNAME_REMOVED} | nobody used it (#99)\n"
    code, _ = run(tmp_path, WITH_NICKNAME, intended)
    out = capsys.readouterr().out
    assert code == 0
    assert f"intended   FIELD_REMOVED: {NICKNAME_REMOVED} (nobody used it (#99))" in out


def test_a_record_without_a_reason_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, intended = run(tmp_path, WITH_NICKNAME, f"{NICKNAME_REMOVED}\n")
    assert code == 2
    assert f"{intended}:1" in capsys.readouterr().err


def test_a_record_of_a_change_no_longer_found_is_pointed_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run(tmp_path, CURRENT, f"{NICKNAME_REMOVED} | gone\n")
    assert code == 0
    assert f"no longer found; remove it: {NICKNAME_REMOVED}" in capsys.readouterr().out


def test_a_dangerous_change_is_printed_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert WITH_OTHER_DEFAULT != CURRENT
    code, _ = run(tmp_path, WITH_OTHER_DEFAULT)
    out = capsys.readouterr().out
    assert code == 0
    assert (
        "dangerous  ARG_DEFAULT_VALUE_CHANGE: Query.studentsByLocation(state:) has changed"
        ' defaultValue from "Ohio" to null.'
    ) in out
    assert "BREAKING" not in out


def test_a_missing_released_schema_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["schema-check", "--released", str(tmp_path / "none.graphql")]
    assert cli.main(argv) == 2
    assert "last released schema" in capsys.readouterr().err


def test_breaking_and_dangerous_changes_are_told_apart() -> None:
    # A required argument added is breaking; an optional one is dangerous.
    old = "type Query { a(x: Int): Int }"
    breaking, dangerous = schema_check.compare(old, "type Query { a(x: Int, y: Int!): Int }")
    assert [c.kind for c in breaking] == ["REQUIRED_ARG_ADDED"] and not dangerous
    breaking, dangerous = schema_check.compare(old, "type Query { a(x: Int, y: Int): Int }")
    assert not breaking and [c.kind for c in dangerous] == ["OPTIONAL_ARG_ADDED"]
