"""`graph-api serve` on a free loopback port, on the embedded backend with a small demo
school (or whatever `env` says): for the tools and tests that need the real server (the
HTTP audit, the browser test, two instances sharing a stream). Stopped on exit; nothing
outside 127.0.0.1 is touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tools.processes import free_port

# How long a server may take to answer: generous, since a busy 2-core machine took over 60 s
# (it costs time only when startup really is that slow).
STARTUP_SECONDS = 180


def wait_until_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"graph-api serve exited with {process.returncode} before answering")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"graph-api serve did not answer on {url} in {STARTUP_SECONDS} s")


@dataclass(frozen=True)
class Served:
    url: str  # e.g. http://127.0.0.1:PORT
    process: subprocess.Popen[bytes]  # `serve` itself: with one worker, the one serving


@contextmanager
def serving(students: int = 20, **env: str) -> Iterator[str]:
    """Run the API; yields its base URL, e.g. http://127.0.0.1:PORT."""
    with served(students, **env) as server:
        yield server.url


@contextmanager
def served(students: int = 20, workers: int | None = None, **env: str) -> Iterator[Served]:
    """Run the API (`--workers`: serve's default when None); yields its URL and process (a
    test that kills it, as a crash would)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    environment = {
        **os.environ,
        "GRAPH_API_BACKEND": "embedded",
        "GRAPH_API_DEMO_STUDENTS": str(students),
        "GRAPH_API_LOG_LEVEL": "WARNING",
        # Its clients (tests' browsers and Node clients) write without a token; the demo's
        # default, dev tokens for writes, is tests/http/test_graphiql_e2e.py's role picker's.
        "GRAPH_API_OPEN_WRITES": "true",
        **env,
    }
    command = [sys.executable, "-m", "graph_api.cli", "serve", "--host", "127.0.0.1"]
    # The server's log stays out of the caller's output, unless the server fails to start.
    # It runs in a folder of its own: serve writes .data/embedded.json where it runs, and the
    # checkout's belongs to the developer's `make run`.
    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory() as folder:
        process = subprocess.Popen(
            [*command, "--port", str(port), *(["--workers", str(workers)] if workers else [])],
            env=environment,
            stdout=log,
            stderr=log,
            cwd=folder,
        )
        try:
            try:
                wait_until_healthy(url, process)
            except RuntimeError as error:
                log.seek(0)
                tail = log.read().decode(errors="replace")[-4000:]
                raise RuntimeError(f"{error}\n{tail}") from None
            yield Served(url, process)
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
