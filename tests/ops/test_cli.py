from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support import ROOT, awaited, clean_environ, make_settings, ok, serve_process

from graph_api import cli
from graph_api.ops import demo, embedded_file
from graph_api.settings import Settings, SettingsError, with_dev_cursor_secret
from graph_api.store import admin
from graph_api.store.client import Dynamo
from tools.processes import free_port


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No AWS_* hints and no GRAPH_API_* settings: the environment of a fresh shell, in a
    folder of its own (where no `graph-api serve` left `.data/embedded.json`)."""
    for name in list(os.environ):
        if name.startswith(("AWS_", "GRAPH_API_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


@pytest.mark.parametrize(
    "argv", [["seed"], ["create-table"], ["seed", "--students", "5"], ["check"], ["migrate"]]
)
def test_table_commands_without_dynamodb_exit_2_naming_make_run_and_the_endpoint_variable(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert "AWS_ENDPOINT_URL_DYNAMODB" in captured.err
    assert "`make run`" in captured.err
    assert captured.err.startswith("graph-api: ")
    assert captured.err.count("\n") == 1
    assert captured.out == ""


def test_serve_without_moto_says_how_to_get_the_embedded_backend(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The container image and the Lambda package carry no moto: `serve` with no endpoint
    # says what to install or set, in one line, instead of a traceback.
    import importlib.util

    find_spec = importlib.util.find_spec
    clean_env.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "moto" else find_spec(name, *a),
    )
    assert cli.main(["serve", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "graph-api[embedded]" in err and "AWS_ENDPOINT_URL_DYNAMODB" in err
    assert err.startswith("graph-api: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv", [["create-table"], ["seed", "--students", "2"], ["check"], ["migrate"]]
)
def test_table_commands_say_in_one_line_that_dynamodb_is_unreachable(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    clean_env.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    clean_env.setenv("AWS_ACCESS_KEY_ID", "testing")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"graph-api: DynamoDB at {endpoint}, table graph",
        f"graph-api: cannot connect to DynamoDB at {endpoint}: is it running?",
    ]
    assert captured.out == ""


@pytest.mark.parametrize("argv", [["seed", "--students", "2"], ["check"], ["migrate"]])
def test_table_commands_say_in_one_line_that_the_table_is_missing(
    remote_table: str, endpoint: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert cli.main(argv) == 2  # remote_table names a table nobody created
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"graph-api: DynamoDB at {endpoint}, table {remote_table}",
        f"graph-api: table {remote_table} does not exist at {endpoint}: create it with"
        " `graph-api create-table` (GRAPH_API_TABLE names it)",
    ]
    assert captured.out == ""


@pytest.fixture
def remote_table(clean_env: pytest.MonkeyPatch, endpoint: str) -> Iterator[str]:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    clean_env.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    clean_env.setenv("AWS_ACCESS_KEY_ID", "testing")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    clean_env.setenv("AWS_REGION", "us-east-1")
    clean_env.setenv("GRAPH_API_TABLE", name)
    yield name
    dynamo = Dynamo(make_settings(endpoint, table=name))
    try:
        awaited(dynamo.call("DeleteTable", {"TableName": name}, None, missing_table=False))
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceNotFoundException":
            raise


def count_items(endpoint: str, table: str) -> int:
    dynamo = Dynamo(make_settings(endpoint, table=table))
    count, pages, start = 0, 0, None
    while True:
        params = {"TableName": table, "Select": "COUNT", "Limit": 10}
        if start:
            params["ExclusiveStartKey"] = start
        response = awaited(dynamo.call("Scan", params, None, missing_table=False))
        count, pages = count + response["Count"], pages + 1
        start = response.get("LastEvaluatedKey")
        if not start:
            assert pages > 1  # the scan really paged
            return count


def test_create_table_then_seed_writes_every_demo_item(
    remote_table: str, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["create-table"]) == 0
    assert capsys.readouterr().out == f"table {remote_table} created\n"
    assert cli.main(["seed", "--students", "5", "--seed", "3"]) == 0
    expected = len(demo.generate(5, 3))
    captured = capsys.readouterr()
    assert captured.out == f"seeded {expected} items into {remote_table}\n"
    assert f"{expected}/{expected} items" in captured.err
    assert count_items(endpoint, remote_table) == expected
    assert cli.main(["create-table"]) == 0
    assert capsys.readouterr().out == f"table {remote_table} already exists\n"


@pytest.mark.parametrize(
    "command", [["create-table"], ["seed", "--students", "2"], ["check"], ["migrate"]]
)
def test_a_table_command_awaits_every_call_on_one_loop_of_its_own_thread(
    remote_table: str, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """A table command runs the API's client under `asyncio.run`: every DynamoDB call is
    awaited on one event loop, in the thread that ran the command, and the client has no
    synchronous path (no loop on a thread of its own to hand calls to)."""
    if command != ["create-table"]:
        assert cli.main(["create-table"]) == 0
    seen: list[tuple[threading.Thread, asyncio.AbstractEventLoop]] = []

    class Recording(Dynamo):
        async def call(self, *args: Any, **kwargs: Any) -> Any:
            seen.append((threading.current_thread(), asyncio.get_running_loop()))
            return await super().call(*args, **kwargs)

    monkeypatch.setattr(cli, "Dynamo", Recording)
    assert cli.main(command) == 0
    assert seen  # the command did reach DynamoDB
    assert {thread for thread, _ in seen} == {threading.main_thread()}
    assert len({id(loop) for _, loop in seen}) == 1
    assert all(loop.is_closed() for _, loop in seen)  # the command's loop ended with it
    assert not hasattr(Dynamo, "call_sync") and not hasattr(Dynamo, "run")


MUTATIONS = """mutation {
  createStudent(input: {id: "late", name: "Late Comer", email: "late@school.example"}) {
    userErrors { code } }
  enrollStudent(studentId: "late", classId: "cls-001") { userErrors { code } }
  updateTeacher(id: "tch-001", input: {name: "Renamed"}) { userErrors { code } }
}"""


def test_seed_refuses_a_table_with_items_and_force_leaves_check_clean(
    remote_table: str, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's seed run again after a mutation: refused in one line; with --force the
    table is emptied first, so `check` stays clean whatever the table held (a smaller
    school over a bigger one, a mutated graph)."""
    assert cli.main(["create-table"]) == 0
    assert cli.main(["seed", "--students", "8", "--seed", "3"]) == 0
    from graph_api.graph.engine.context import Services

    services = Services.create(make_settings(endpoint, table=remote_table))
    try:
        assert ok(services, MUTATIONS)
    finally:
        services.close()
    capsys.readouterr()

    assert cli.main(["seed", "--students", "8", "--seed", "3"]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"graph-api: DynamoDB at {endpoint}, table {remote_table}",
        f"graph-api: table {remote_table} already holds items: seed writes into an empty"
        " table; `graph-api seed --force` deletes every item first",
    ]
    assert captured.out == ""

    for students in (8, 5):  # over the mutated school, then a smaller one over it
        assert cli.main(["seed", "--students", str(students), "--seed", "3", "--force"]) == 0
        assert cli.main(["check"]) == 0, capsys.readouterr().out
        assert count_items(endpoint, remote_table) == len(demo.generate(students, 3))
    assert capsys.readouterr().err.startswith(
        f"graph-api: DynamoDB at {endpoint}, table {remote_table}\n"
    )


