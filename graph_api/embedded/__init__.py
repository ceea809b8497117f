"""The embedded backend: moto's DynamoDB served over HTTP on a loopback port.

It speaks the same wire protocol as DynamoDB, so the API's one data-access path is exercised
exactly as against DynamoDB Local or AWS. moto keeps everything in memory.

moto alone is a mock, not a database: its transactions copy whole tables, its queries sort
the whole table, it ignores `ClientRequestToken`, it does not isolate a transaction
from concurrent readers, and its stream records refused transactions. `moto_fixes`
(installing `partitions`, `transactions`, `responses`, `projections` and `streams` into
moto's backend) and `wsgi` (the server in front of it, which also answers DynamoDB Streams)
restore DynamoDB's behaviour; they are the only modules that know moto's internals.

By default the server runs in a child process of its own, as a database would: its CPU
work gets its own core and its own GIL, so the API's requests never queue behind moto's.
`in_process=True` runs it on threads of this process instead (tests that look inside moto).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


def _make_server() -> Any:
    """moto's DynamoDB app, fixed and wrapped, on a free loopback port (not yet serving)."""
    # Imported late: only this backend needs moto.
    from moto.moto_server.werkzeug_app import create_backend_app
    from werkzeug.serving import make_server

    from graph_api.embedded import moto_fixes
    from graph_api.embedded.wsgi import KeepAlive, Serialized

    moto_fixes.apply()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not one access line per call
    # DynamoDB's app alone: moto's dispatcher lists its own package on every request to find
    # which of its services a request is for. Loopback only: moto binds every interface.
    backend_app = create_backend_app("dynamodb")
    # moto turns on Flask's debug mode, which makes a class for every request's form data
    # (CPU, and cyclic garbage for the collector); an error answers 500 either way.
    backend_app.debug = False
    app = Serialized(backend_app)
    return make_server("127.0.0.1", 0, app, threaded=True, request_handler=KeepAlive)


def serve_child() -> None:
    """The child process (`python -m graph_api.embedded`): print the port, serve until
    standard input closes (the parent stopped, or died)."""
    from graph_api.embedded import heap

    server = _make_server()
    heap.keep()  # the table's items out of the collector's full passes (see `heap`)
    print(server.server_port, flush=True)
    os.dup2(2, 1)  # nobody reads the pipe after the port: anything else goes to stderr

    def watch() -> None:
        sys.stdin.read()  # EOF: the parent closed the pipe or is gone
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    server.serve_forever()


class EmbeddedDynamoDB:
    def __init__(self, *, in_process: bool = False) -> None:
        self.in_process = in_process
        self.endpoint_url = ""
        self._server: Any = None
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> str:
        if self.in_process:
            self._server = _make_server()
            threading.Thread(target=self._server.serve_forever, daemon=True).start()
            port = self._server.server_port
        else:
            # moto is DynamoDB here, not a client of AWS: the shell's AWS settings (a profile
            # not in this machine's config, say) must not stop it from starting.
            environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
            self._process = subprocess.Popen(
                [sys.executable, "-m", "graph_api.embedded"],
                env=environ,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert self._process.stdout is not None
            line = self._process.stdout.readline()  # the port, once it serves
            if not line.strip().isdigit():
                self.stop()
                raise RuntimeError("the embedded DynamoDB did not start")
            port = int(line)
        self.endpoint_url = f"http://127.0.0.1:{port}"
        # Debug: `serve`'s first line names this endpoint, with the table.
        log.debug("embedded DynamoDB (moto) listening on %s", self.endpoint_url)
        return self.endpoint_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._process is not None:
            if self._process.stdin is not None:
                self._process.stdin.close()  # the child exits on EOF
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def rss_kb(self) -> int:
        """The server process's resident memory (0 in process, or when unknown)."""
        return rss_kb(self._process.pid) if self._process is not None else 0


def rss_kb(pid: int) -> int:
    """A process's resident memory in KiB, from /proc (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: Iterable[int]) -> float:
    """The CPU (user + system) the processes have used so far, in seconds, from /proc (a
    process that is gone counts 0)."""
    total = 0.0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            total += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime
    return total


def descendants(pid: int) -> list[int]:
    """A process's children, their children, ... (live ones), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after `(comm)`: [0] state, [1] ppid, [11] utime, ..."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            raw = stat.read()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()
