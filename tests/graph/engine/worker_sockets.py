"""Which worker process of `serve --workers N` accepted a connection (Linux's /proc)."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence
from pathlib import Path


def accepting_worker(client: socket.socket, workers: Sequence[int]) -> int | None:
    """Which of `workers` holds the server's end of a connected loopback TCP `client`
    (Linux's /proc): the process that accepted it; None while none has yet."""
    here, there = client.getsockname()[1], client.getpeername()[1]
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16)
        if local == there and remote == here:
            inodes.add(f"socket:[{fields[9]}]")
    for pid in workers:
        with contextlib.suppress(OSError):  # a descriptor closed while listed
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return pid
    return None
