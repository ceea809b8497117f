"""The child processes the tools and tests start (DynamoDB Local, stunnel, the API): a free
loopback port for one to listen on, and ending one."""

from __future__ import annotations

import signal
import socket
import subprocess

GRACE_SECONDS = 10


def free_port() -> int:
    """A loopback port nothing listens on now (bound, then released): another process may
    take it before the child binds it, so a caller that can retries on a fresh one."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it is still running after `GRACE_SECONDS`; idempotent."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
