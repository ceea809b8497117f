"""`graph-api serve --workers N`: several processes behind one port, one API.

A cursor made by one worker must be read by another (they share the cursor secret), and
SIGTERM to the parent stops every process it started (workers, embedded DynamoDB)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support import (
    clean_environ,
    is_worker,
    queries_answered,
    serve_process,
    serving_two_workers,
    wait_until_healthy,
)

from graph_api import cli
from graph_api.embedded import cpu_seconds, descendants
from graph_api.http.hosting import settings_for_workers, settings_from_parent
from graph_api.settings import Settings, SettingsError
from tools.processes import free_port

STUDENTS = 40
PAGE = 2
WALKERS = 4  # concurrent walks, so that both workers are kept busy

PAGE_QUERY = """query Page($after: String) {
  class(id: "cls-001") {
    students(first: %d, after: $after) {
      edges { node { id name } }
      pageInfo { hasNextPage endCursor }
    }
  }
}"""


def test_default_workers_one_unless_a_broker_shares_events_web_concurrency_first() -> None:
    """One process whenever subscriptions need it (the in-process broker) or moto serves;
    one per core on a remote backend with Redis to share events between workers."""
    remote, embedded = Settings(backend="remote"), Settings(backend="embedded")
    shared = Settings(backend="remote", events_broker="redis://127.0.0.1:6379/0")
    assert cli.default_workers(remote, {}) == 1
    assert cli.default_workers(shared, {}) == len(os.sched_getaffinity(0))
    assert cli.default_workers(embedded, {}) == 1
    assert cli.default_workers(embedded, {"WEB_CONCURRENCY": "3"}) == 3
    with pytest.raises(SettingsError, match="WEB_CONCURRENCY"):
        cli.default_workers(remote, {"WEB_CONCURRENCY": "0"})


def test_workers_get_the_parents_settings_and_its_generated_cursor_secret() -> None:
    settings = Settings(backend="remote", endpoint_url="http://127.0.0.1:1", port=9)
    assert not settings.cursor_secret_configured  # a random secret, made in the parent
    assert settings_from_parent(settings_for_workers(settings)) == settings


def _post(port: int, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    """One request on a connection of its own: any worker may accept it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        body = json.dumps({"query": query, "variables": variables})
        connection.request("POST", "/graphql", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        assert response.status == 200, answer
        assert "errors" not in answer, answer
        return answer["data"]  # type: ignore[no-any-return]
    finally:
        connection.close()


def _walk(port: int) -> list[str]:
    """Every page's ids, one after the other (one query each)."""
    ids: list[str] = []
    after = None
    while True:
        page = _post(port, PAGE_QUERY % PAGE, {"after": after})["class"]["students"]
        ids += [edge["node"]["id"] for edge in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            return ids
        after = page["pageInfo"]["endCursor"]


def _queries_counted(port: int) -> float:
    """What /metrics, scraped on a connection of its own, says of the queries answered."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    return queries_answered(text)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False


def test_serve_with_two_workers_pages_with_cursors_across_workers_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = clean_environ(GRAPH_API_DEMO_STUDENTS=str(STUDENTS), GRAPH_API_LOG_LEVEL="WARNING")
    address = ("--host", "127.0.0.1", "--port", str(port))
    # In a folder of its own: serve writes .data/ (embedded.json, cursor-secret) there.
    with serve_process(tmp_path, env, "--workers", "2", *address) as (process, log):
        wait_until_healthy(port, process, log)
        started = descendants(process.pid)
        written = json.loads((tmp_path / ".data" / "embedded.json").read_text())
        assert written["pid"] == process.pid  # once, by the parent
        workers = [pid for pid in started if is_worker(pid)]
        assert len(workers) == 2, started

        whole = _post(port, PAGE_QUERY % 100, {"after": None})["class"]["students"]
        expected = [edge["node"]["id"] for edge in whole["edges"]]
        assert len(expected) > 10 * PAGE and not whole["pageInfo"]["hasNextPage"]
        before = {pid: cpu_seconds([pid]) for pid in workers}
        with ThreadPoolExecutor(WALKERS) as pool:
            walks = list(pool.map(_walk, [port] * WALKERS))
        used = {pid: cpu_seconds([pid]) - before[pid] for pid in workers}
        assert walks == [expected] * WALKERS  # every page right, whichever worker made it
        # Both workers served pages, so cursors crossed from one to the other.
        assert all(seconds > 0.05 * sum(used.values()) for seconds in used.values()), used
        # Whichever worker answers /metrics reports every worker's queries (multiprocess mode).
        pages = -(-len(expected) // PAGE)
        answered = 1 + WALKERS * pages
        assert [_queries_counted(port) for _ in range(4)] == [answered] * 4

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) in (0, 128 + signal.SIGTERM)
        deadline = time.monotonic() + 30
        while any(map(_alive, started)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in started if _alive(pid)], log.read_text()[-4000:]
        assert not (tmp_path / ".data" / "embedded.json").exists()


# A worker that takes this long to start (a busy host importing everything) must be waited
# for: uvicorn's default health check (5 s) killed and restarted such workers forever.
SLOW_START_SECONDS = 8

SLOW_START = f"""
import sys, time
if "--multiprocessing-fork" in sys.argv:  # uvicorn's workers (multiprocessing's spawn)
    time.sleep({SLOW_START_SECONDS})
"""


def test_workers_that_start_slowly_come_up_and_are_not_killed(tmp_path: Path) -> None:
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW_START)
    environ = {"GRAPH_API_LOG_LEVEL": "INFO", "PYTHONPATH": str(slow)}
    with serving_two_workers(tmp_path, **environ) as (_, _, log):
        assert "died" not in log.read_text()  # none killed by the supervisor and replaced
