"""Logging: one JSON object a line (or text) carrying the request id, so a masked
INTERNAL_SERVER_ERROR can be found in the log by the id its message and header give."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import ROOT

from graph_api import logs
from graph_api.settings import Settings, SettingsError
from graph_api.store.table import Table

TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
QUERY = '{ student(id: "stu-0001") { id } }'
UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access")


def configured(level: str, fmt: str) -> contextlib.AbstractContextManager[io.StringIO]:
    """`logs.configure`, its handler writing to a buffer; the logging set-up restored after."""
    return buffered(lambda: logs.configure(level, fmt))


@contextlib.contextmanager
def buffered(configure: Callable[[], object]) -> Iterator[io.StringIO]:
    """Logging as `configure` sets it up, its one root handler writing to a buffer; the
    logging set-up (the root's and uvicorn's loggers) restored after."""
    root = logging.getLogger()
    saved_root = (root.handlers[:], root.level)
    saved_uvicorn = {
        name: (
            logging.getLogger(name).handlers[:],
            logging.getLogger(name).propagate,
            logging.getLogger(name).level,
        )
        for name in UVICORN
    }
    try:
        # uvicorn's loggers at the level a fresh process has: a server another test ran in
        # this process (uvicorn.Config(log_level=...)) leaves its own level on them.
        for name in UVICORN:
            logging.getLogger(name).setLevel(logging.NOTSET)
        configure()
        (handler,) = root.handlers
        assert isinstance(handler, logging.StreamHandler)
        buffer = io.StringIO()
        handler.setStream(buffer)
        yield buffer
    finally:
        root.handlers, _ = saved_root
        root.setLevel(saved_root[1])
        for name, (handlers, propagate, level) in saved_uvicorn.items():
            logging.getLogger(name).handlers = handlers
            logging.getLogger(name).propagate = propagate
            logging.getLogger(name).setLevel(level)


def json_lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    lines = buffer.getvalue().splitlines()
    return [json.loads(line) for line in lines]  # every line is one JSON object


@pytest.fixture
def chatty_get_many(monkeypatch: pytest.MonkeyPatch) -> None:
    """Table.get_many logs a line, inside the request, then does its work."""
    original = Table.get_many

    async def get_many(self: Table, *args: Any, **kwargs: Any) -> Any:
        logging.getLogger("graph_api.test").info("reading a batch")
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Table, "get_many", get_many)


# -- format -----------------------------------------------------------------------------------


def test_json_format_is_one_object_a_line_with_the_standard_fields() -> None:
    with configured("INFO", "json") as buffer:
        log = logging.getLogger("graph_api.test")
        log.info("hello %s", "world")
        log.warning('two\nlines and "quotes" and ünïcode')
    first, second = json_lines(buffer)
    assert set(first) == {"time", "level", "logger", "message"}  # no request: no request_id
    assert TIME.fullmatch(first["time"])
    assert (first["level"], first["logger"], first["message"]) == (
        "INFO",
        "graph_api.test",
        "hello world",
    )
    assert second["level"] == "WARNING"
    assert second["message"] == 'two\nlines and "quotes" and ünïcode'


def test_json_format_carries_the_exception() -> None:
    with configured("INFO", "json") as buffer:
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("graph_api.test").exception("failed")
    (entry,) = json_lines(buffer)
    assert entry["level"] == "ERROR"
    assert entry["message"] == "failed"
    assert "Traceback" in entry["exception"]
    assert "ValueError: boom" in entry["exception"]


def test_level_filters_records() -> None:
    with configured("WARNING", "json") as buffer:
        logging.getLogger("graph_api.test").info("quiet")
        logging.getLogger("graph_api.test").warning("loud")
    assert [e["message"] for e in json_lines(buffer)] == ["loud"]


def test_uvicorn_loggers_go_through_the_same_handler() -> None:
    with configured("INFO", "json") as buffer:
        for name in UVICORN:
            assert logging.getLogger(name).handlers == []
            assert logging.getLogger(name).propagate is True
        logging.getLogger("uvicorn.error").info("started")
    (entry,) = json_lines(buffer)
    assert (entry["logger"], entry["message"]) == ("uvicorn.error", "started")


def test_text_format_outside_a_request_shows_a_dash() -> None:
    with configured("INFO", "text") as buffer:
        logging.getLogger("graph_api.test").info("plain")
    line = buffer.getvalue().strip()
    assert "INFO graph_api.test [-]: plain" in line


def test_configure_restores_cleanly() -> None:
    root = logging.getLogger()
    before = (root.handlers[:], root.level)
    with configured("DEBUG", "json"):
        assert root.level == logging.DEBUG
    assert (root.handlers, root.level) == before


# -- over HTTP --------------------------------------------------------------------------------


@pytest.mark.usefixtures("chatty_get_many")
def test_json_lines_logged_during_a_request_carry_its_id(client: TestClient) -> None:
    with configured("INFO", "json") as buffer:
        response = client.post("/graphql", json={"query": QUERY})
    assert response.status_code == 200
    request_id = response.headers["x-request-id"]
    (entry,) = [e for e in json_lines(buffer) if e["logger"] == "graph_api.test"]
    assert entry["request_id"] == request_id
    assert entry["message"] == "reading a batch"


@pytest.mark.usefixtures("chatty_get_many")
def test_text_lines_logged_during_a_request_carry_the_sent_id(client: TestClient) -> None:
    with configured("INFO", "text") as buffer:
        response = client.post(
            "/graphql", json={"query": QUERY}, headers={"X-Request-ID": "trace-log-7"}
        )
    assert response.headers["x-request-id"] == "trace-log-7"
    lines = [line for line in buffer.getvalue().splitlines() if "reading a batch" in line]
    assert len(lines) == 1
    assert "[trace-log-7]" in lines[0]


@pytest.mark.usefixtures("broken_get_many")
@pytest.mark.parametrize("sent_id", [None, "trace-secret-1"])
def test_unexpected_exception_is_masked_and_logged_under_the_request_id(
    client: TestClient, sent_id: str | None
) -> None:
    headers = {"X-Request-ID": sent_id} if sent_id else {}
    with configured("INFO", "json") as buffer:
        response = client.post("/graphql", json={"query": QUERY}, headers=headers)
    assert response.status_code < 500
    request_id = response.headers["x-request-id"]
    if sent_id:
        assert request_id == sent_id
    (error,) = response.json()["errors"]
    assert error["extensions"]["code"] == "INTERNAL_SERVER_ERROR"
    assert request_id in error["message"]
    shown = response.text.replace(request_id, "<id>")
    assert "secret" not in shown
    assert "Traceback" not in response.text
    assert "RuntimeError" not in response.text

    logged = [e for e in json_lines(buffer) if e.get("request_id") == request_id]
    assert len(logged) == 1
    (entry,) = logged
    assert entry["level"] == "ERROR"
    assert request_id in entry["message"]
    assert "RuntimeError: secret" in entry["exception"]


@pytest.mark.usefixtures("broken_get_many")
def test_unexpected_exception_in_text_format_names_the_request(client: TestClient) -> None:
    with configured("INFO", "text") as buffer:
        response = client.post("/graphql", json={"query": QUERY})
    request_id = response.headers["x-request-id"]
    text = buffer.getvalue()
    assert f"[{request_id}]" in text
    assert "RuntimeError: secret" in text


def test_requests_get_distinct_ids_in_the_log(client: TestClient, chatty_get_many: None) -> None:
    with configured("INFO", "json") as buffer:
        ids = [client.post("/graphql", json={"query": QUERY}).headers["x-request-id"] for _ in "ab"]
    logged = [e["request_id"] for e in json_lines(buffer) if e["logger"] == "graph_api.test"]
    assert logged == ids
    assert ids[0] != ids[1]


# -- settings -----------------------------------------------------------------------------------


def test_log_format_defaults_to_text_for_embedded_and_json_for_remote() -> None:
    assert Settings.from_env({"GRAPH_API_BACKEND": "embedded"}).log_format == "text"
    assert Settings.from_env({"GRAPH_API_BACKEND": "remote"}).log_format == "json"
    assert Settings.from_env({"GRAPH_API_LOG_FORMAT": "JSON"}).log_format == "json"


@pytest.mark.parametrize(
    ("name", "value"), [("GRAPH_API_LOG_FORMAT", "xml"), ("GRAPH_API_LOG_LEVEL", "LOUD")]
)
def test_invalid_log_settings_are_refused(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value})


@pytest.mark.parametrize("backend", ["remote", "embedded"])
def test_serve_with_json_logs_writes_only_json_lines_and_no_botocore_notes(
    tmp_path: Any, backend: str
) -> None:
    """`serve` with JSON logs, on a remote table or the embedded demo: its start-up banner
    (where DynamoDB is, the seeding, the GraphiQL URL, subscriptions) is log records like
    the rest, and botocore's INFO notes (where it found the endpoint and the credentials)
    are not in the log."""
    import os
    import subprocess
    import sys
    import threading

    from tools.processes import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GRAPH_API_"))}
    env.update(
        AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:1",  # nothing listens: the reader says so
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        GRAPH_API_PORT=str(free_port()),
        GRAPH_API_LOG_FORMAT="json",
    )
    if backend == "embedded":
        env.update(GRAPH_API_BACKEND="embedded", GRAPH_API_DEMO_STUDENTS="20")
        del env["AWS_ENDPOINT_URL_DYNAMODB"]
    process = subprocess.Popen(
        [sys.executable, "-m", "graph_api.cli", "serve"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader_spoke = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if '"graph_api.events.reader"' in line:  # after the clients were made
                reader_spoke.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert reader_spoke.wait(120), "".join(lines)
    finally:
        process.terminate()
        process.wait(60)
    records = [json.loads(line) for line in lines if line.strip()]  # each line is JSON
    messages = [r["message"] for r in records]
    if backend == "remote":
        assert messages[0] == "graph-api: DynamoDB at http://127.0.0.1:1, table graph"
    else:
        assert messages[0].endswith("(embedded moto, 20 demo students), table graph")
        assert any(m.startswith("seeded ") for m in messages)
    assert any(m.startswith("GraphiQL: http://127.0.0.1:") for m in messages)
    assert any(m.startswith("Subscriptions: on") for m in messages)
    assert not [r for r in records if r["logger"].startswith(("botocore", "aiobotocore"))]


@pytest.mark.parametrize(
    ("env", "fmt"),
    [
        ({"GRAPH_API_BACKEND": "remote"}, "json"),
        ({"GRAPH_API_BACKEND": "remote", "GRAPH_API_LOG_FORMAT": "text"}, "text"),
        ({"GRAPH_API_BACKEND": "remote", "GRAPH_API_MAX_COST": "lots"}, "json"),
    ],
)
def test_the_images_uvicorn_supervisor_logs_in_the_workers_format(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], fmt: str
) -> None:
    """`deploy/uvicorn-logging.json` (the image's --log-config) gives uvicorn's own lines the
    format the workers log in; settings a worker will refuse leave the image's JSON."""
    import logging.config

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = ROOT / "deploy" / "uvicorn-logging.json"
    with buffered(lambda: logging.config.dictConfig(json.loads(config.read_text()))) as buffer:
        logging.getLogger("uvicorn.error").info("Started parent process [1]")
    line = buffer.getvalue().strip()
    if fmt == "json":
        assert json.loads(line)["message"] == "Started parent process [1]"
    else:
        assert line.endswith(" INFO uvicorn.error [-]: Started parent process [1]")
