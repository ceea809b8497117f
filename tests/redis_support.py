"""A real Redis for the broker's tests: Debian's `redis-server`, started as a user would.

`redis-server` cannot pick a free port itself (`--port 0` turns TCP off), so a free port is
chosen here and kept: `restart()` brings a server back on the same port, as after a crash.
Nothing is saved to disk. CI installs the binary (.ci/run); a developer without it gets a
skip that says how to install it.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from node_support import missing


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = self.folder / "redis.log"
        # fmt: off
        command = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.folder),
            "--logfile", str(log),
        ]
        # fmt: on
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        client = redis.Redis(
            host="127.0.0.1", port=self.port, socket_timeout=1, socket_connect_timeout=1
        )
        deadline = time.monotonic() + 30
        try:
            while True:
                if self.process.poll() is not None:
                    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                    raise RuntimeError(f"redis-server exited ({self.process.returncode}): {tail}")
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not answer PING on port {self.port}")
                time.sleep(0.02)
        except BaseException:
            self.kill()
            raise
        finally:
            client.close()

    def kill(self) -> None:
        """As a crash: SIGKILL, no goodbye to the clients."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers, as over a dead network."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        self.kill()
        self.start()


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found is None:
        missing("redis-server is not installed (apt-get install redis-server)")
    return found


@contextmanager
def running_redis(folder: Path) -> Iterator[RedisServer]:
    """A Redis of the caller's own, stopped at the end (resumed first if paused)."""
    binary = redis_binary()
    for attempt in range(3):  # another process may take the free port before Redis binds it
        server = RedisServer(binary, folder)
        try:
            server.start()
            break
        except RuntimeError:
            if attempt == 2:
                raise
    try:
        yield server
    finally:
        if server.process is not None and server.process.poll() is None:
            server.resume()
        server.kill()
