"""AWS's DynamoDB Local, installed from npm and run on a loopback port.

The npm package `amplify-dynamodb-simulator` ships `DynamoDBLocal.jar` with its native
libraries; we fetch the pinned version with `npm pack` (npm checks its integrity) into an
ignored cache folder, and run it with the machine's Java 17.

    python -m tools.dynamodb_local install
    python -m tools.dynamodb_local serve [--port 8001] [--db-path .data/dynamodb]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tools import processes
from tools.processes import free_port

PACKAGE = "amplify-dynamodb-simulator"
VERSION = "2.9.30"
ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / f"dynamodb-local-{VERSION}"
EMULATOR = CACHE / "package" / "emulator"


def install() -> Path:
    """The emulator folder, fetched once into `.cache/`."""
    jar = EMULATOR / "DynamoDBLocal.jar"
    if jar.exists():
        return EMULATOR
    if shutil.which("npm") is None:
        raise SystemExit(
            "npm is needed to fetch DynamoDB Local (the amplify-dynamodb-simulator package)"
        )
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["npm", "pack", f"{PACKAGE}@{VERSION}", "--silent", "--pack-destination", str(CACHE)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    tarball = CACHE / f"{PACKAGE}-{VERSION}.tgz"
    with tarfile.open(tarball) as archive:
        extract(archive, CACHE)
    tarball.unlink()
    if not jar.exists():
        raise SystemExit(f"{PACKAGE}@{VERSION} did not contain package/emulator/DynamoDBLocal.jar")
    return EMULATOR


def extract(archive: tarfile.TarFile, into: Path) -> None:
    """Every member of `archive` under `into`, with tarfile's "data" filter (PEP 706: nothing
    outside `into`, no links out of it, no devices). Pythons without the filter (before
    3.11.4: Debian's 3.11.2, which `make` prefers) get the same refusal for what an npm
    tarball can hold, plain files and folders, and refuse any other kind of member."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(into, filter="data")
        return
    root = into.resolve()
    for member in archive.getmembers():
        inside = (root / member.name).resolve().is_relative_to(root)
        if not inside or not (member.isfile() or member.isdir()):
            raise SystemExit(f"{archive.name}: refusing {member.name!r}, not a file under {root}")
    archive.extractall(into)


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    endpoint: str

    def stop(self) -> None:
        processes.stop(self.process)


def command(emulator: Path, port: int, db_path: Path | None) -> list[str]:
    """The java command line, run from the emulator's folder (its libraries are relative).

    `db_path` is made absolute and created: Java resolves a relative `-dbPath` from its own
    working directory, the emulator's folder, not from where the user typed it.
    """
    storage = ["-inMemory"]
    if db_path is not None:
        db_path = db_path.resolve()
        db_path.mkdir(parents=True, exist_ok=True)
        storage = ["-dbPath", str(db_path)]
    return [
        "java",
        # The serial collector: on two cores the default (G1) and its concurrent threads
        # took a quarter of the emulator's CPU, which the API and the bench's other
        # processes share (a 30-key BatchGetItem: 3.3-4.0 ms of its CPU, 2.5-2.7 with it).
        "-XX:+UseSerialGC",
        f"-Djava.library.path={emulator / 'DynamoDBLocal_lib'}",
        "-jar",
        str(emulator / "DynamoDBLocal.jar"),
        *storage,
        "-sharedDb",  # one database whatever the access key and region
        "-port",
        str(port),
    ]


def start(port: int | None = None, db_path: Path | None = None, timeout: float = 60.0) -> Running:
    """Start DynamoDB Local on 127.0.0.1 and wait until it answers HTTP."""
    if shutil.which("java") is None:
        raise SystemExit(
            "java (17+) is needed for DynamoDB Local: apt-get install openjdk-17-jre-headless"
        )
    emulator = install()
    port = port or free_port()
    command_line = command(emulator, port, db_path)
    # DynamoDB Local listens on every interface; nothing but loopback reaches this machine.
    process = subprocess.Popen(
        command_line, cwd=emulator, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    running = Running(process, f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                error = process.stderr.read().decode() if process.stderr else ""
                raise SystemExit(f"DynamoDB Local exited: {error[-2000:]}")
            try:
                urllib.request.urlopen(running.endpoint, timeout=1)
            except urllib.error.HTTPError:
                return running  # it answers (400 to a bare GET): ready
            except OSError:
                time.sleep(0.2)
        raise SystemExit(f"DynamoDB Local did not answer on {running.endpoint} in {timeout:.0f} s")
    except BaseException:  # not ready in time, or interrupted while starting: no orphan
        running.stop()
        raise


# What ends `serve` as Ctrl-C does: a supervisor's or `kill`'s SIGTERM, a closed terminal's
# SIGHUP. Left to their default, they end Python at once and orphan Java, which keeps the port.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, _: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> None:
    parser = argparse.ArgumentParser(description="DynamoDB Local for development and tests")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="fetch the pinned DynamoDB Local into .cache/")
    serve = commands.add_parser("serve", help="run DynamoDB Local until interrupted")
    serve.add_argument(
        "--port", type=int, default=int(os.environ.get("DYNAMODB_LOCAL_PORT", "8001"))
    )
    serve.add_argument(
        "--db-path", type=Path, help="persist under this folder (default: in memory)"
    )
    args = parser.parse_args()
    if args.command == "install":
        print(install())
        return
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, _interrupt)
    try:
        running = start(args.port, args.db_path)
    except KeyboardInterrupt:  # stopped while starting: start() stopped Java
        sys.exit(0)
    try:  # from here a stop signal, even during the banner, stops Java and exits 0
        print(
            f"DynamoDB Local on {running.endpoint} (pid {running.process.pid});"
            " Ctrl-C (or SIGTERM, SIGHUP) stops it",
            flush=True,
        )
        print(
            f"  export AWS_ENDPOINT_URL_DYNAMODB={running.endpoint} AWS_ACCESS_KEY_ID=local "
            "AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1",
            flush=True,
        )
        running.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