def test_settings_pick_embedded_without_aws_hints() -> None:
    assert Settings.from_env({}).backend == "embedded"
    assert Settings.from_env({"AWS_REGION": "eu-west-1"}).backend == "embedded"
    assert Settings.from_env({"AWS_CA_BUNDLE": "/etc/ssl/ca.pem"}).backend == "embedded"


@pytest.mark.parametrize(
    "hint", ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"]
)
def test_settings_pick_remote_with_an_aws_hint(hint: str) -> None:
    assert Settings.from_env({hint: "http://localhost:8000"}).backend == "remote"


def test_settings_explicit_backend_wins_over_hints() -> None:
    env = {"AWS_ENDPOINT_URL_DYNAMODB": "http://x", "GRAPH_API_BACKEND": " Embedded "}
    assert Settings.from_env(env).backend == "embedded"
    assert Settings.from_env({"GRAPH_API_BACKEND": "remote"}).backend == "remote"
    with pytest.raises(SettingsError):
        Settings.from_env({"GRAPH_API_BACKEND": "cloud"})


def test_settings_read_values_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "GRAPH_API_TABLE": "t1",
            "GRAPH_API_PORT": "9001",
            "GRAPH_API_CURSOR_SECRET": "s3cret",
            "GRAPH_API_ACCOUNTING": "off",
            "AWS_DEFAULT_REGION": "eu-central-1",
            "GRAPH_API_STREAM_POLL_SECONDS": "0.5",
            "GRAPH_API_STREAM_LEASE_SECONDS": "30",
        }
    )
    assert (settings.table, settings.port, settings.region) == ("t1", 9001, "eu-central-1")
    assert (settings.stream_poll_seconds, settings.stream_lease_seconds) == (0.5, 30.0)
    assert settings.cursor_secret == b"s3cret"
    assert settings.cursor_secret_configured is True
    assert settings.accounting is False


