"""The CPU a process tree has used, read from Linux's /proc: how `make bench` charges each
server (our API's `graph-api serve` and its workers, PostGraphile's Node process) for the
requests it answered.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Stat:
    """What the bench reads of `/proc/PID/stat`."""

    ppid: int
    ticks: int  # utime + stime: the process's threads, live and ended, in clock ticks


def parse_stat(raw: str) -> Stat:
    """One `/proc/PID/stat` line. The command name (2nd field) is in parentheses and may hold
    spaces and parentheses itself, so the fields are counted from its last `)`."""
    fields = raw[raw.rindex(")") + 2 :].split()  # [0] state, [1] ppid, [11] utime, [12] stime
    return Stat(ppid=int(fields[1]), ticks=int(fields[11]) + int(fields[12]))


def stat(pid: int) -> Stat | None:
    """The process's Stat, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as file:
            return parse_stat(file.read())
    except (OSError, ValueError, IndexError):
        return None


def descendants(pid: int, parents: dict[int, int] | None = None) -> list[int]:
    """`pid`'s children, their children, ... (`parents`: pid -> ppid, all of /proc's when
    None)."""
    if parents is None:
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (found := stat(int(entry))) is not None:
                parents[int(entry)] = found.ppid
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    out, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        out += below
        todo += below
    return out


def cpu_seconds(pids: Iterable[int]) -> float:
    """The CPU (user + system) the processes have used so far; a process gone counts 0."""
    return sum(s.ticks for pid in pids if (s := stat(pid)) is not None) / CLOCK_TICKS


def tree_cpu_seconds(pid: int) -> float:
    """The CPU of `pid` and of its descendants alive now (a server's workers)."""
    return cpu_seconds([pid, *descendants(pid)])


def workers(pid: int) -> list[int]:
    """The uvicorn workers below `graph-api serve` (multiprocessing's spawn), not its resource
    tracker."""
    found = []
    for child in descendants(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                if b"spawn_main" in cmdline.read():
                    found.append(child)
        except OSError:
            pass
    return found
