"""`.data/embedded.json`: where the table commands find the DynamoDB `graph-api serve` embeds.

The embedded backend (moto) lives inside `serve`'s process, on a loopback port chosen when it
starts. Once its demo school is loaded, `serve` writes this file in the folder it runs from
(`make run`: the checkout) with its pid, the endpoint and the table, and removes it when it
stops. `graph-api check`, `seed` and `create-table` run with no DynamoDB configured read it
there: a file whose pid is no longer alive (a server that was killed) counts as none.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

PATH = Path(".data") / "embedded.json"  # relative to the working directory


class NotRunning(Exception):
    """No `graph-api serve` with the embedded backend runs from this folder."""


@dataclass(frozen=True)
class Embedded:
    pid: int
    endpoint: str  # the DynamoDB endpoint (moto) inside serve's process
    table: str
    api: str  # the GraphQL URL serve answers on


def write(endpoint: str, table: str, api: str, path: Path = PATH) -> Path:
    """Record this process's embedded endpoint (atomically: a reader sees all of it or none)."""
    return _write(Embedded(os.getpid(), endpoint, table, api), path)


def _write(embedded: Embedded, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(asdict(embedded)) + "\n")
    partial.replace(path)
    return path


def running(path: Path = PATH) -> Embedded | None:
    """The file of a server that still runs, or None."""
    try:
        return find(path)
    except NotRunning:
        return None


def remove(path: Path = PATH, restore: Embedded | None = None) -> None:
    """Remove the file if this process wrote it (another serve may have written it since);
    `restore`, the file of a server this one replaced, is written back if it still runs, so
    that the table commands find it again."""
    try:
        if read(path).pid != os.getpid():
            return
    except (FileNotFoundError, NotRunning):
        return
    if restore is not None and restore.pid != os.getpid() and alive(restore.pid):
        _write(restore, path)
    else:
        path.unlink(missing_ok=True)


def read(path: Path = PATH) -> Embedded:
    """The file as written, whether or not its server still runs."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Embedded(
            pid=int(data["pid"]),
            endpoint=str(data["endpoint"]),
            table=str(data["table"]),
            api=str(data["api"]),
        )
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise NotRunning(f"{path} is unreadable ({error})") from None


def find(path: Path = PATH) -> Embedded:
    """The running server's embedded endpoint, or NotRunning saying why there is none."""
    try:
        found = read(path)
    except FileNotFoundError:
        raise NotRunning(
            f"no `graph-api serve` with the embedded backend runs here ({path})"
        ) from None
    if not alive(found.pid):
        raise NotRunning(f"the `graph-api serve` that wrote {path} (pid {found.pid}) is gone")
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