def test_settings_without_cursor_secret_draw_a_random_one() -> None:
    first, second = Settings.from_env({}), Settings.from_env({})
    assert first.cursor_secret_configured is False
    assert len(first.cursor_secret) == 32
    assert first.cursor_secret != second.cursor_secret


def test_dev_cursor_secret_survives_a_restart_of_the_embedded_server(tmp_path: Path) -> None:
    """`make run` twice: the second process signs and reads cursors with the first's secret,
    kept in a file only its owner reads."""
    from graph_api.model.cursors import Cursors
    from graph_api.model.keys import Kind as NodeKind
    from graph_api.model.keys import catalog

    path = tmp_path / ".data" / "cursor-secret"
    before = with_dev_cursor_secret(Settings.from_env({}), path)
    after = with_dev_cursor_secret(Settings.from_env({}), path)  # a new process, same folder
    assert before.cursor_secret == after.cursor_secret
    assert len(before.cursor_secret) == 32
    assert before.cursor_secret_file == str(path)
    assert path.stat().st_mode & 0o777 == 0o600
    rng = catalog(NodeKind.TEACHER)
    key = {"GSI1PK": rng.pk, "GSI1SK": "TEACHER#tch-001", "PK": "x", "SK": "x"}
    cursor = Cursors(before.cursor_secret).encode("Query.teachers", rng, key)
    assert Cursors(after.cursor_secret).decode(cursor, "Query.teachers", rng) == key


@pytest.mark.parametrize(
    "env",
    [{"GRAPH_API_CURSOR_SECRET": "configured"}, {"GRAPH_API_BACKEND": "remote"}],
    ids=["secret set", "remote backend"],
)
def test_dev_cursor_secret_only_without_a_secret_and_only_embedded(
    tmp_path: Path, env: dict[str, str]
) -> None:
    path = tmp_path / "cursor-secret"
    settings = Settings.from_env(env)
    assert with_dev_cursor_secret(settings, path) == settings
    assert not path.exists()


def test_a_damaged_dev_cursor_secret_file_is_a_settings_error(tmp_path: Path) -> None:
    path = tmp_path / "cursor-secret"
    path.write_text("not hex\n")
    with pytest.raises(SettingsError, match="remove it"):
        with_dev_cursor_secret(Settings.from_env({}), path)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GRAPH_API_PORT", "abc"),
        ("GRAPH_API_PORT", "-1"),
        ("GRAPH_API_PORT", "80.5"),
        ("GRAPH_API_ACCOUNTING", "maybe"),
        ("GRAPH_API_DEMO_STUDENTS", "many"),
        ("GRAPH_API_STREAM_POLL_SECONDS", "0"),
        ("GRAPH_API_STREAM_LEASE_SECONDS", "soon"),
    ],
)
def test_settings_bad_value_is_a_settings_error_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value})


