"""The PostGraphile peer (`../shared/peers/postgraphile`), run from a copy of our own.

The peer's folder is read-only and shared: we copy it into `.cache/peer/postgraphile`
(again whenever its files change), let its `run.sh` install the pinned Node 22 and npm
packages there (`run.sh --help` installs, then only prints bench.py's options), and import
its modules from the copy: `dataset` (the seed-11 school and the query targets), `queries`
(its documents and exact checks), `httpbench` (the keep-alive client) and `bench`
(the throwaway PostgreSQL cluster and the PostGraphile server), which `running` starts.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import queries as peer_queries

ROOT = Path(__file__).resolve().parent.parent
PEER_PATH = Path("shared", "peers", "postgraphile")
COPY = ROOT / ".cache" / "peer" / "postgraphile"
# What run.sh and npm create inside the copy: kept across re-copies (run.sh re-installs
# when package.json or package-lock.json change), never copied from the source.
_INSTALLED = frozenset({"node_modules", ".cache", "results", "RESULTS.md"})
_STAMP = ".source.sha256"
PEER_BENCH = "postgraphile_bench"  # the name its bench.py is imported under


class PeerUnavailable(Exception):
    """The peer cannot run here; the message is one line that says why."""


def source_dir() -> Path:
    """PEER_DIR, else `../shared/peers/postgraphile` of the checkout or of a folder above it
    (a git worktree under the main checkout's parent finds the same peer)."""
    if os.environ.get("PEER_DIR"):
        return Path(os.environ["PEER_DIR"]).resolve()
    for parent in ROOT.parents:
        if (parent / PEER_PATH / "dataset.py").is_file():
            return (parent / PEER_PATH).resolve()
    return (ROOT.parent / PEER_PATH).resolve()


def _source_files(source: Path) -> list[Path]:
    files = []
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if relative.parts[0] in _INSTALLED or not path.is_file():
            continue
        files.append(relative)
    return files


def fingerprint(source: Path) -> str:
    digest = hashlib.sha256()
    for relative in _source_files(source):
        digest.update(str(relative).encode() + b"\0")
        digest.update((source / relative).read_bytes() + b"\0")
    return digest.hexdigest()


def copy(source: Path | None = None, dest: Path = COPY) -> Path:
    """The peer's files in `dest`, copied again if the source changed since the last copy."""
    source = source or source_dir()
    if not (source / "dataset.py").is_file():
        raise PeerUnavailable(f"the peer is not at {source} (set PEER_DIR)")
    want = fingerprint(source)
    stamp = dest / _STAMP
    if stamp.is_file() and stamp.read_text().strip() == want:
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    for entry in dest.iterdir():  # files the source no longer has
        if entry.name in _INSTALLED or entry.name == _STAMP:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for relative in _source_files(source):
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        # The source is read-only; the copy is ours (copyfile takes no mode bits).
        shutil.copyfile(source / relative, target)
        mode = 0o755 if os.access(source / relative, os.X_OK) else 0o644
        target.chmod(mode)
    stamp.write_text(want + "\n")
    return dest


def install(folder: Path = COPY) -> str:
    """Run the copy's `run.sh --help` (Node 22 and `npm ci`); return the node binary."""
    if shutil.which("bash") is None:
        raise PeerUnavailable("bash is not installed: the peer's run.sh needs it")
    done = subprocess.run(
        ["bash", str(folder / "run.sh"), "--help"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        if shutil.which("npm") is None:
            raise PeerUnavailable(
                "npm is not installed: the peer installs Node 22 and PostGraphile"
            )
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        raise PeerUnavailable(f"the peer's install (run.sh) failed: {lines[-1]}")
    if os.environ.get("NODE_BIN"):
        return os.environ["NODE_BIN"]
    found = sorted(
        glob.glob(str(folder / ".cache" / "node" / "node_modules" / "*" / "bin" / "node"))
    )
    if found:
        return found[0]
    node = shutil.which("node")
    if node is None:
        raise PeerUnavailable("no Node >= 22 for the peer: set NODE_BIN=/path/to/node")
    return node


def modules(folder: Path = COPY) -> dict[str, ModuleType]:
    """The peer's modules, imported from the copy: dataset, queries, httpbench, bench."""
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    import dataset  # type: ignore[import-not-found]
    import httpbench  # type: ignore[import-not-found]
    import queries  # type: ignore[import-not-found]

    # Its bench.py under another name: `bench` is this package.
    bench = sys.modules.get(PEER_BENCH)
    if bench is None:
        spec = importlib.util.spec_from_file_location(PEER_BENCH, folder / "bench.py")
        if spec is None or spec.loader is None:
            raise PeerUnavailable(f"cannot import {folder / 'bench.py'}")
        bench = importlib.util.module_from_spec(spec)
        sys.modules[PEER_BENCH] = bench
        spec.loader.exec_module(bench)
    for module in (bench, dataset, httpbench, queries):
        where = Path(module.__file__ or "").resolve().parent
        if where != folder.resolve():
            raise PeerUnavailable(f"a module named {module.__name__} shadows the peer's ({where})")
    return {"bench": bench, "dataset": dataset, "httpbench": httpbench, "queries": queries}


def postgres_bindir() -> Path:
    """PostgreSQL's server binaries, found as the peer's bench.py finds them."""
    bench = modules()["bench"]
    try:
        return Path(bench.find_pg_bindir())
    except SystemExit as error:  # bench.py exits with its message when there are none
        raise PeerUnavailable(f"{error} (Debian: apt-get install postgresql)") from None


@dataclasses.dataclass
class Running:
    """The peer serving: its PostgreSQL cluster and PostGraphile's port and process."""

    bench: ModuleType
    pg: Any
    port: int
    pid: int  # PostGraphile's node process
    versions: dict[str, str]

    def statements(self) -> int:
        return int(self.bench.app_calls(self.pg))


@contextmanager
def running(mods: dict[str, ModuleType], node: str, data: dict[str, Any]) -> Iterator[Running]:
    """The peer's PostgreSQL cluster (loaded) and PostGraphile, as its bench.py runs them."""
    bench = mods["bench"]
    bindir = postgres_bindir()
    tmp = Path(tempfile.mkdtemp(prefix="pg-peer-bench-"))
    pg = server = None
    try:
        try:
            pg = bench.PgCluster(bindir, tmp, bench.free_port())
            pg.init()
            pg.start()
            bench.load_database(pg, data)
            pg.psql(peer_queries.PEER_INDEXES)  # for the queries of ours it lacks (Q6)
            url = f"postgres://{bench.APP_ROLE}@127.0.0.1:{pg.port}/{bench.DB}"
            server = bench.PostGraphile(node, url, bench.free_port(), tmp / "postgraphile.log")
            server.start()
            versions = {
                "postgraphile": bench.postgraphile_version(),
                "node": bench.node_version(node).lstrip("v"),
                "postgres": pg.version(),
            }
        except (Exception, SystemExit) as error:
            detail = str(error).strip().splitlines() or [type(error).__name__]
            raise PeerUnavailable(f"the peer did not start: {detail[0]}") from error
        yield Running(bench, pg, server.port, server.proc.pid, versions)
    finally:
        if server is not None:
            server.stop()
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
