"""`make dynamodb-local` persists under the folder the user named, from any checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_api.store import admin
from graph_api.store.client import Dynamo
from tools import dynamodb_local


def test_a_relative_db_path_is_made_absolute_and_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Java runs from the emulator's folder: a relative -dbPath would be resolved there.
    monkeypatch.chdir(tmp_path)
    line = dynamodb_local.command(Path("/opt/emulator"), 8001, Path(".data/dynamodb"))
    db_path = Path(line[line.index("-dbPath") + 1])
    assert db_path == tmp_path / ".data" / "dynamodb"
    assert db_path.is_dir()
    assert "-inMemory" not in line


def test_without_a_db_path_it_runs_in_memory() -> None:
    line = dynamodb_local.command(Path("/opt/emulator"), 8001, None)
    assert "-inMemory" in line and "-dbPath" not in line


def test_dynamodb_local_persists_under_a_relative_db_path(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend != "dynamodb-local":
        pytest.skip("starts a second DynamoDB Local: runs with --backend=dynamodb-local")
    from support import make_settings

    monkeypatch.chdir(tmp_path)
    running = dynamodb_local.start(db_path=Path(".data/dynamodb"))
    try:
        dynamo = Dynamo(make_settings(running.endpoint))
        try:
            assert admin.create(dynamo, "persisted")
        finally:
            dynamo.close()
    finally:
        running.stop()
    assert list((tmp_path / ".data" / "dynamodb").glob("*.db"))  # -sharedDb's one file