def test_bad_setting_makes_the_cli_exit_2(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("GRAPH_API_PORT", "abc")
    assert cli.main(["export-schema"]) == 2
    assert "GRAPH_API_PORT" in capsys.readouterr().err


def test_settings_refuse_zero_concurrency() -> None:
    with pytest.raises(SettingsError, match="GRAPH_API_MAX_CONCURRENCY"):
        Settings.from_env({"GRAPH_API_MAX_CONCURRENCY": "0"})


def test_unknown_log_level_makes_the_cli_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GRAPH_API_"))}
    env["GRAPH_API_LOG_LEVEL"] = "loud"
    done = subprocess.run(
        [sys.executable, "-m", "graph_api.cli", "export-schema", "-o", str(tmp_path / "s")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "GRAPH_API_LOG_LEVEL" in done.stderr
    assert "Traceback" not in done.stderr


def wait_for(path: Path, process: subprocess.Popen[bytes], seconds: float = 120) -> None:
    """Until `path` exists (the process is still starting), within a bound."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, f"serve exited with {process.returncode}"
        assert time.monotonic() < deadline, f"serve wrote no {path} in {seconds:.0f} s"
        time.sleep(0.2)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C; a supervisor
def test_check_uses_the_embedded_dynamodb_of_a_running_serve(
    clean_env: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stop: signal.Signals,
) -> None:
    env = {
        **os.environ,
        "GRAPH_API_PORT": str(free_port()),
        "GRAPH_API_DEMO_STUDENTS": "8",
        "GRAPH_API_LOG_LEVEL": "WARNING",
    }
    runtime = tmp_path / embedded_file.PATH
    with serve_process(tmp_path, env, log="serve.out") as (serve, output):
        wait_for(runtime, serve)
        written = json.loads(runtime.read_text())
        assert written["pid"] == serve.pid
        assert written["table"] == "graph"

        found = f"(the embedded DynamoDB of `graph-api serve`, pid {serve.pid})"
        assert cli.main(["check"]) == 0
        captured = capsys.readouterr()
        assert captured.out.endswith("clean: every invariant holds\n")
        assert captured.err.startswith(
            f"graph-api: DynamoDB at {written['endpoint']} {found}, table graph\n"
        )
        first, *_ = output.read_text().splitlines()
        assert first == (
            f"graph-api: DynamoDB at {written['endpoint']} (embedded moto, 8 demo students),"
            " table graph"
        )
        assert f"Embedded DynamoDB: {written['endpoint']}, table graph" in output.read_text()

        # GRAPH_API_TABLE wins over the file's table: nothing is written to the demo's.
        clean_env.setenv("GRAPH_API_TABLE", "nosuch")
        assert cli.main(["seed", "--students", "2"]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"graph-api: DynamoDB at {written['endpoint']} {found}, table nosuch",
            f"graph-api: table nosuch does not exist at {written['endpoint']}: create it with"
            " `graph-api create-table` (GRAPH_API_TABLE names it)",
        ]
        clean_env.delenv("GRAPH_API_TABLE")

        # A bigger school over the demo: refused, then written over an emptied table.
        assert cli.main(["seed", "--students", "20"]) == 2
        assert "already holds items" in capsys.readouterr().err
        assert cli.main(["seed", "--students", "20", "--force"]) == 0
        assert cli.main(["check"]) == 0, capsys.readouterr().out
        serve.send_signal(stop)
        serve.wait(timeout=120)
    assert not runtime.exists()  # serve removed it on the way out

    assert cli.main(["check"]) == 2
    err = capsys.readouterr().err
    assert "no `graph-api serve` with the embedded backend runs here" in err
    assert "`make run`" in err


def test_a_runtime_file_left_by_a_killed_serve_is_not_used(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    path = tmp_path / embedded_file.PATH
    path.parent.mkdir()
    path.write_text(
        json.dumps(
            {"pid": gone.pid, "endpoint": "http://127.0.0.1:9", "table": "graph", "api": "x"}
        )
    )
    assert cli.main(["check"]) == 2
    err = capsys.readouterr().err
    assert f"(pid {gone.pid}) is gone" in err
    assert "`make run`" in err and err.count("\n") == 1


def test_the_dynamodb_endpoint_variable_wins_over_a_running_serves_file(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """With GRAPH_API_BACKEND=embedded too: a command sent to an endpoint goes there."""
    embedded_file.write("http://127.0.0.1:1", "graph", "http://127.0.0.1:8000/graphql")
    environ = {"GRAPH_API_BACKEND": "embedded", "AWS_ENDPOINT_URL_DYNAMODB": "http://db:8001"}
    settings = Settings.from_env(environ)
    assert cli._locate(settings, environ) == (settings, "")
    located, found = cli._locate(settings, {"GRAPH_API_BACKEND": "embedded"})
    assert (located.endpoint_url, located.table) == ("http://127.0.0.1:1", "graph")
    assert f"pid {os.getpid()}" in found


def test_serve_removes_only_its_own_runtime_file(clean_env: pytest.MonkeyPatch) -> None:
    path = embedded_file.write("http://127.0.0.1:1", "graph", "http://127.0.0.1:8000/graphql")
    assert embedded_file.find() == embedded_file.Embedded(
        os.getpid(), "http://127.0.0.1:1", "graph", "http://127.0.0.1:8000/graphql"
    )
    other = {"pid": os.getppid(), "endpoint": "http://127.0.0.1:2", "table": "t", "api": "a"}
    path.write_text(json.dumps(other))  # a second serve started here since
    embedded_file.remove()
    assert json.loads(path.read_text()) == other
    path.write_text("{not json")
    with pytest.raises(embedded_file.NotRunning, match="unreadable"):
        embedded_file.find()


# -- start-up: what `serve` refuses before it starts anything ---------------------------


def test_make_run_serves_the_embedded_demo_whatever_aws_settings_the_shell_holds() -> None:
    """`make run` in a shell with a profile and keys (most DynamoDB developers' shells) is
    still the demo: never AWS's DynamoDB with open writes."""
    import shlex

    root = ROOT
    shell = {**os.environ, "AWS_PROFILE": "dev", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE"}
    shell.pop("GRAPH_API_BACKEND", None)
    dry = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "run"],
        cwd=root,
        env=shell,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (line,) = [line for line in dry.stdout.splitlines() if "graph-api serve" in line]
    words = shlex.split(line)
    assigned = dict(word.split("=", 1) for word in words[: words.index(".venv/bin/graph-api")])
    assert Settings.from_env({**shell, **assigned}).backend == "embedded"


def test_serve_against_aws_without_sign_in_refuses_naming_the_setting(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")  # GRAPH_API_BACKEND=auto: remote
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert cli.main(["serve", "--port", str(free_port())]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("graph-api: ") and captured.err.count("\n") == 1
    assert "GRAPH_API_OPEN_WRITES=true" in captured.err
    assert "GRAPH_API_JWKS_URL" in captured.err
    assert "amazonaws.com" in captured.err
    assert captured.out == ""  # nothing started, nothing announced


def test_open_writes_only_refused_on_aws_itself_without_sign_in(
    clean_env: pytest.MonkeyPatch,
) -> None:
    from graph_api.http.hosting import open_writes_problem

    aws = Settings(backend="remote")
    assert open_writes_problem(aws) is not None
    assert open_writes_problem(dataclasses_replace(aws, open_writes=True)) is None
    signed = dataclasses_replace(aws, jwt_secret="s" * 32, jwt_issuer="i", jwt_audience="a")
    assert open_writes_problem(signed) is None
    assert open_writes_problem(Settings(backend="embedded")) is None
    # An emulator the operator named keeps today's behaviour (a warning in the log).
    clean_env.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8001")
    assert open_writes_problem(aws) is None
    # AWS's own endpoint named explicitly (regional, VPC) is still AWS.
    regional = dataclasses_replace(aws, endpoint_url="https://dynamodb.eu-west-1.amazonaws.com")
    assert open_writes_problem(regional) is not None
    local = dataclasses_replace(aws, endpoint_url="http://127.0.0.1:8001")
    assert open_writes_problem(local) is None


def test_the_image_and_lambda_refuse_aws_without_sign_in(clean_env: pytest.MonkeyPatch) -> None:
    """The hosted entry points (the image's uvicorn factory, the Lambda handler) read their
    settings through `remote_settings`, which refuses as `serve` does."""
    from graph_api.http.hosting import remote_settings

    env = {"GRAPH_API_BACKEND": "remote", "AWS_DEFAULT_REGION": "eu-west-1"}
    with pytest.raises(SettingsError, match="GRAPH_API_OPEN_WRITES=true"):
        remote_settings(env)
    assert remote_settings({**env, "GRAPH_API_OPEN_WRITES": "true"}).open_writes


def dataclasses_replace(settings: Settings, **changes: object) -> Settings:
    import dataclasses

    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]


def test_a_second_serve_on_a_port_in_use_refuses_first_and_keeps_the_first_servers_file(
    tmp_path: Path,
) -> None:
    """The first server: a socket listening on the port, and its `.data/embedded.json`."""
    with socket.socket() as first:
        first.bind(("127.0.0.1", 0))
        first.listen()
        port = first.getsockname()[1]
        data = tmp_path / ".data"
        data.mkdir()
        theirs = {
            "pid": os.getpid(),  # alive
            "endpoint": "http://127.0.0.1:1",
            "table": "graph",
            "api": f"http://127.0.0.1:{port}/graphql",
        }
        (data / "embedded.json").write_text(json.dumps(theirs))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GRAPH_API_"))}
        env.update(GRAPH_API_DEMO_STUDENTS="5", GRAPH_API_PORT=str(port))
        done = subprocess.run(
            [sys.executable, "-m", "graph_api.cli", "serve"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("graph-api: cannot listen on 127.0.0.1:")
    assert f":{port}" in done.stderr and "GRAPH_API_PORT" in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "seeding" not in done.stdout + done.stderr and "DynamoDB at" not in done.stdout
    assert json.loads((data / "embedded.json").read_text()) == theirs


def test_a_serve_that_replaced_a_running_servers_file_puts_it_back(
    clean_env: pytest.MonkeyPatch,
) -> None:
    theirs = embedded_file.Embedded(os.getppid(), "http://127.0.0.1:2", "graph", "http://a")
    path = embedded_file.write("http://127.0.0.1:1", "graph", "http://b")
    embedded_file.remove(restore=theirs)  # ours replaced theirs; theirs still runs
    assert embedded_file.read(path) == theirs
    gone = embedded_file.Embedded(2**22 + 12345, "http://127.0.0.1:3", "graph", "http://c")
    embedded_file.write("http://127.0.0.1:1", "graph", "http://b")
    embedded_file.remove(restore=gone)  # a server that is gone is not brought back
    assert not path.exists()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GRAPH_API_PORT", "70000"),
        ("GRAPH_API_PORT", "0"),
        ("GRAPH_API_DEADLINE_SECONDS", "inf"),
        ("GRAPH_API_DEADLINE_SECONDS", "nan"),
        ("GRAPH_API_WS_IDLE_SECONDS", "infinity"),
        ("GRAPH_API_JWKS_URL", "file:///etc/passwd"),
        ("GRAPH_API_JWKS_URL", "http://issuer.example.org/jwks.json"),
        ("GRAPH_API_JWKS_URL", "jwks.json"),
        ("AWS_ENDPOINT_URL_DYNAMODB", "localhost:8000"),
        ("AWS_ENDPOINT_URL", "127.0.0.1:8000"),
        ("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "http://"),
        ("GRAPH_API_WORKER_HEALTHCHECK_SECONDS", "0"),
        ("GRAPH_API_OPEN_WRITES", "maybe"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it_and_exit_2(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, value: str
) -> None:
    clean_env.setenv("GRAPH_API_JWT_ISSUER", "https://issuer.example.org")
    clean_env.setenv("GRAPH_API_JWT_AUDIENCE", "graph-api")
    clean_env.setenv(name, value)
    assert cli.main(["serve"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"graph-api: {name} ") and captured.err.count("\n") == 1
    assert captured.out == ""


def test_jwks_over_http_only_from_this_machine() -> None:
    auth = {"GRAPH_API_JWT_ISSUER": "i", "GRAPH_API_JWT_AUDIENCE": "a"}
    for url in ("https://issuer.example.org/jwks", "http://127.0.0.1:9/j", "http://localhost/j"):
        assert Settings.from_env({**auth, "GRAPH_API_JWKS_URL": url}).jwks_url == url


def test_the_embedded_demo_starts_whatever_aws_profile_the_shell_names(tmp_path: Path) -> None:
    """A profile this machine's config lacks made botocore refuse every client, moto's own
    process included: the embedded demo uses none of the shell's AWS settings."""
    (tmp_path / "config").write_text("[profile other]\nregion = eu-west-1\n")
    env = clean_environ(
        GRAPH_API_BACKEND="embedded",
        GRAPH_API_DEMO_STUDENTS="5",
        GRAPH_API_PORT=str(free_port()),
        AWS_PROFILE="no-such-profile",
        AWS_CONFIG_FILE=str(tmp_path / "config"),
        AWS_ACCESS_KEY_ID="AKIDEXAMPLE",
    )
    with serve_process(tmp_path, env) as (process, log):
        wait_for(tmp_path / ".data" / "embedded.json", process)
        assert "embedded moto, 5 demo students" in log.read_text()
    assert "Traceback" not in log.read_text()


# -- the command line itself: --version, each command's --help, bad flags, make help --------


def cli_run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graph_api.cli", *argv], capture_output=True, text=True, timeout=120
    )


def help_of(command: str) -> str:
    done = cli_run(command, "--help")
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())  # argparse wraps to the terminal's width


def test_version_is_the_packages() -> None:
    from importlib.metadata import version

    done = cli_run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"graph-api {version('graph-api')}"


def test_serve_help_says_the_workers_default_the_code_picks() -> None:
    """One worker, unless a remote table shares events through Redis: one per core."""
    text = help_of("serve")
    assert "default 1, or one per core on a remote table with GRAPH_API_EVENTS_BROKER" in text
    remote = Settings(backend="remote")
    shared = Settings(backend="remote", events_broker="redis://localhost:6379")
    assert cli.default_workers(remote, {}) == cli.default_workers(Settings(), {}) == 1
    assert cli.default_workers(shared, {}) == len(os.sched_getaffinity(0))
    assert "GRAPH_API_HOST, default 127.0.0.1" in text and Settings().host == "127.0.0.1"
    assert "GRAPH_API_PORT, default 8000" in text and Settings().port == 8000


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8000/graphql"),
        ("0.0.0.0", "http://localhost:8000/graphql"),  # the demo image's: every interface
        ("::", "http://localhost:8000/graphql"),
        ("::1", "http://[::1]:8000/graphql"),
    ],
)
def test_serves_graphiql_line_gives_an_address_a_browser_opens(host: str, url: str) -> None:
    assert cli.graphiql_url(Settings(host=host, port=8000)) == url


def test_seed_help_shows_the_defaults_it_seeds_with() -> None:
    text = help_of("seed")
    settings = Settings()
    assert f"--students STUDENTS students in the school (default {settings.demo_students})" in text
    assert f"same seed makes the same school (default {settings.demo_seed})" in text
    args = cli.parse(["seed"])
    assert (args.students, args.seed) == (settings.demo_students, settings.demo_seed)


def test_token_help_and_refusals_list_the_roles_as_typed() -> None:
    roles = "admin,guardian,student,teacher"
    assert f"--role {{{roles}}}" in help_of("token")
    done = cli_run("token", "--role", "superuser")
    assert done.returncode == 2
    assert "(choose from 'admin', 'guardian', 'student', 'teacher')" in done.stderr
    assert "Role." not in done.stderr
    assert "--ttl SECONDS lifetime (default 3600)" in help_of("token")
    assert cli.parse(["token", "--role", "admin"]).ttl == 3600


def test_create_table_help_names_both_indexes() -> None:
    assert "create the table and its indexes" in " ".join(cli_run("--help").stdout.split())
    made = admin.definition("graph")["GlobalSecondaryIndexes"]
    names = [index["IndexName"] for index in made]
    assert len(names) == 2
    assert f"its global secondary indexes {names[0]} and {names[1]};" in help_of("create-table")


def test_each_commands_help_says_what_it_does_and_what_each_option_is() -> None:
    """`graph-api COMMAND --help` says what the command does (the line the top-level list
    gives it, or more), and no option is listed bare."""
    import argparse

    root = cli.parser()
    (commands,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    for choice in commands._choices_actions:
        command = commands.choices[choice.dest]
        text = help_of(choice.dest)
        said = " ".join((command.description or "").split())
        assert said and said in text, choice.dest
        if choice.dest != "create-table":  # which says more: the indexes by name
            assert said == choice.help
        for action in command._actions:
            assert action.help, (choice.dest, action.option_strings or action.dest)


@pytest.mark.parametrize(
    "argv",
    [
        ["seed", "--studnets", "5"],
        ["serve", "--wokers", "2"],
        ["token", "--role", "admin", "--tll", "60"],
    ],
)
def test_a_mistyped_flag_prints_its_commands_usage(argv: list[str]) -> None:
    done = cli_run(*argv)
    assert done.returncode == 2
    assert done.stderr.startswith(f"usage: graph-api {argv[0]} ")
    typo = [word for word in argv[1:] if word.startswith("--")][-1]
    assert f"graph-api {argv[0]}: error: unrecognized arguments: {typo}" in done.stderr


def test_make_help_lists_every_target_the_readme_names() -> None:
    import re

    root = ROOT
    named = set(
        re.findall(r"(?:^|`)make ([a-z][a-z0-9-]*)\b(?!=)", (root / "README.md").read_text(), re.M)
    )
    assert {"run", "test", "e2e", "help"} <= named
    done = subprocess.run(
        ["make", "-s", "help"], cwd=root, capture_output=True, text=True, timeout=60
    )
    listed = set(re.findall(r"^  make (\S+)", done.stdout, re.M))
    assert named - listed == set()


def test_make_help_lists_every_phony_target_with_what_it_does() -> None:
    import re

    root = ROOT
    makefile = (root / "Makefile").read_text()
    phony = {t for line in re.findall(r"^\.PHONY:(.*)$", makefile, re.M) for t in line.split()}
    assert {"e2e", "run", "test", "clean"} <= phony
    done = subprocess.run(
        ["make", "-s", "help"], cwd=root, capture_output=True, text=True, timeout=60
    )
    listed = dict(re.findall(r"^  make (\S+) +(\S.*)$", done.stdout, re.M))
    assert phony - set(listed) == set()


def test_every_default_a_command_uses_is_shown_in_its_help() -> None:
    """Each option with a default (beside a flag's False) shows it in `--help`, as the code
    has it: the help could not drift from the value argparse hands the command."""
    import argparse

    root = cli.parser()
    (commands,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in commands.choices.items():
        text = help_of(name)
        for action in command._actions:
            if not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
                continue
            assert f"default {action.default})" in text, (name, action.option_strings)
