"""Ending a child process the tools started (DynamoDB Local, stunnel)."""

from __future__ import annotations

import signal
import subprocess

GRACE_SECONDS = 10


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it is still running after `GRACE_SECONDS`; idempotent."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
