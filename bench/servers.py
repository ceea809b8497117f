"""The checkouts `make bench` serves: this one (head) and, with `BASE=<git ref>`, a git worktree
of the ref under `.cache/bench-base/<sha>` with a venv of its own (its `make .venv/.installed`).

Each checkout's API is its own `graph-api serve`, driven only through the CLI and `GRAPH_API_*`
/ `AWS_*` variables, never by importing its modules: the base may lay out its code as it
likes, as long as its CLI serves.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools.api_server import stop, wait_until_healthy
from tools.processes import free_port

ROOT = Path(__file__).resolve().parent.parent
BASES = ROOT / ".cache" / "bench-base"


@dataclass(frozen=True)
class Checkout:
    """A checkout whose venv is installed: `label` is what the tables call it ("head" or
    "base"), `commit` what they say it runs."""

    label: str
    root: Path
    commit: str

    @property
    def cli(self) -> Path:
        return self.root / ".venv" / "bin" / "graph-api"


def _git(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"make bench: git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def head() -> Checkout:
    """This checkout, as it is on disk (uncommitted changes included)."""
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = "+changes" if _git("status", "--porcelain", "--untracked-files=no") else ""
    return Checkout("head", ROOT, commit + dirty)


def holds(ref: str, path: str) -> bool:
    """Whether commit `ref` has the file `path` (asked of git: no checkout made)."""
    sha = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{sha}:{path}"], cwd=ROOT, capture_output=True, check=False
    )
    return found.returncode == 0


def added(path: str) -> str:
    """The commit that first added `path` (abbreviated), or "" if git knows none."""
    found = _git("log", "--diff-filter=A", "--format=%h", "--", path).splitlines()
    return found[-1] if found else ""


def base(ref: str) -> Checkout:
    """A worktree of `ref` (made once per commit) with its venv installed by its own Makefile."""
    sha = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    folder = BASES / sha
    if not (folder / ".git").exists():
        BASES.mkdir(parents=True, exist_ok=True)
        _git("worktree", "prune")
        _git("worktree", "add", "--detach", str(folder), sha)
    # Its own make, with none of this run's venv in the environment.
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "MAKEFLAGS", "MAKELEVEL")
    }
    print(
        f"base {ref} ({sha[:7]}): make .venv/.installed in {folder.relative_to(ROOT)}", flush=True
    )
    done = subprocess.run(
        ["make", "--no-print-directory", ".venv/.installed"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-2000:]
        raise SystemExit(f"make bench: the base's venv did not install:\n{tail}")
    return Checkout("base", folder, sha[:7] if ref.startswith(sha[:7]) else f"{ref} ({sha[:7]})")


def run_cli(checkout: Checkout, env: Mapping[str, str], *args: str) -> None:
    """`graph-api ARGS` of the checkout (create-table, ...), with `env` over this one's."""
    done = subprocess.run(
        [str(checkout.cli), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{checkout.label}: graph-api {' '.join(args)}: {done.stderr[-2000:]}")


@dataclass(frozen=True)
class Server:
    """One checkout's `graph-api serve`: its label, port and process (workers below it)."""

    label: str
    port: int
    pid: int


@contextmanager
def serving(
    checkout: Checkout, env: Mapping[str, str], workers: int | None, label: str = ""
) -> Iterator[Server]:
    """`graph-api serve` of the checkout on a free loopback port (`--workers N`, serve's default
    when None), run from a folder of its own; stopped on exit."""
    port = free_port()
    command = [str(checkout.cli), "serve", "--host", "127.0.0.1", "--port", str(port)]
    if workers:
        command += ["--workers", str(workers)]
    environment = {**os.environ, "GRAPH_API_LOG_LEVEL": "WARNING", **env}
    environment.pop("VIRTUAL_ENV", None)
    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory() as folder:
        process = subprocess.Popen(command, env=environment, stdout=log, stderr=log, cwd=folder)
        try:
            try:
                wait_until_healthy(f"http://127.0.0.1:{port}", process)
            except RuntimeError as error:
                log.seek(0)
                tail = log.read().decode(errors="replace")[-4000:]
                raise RuntimeError(f"{checkout.label}: {error}\n{tail}") from None
            yield Server(label or checkout.label, port, process.pid)
        finally:
            stop(process)
