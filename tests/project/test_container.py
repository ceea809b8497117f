"""The Dockerfile's command, run as the image would run it (docker cannot build here)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ROOT, queries_answered

from graph_api.graph.engine.context import Services
from graph_api.http import hosting
from graph_api.settings import Settings, SettingsError
from tools.processes import free_port

DOCKERFILE = ROOT / "Dockerfile"
STARTUP_SECONDS = 60


def instructions(stage: str = "production") -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs of a stage (from its FROM on), continuation lines
    joined, comments dropped."""
    return stages()[stage]


def stages() -> dict[str, list[tuple[str, str]]]:
    """Each stage's instructions, by its name (`FROM image AS name`), in the file's order."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name, args in _instructions():
        if name == "FROM":
            found[args.split()[-1]] = []
        list(found.values())[-1].append((name, args))
    return found


def _instructions() -> list[tuple[str, str]]:
    joined: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in joined]


def image_env(stage: str = "production") -> dict[str, str]:
    env: dict[str, str] = {}
    for name, args in instructions(stage):
        if name == "ENV":
            for token in shlex.split(args):
                key, _, value = token.partition("=")
                env[key] = value
    return env


def exec_form(name: str, stage: str = "production") -> list[str]:
    (args,) = [a for n, a in instructions(stage) if n == name]
    if name == "HEALTHCHECK":
        args = args.split(" CMD ", 1)[1]
    command: list[str] = json.loads(args)
    return command


def copied_from_context(stage: str = "production") -> dict[str, Path]:
    """A stage's files COPY'd from the build context: the file in this checkout, by the
    path it has in the image."""
    found: dict[str, Path] = {}
    for name, args in instructions(stage):
        if name == "COPY" and not args.startswith("--"):
            *sources, target = args.split()
            if len(sources) == 1 and not target.endswith("/"):
                found[target] = ROOT / sources[0]
    return found


def checkout_env() -> dict[str, str]:
    """The image's ENV, with each path it names of a file the image copies from the build
    context given as that file here."""
    copied = copied_from_context()
    return {key: str(copied.get(value, value)) for key, value in image_env().items()}


def test_the_image_is_slim_non_root_and_runs_uvicorn_workers() -> None:
    assert list(stages())[-1] == "production"  # `docker build .` without --target
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim AS production")
    (user,) = [a for n, a in steps if n == "USER"]
    assert user not in ("root", "0")
    command = exec_form("CMD")
    assert command[:2] == ["uvicorn", "--factory"]
    assert int(image_env()["WEB_CONCURRENCY"]) >= 2
    assert image_env()["GRAPH_API_BACKEND"] == "remote"
    # uvicorn refuses a websocket message over the body limit from its header (`serve` too).
    assert int(image_env()["UVICORN_WS_MAX_SIZE"]) == Settings().max_body_bytes
    # The same head bound and the same trusted proxies (none unless named) as `serve`.
    served = hosting.uvicorn_limits(Settings(), environ={})
    assert image_env()["UVICORN_HTTP"] == served["http"] == "h11"
    assert int(image_env()["UVICORN_H11_MAX_INCOMPLETE_EVENT_SIZE"]) == hosting.MAX_HEAD_BYTES
    assert image_env()["FORWARDED_ALLOW_IPS"] == served["forwarded_allow_ips"] == ""


def test_the_factory_refuses_the_embedded_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPH_API_BACKEND", "embedded")
    with pytest.raises(SettingsError, match="GRAPH_API_BACKEND=remote"):
        hosting.create_app_from_env()


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=2) as response:
        return response.status, response.read()


CONTAINER_LOG = "container.log"  # in the test's tmp_path: the command's stdout and stderr


@pytest.fixture
def container(endpoint: str, services: Services, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The image's CMD with the image's ENV, on a loopback port, against moto's table: the
    API's base URL and the metrics port's."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GRAPH_API_"))}
    env.update(checkout_env())
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        UVICORN_HOST="127.0.0.1",
        UVICORN_PORT=str(port),
        AWS_ENDPOINT_URL_DYNAMODB=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
        GRAPH_API_TABLE=services.settings.table,
        GRAPH_API_CURSOR_SECRET="container-test-secret",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),  # the image's /tmp is its own
        GRAPH_API_METRICS_HOST="127.0.0.1",
        GRAPH_API_METRICS_PORT=str(free_port()),
    )
    log = (tmp_path / CONTAINER_LOG).open("wb")
    process = subprocess.Popen(
        exec_form("CMD"),
        env=env,
        cwd="/",  # the image's source tree is gone: the installed package must suffice
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert process.poll() is None, (tmp_path / CONTAINER_LOG).read_text()
            try:
                if get(f"{base}/healthz")[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            assert time.monotonic() < deadline, "the container's command did not come up"
            time.sleep(0.2)
        yield base, f"http://127.0.0.1:{env['GRAPH_API_METRICS_PORT']}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def test_the_containers_command_serves_graphql_and_its_healthcheck_passes(
    container: tuple[str, str], endpoint: str
) -> None:
    api, metrics = container
    query = json.dumps({"query": '{ student(id: "stu-0001") { id } }'}).encode()
    request = urllib.request.Request(
        f"{api}/graphql", data=query, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        body = json.loads(response.read())
    assert body["data"] == {"student": {"id": "stu-0001"}}
    assert response.headers.get("server") is None  # --no-server-header

    port = api.rsplit(":", 1)[1]
    check = exec_form("HEALTHCHECK")
    check[0] = sys.executable if check[0] == "python" else check[0]
    result = subprocess.run(check, env={**os.environ, "UVICORN_PORT": port}, timeout=10)
    assert result.returncode == 0

    # The image's workers share a metrics directory: whichever one answers /metrics (each
    # request on a connection of its own) counts every query, the others' too.
    for _ in range(5):
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
    assert [_queries_counted(metrics) for _ in range(6)] == [6] * 6
    # Not on the API's port, which a load balancer may make public.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{api}/metrics", timeout=5)
    assert refused.value.code == 404


def test_the_containers_log_is_json_lines_from_its_first(
    container: tuple[str, str], tmp_path: Path
) -> None:
    """The image logs JSON (a remote table's default): uvicorn's supervisor, which never
    builds the app, too ("Started parent process" was uvicorn's text among JSON lines)."""
    api, _ = container
    assert get(f"{api}/healthz")[0] == 200
    text = (tmp_path / CONTAINER_LOG).read_text()
    lines = text.splitlines()[: text.count("\n")]  # a line being written is left out
    records = [json.loads(line) for line in lines]  # each line is one JSON object
    messages = [r["message"] for r in records]
    assert any(m.startswith("Started parent process") for m in messages), text
    assert any(m.startswith("Started server process") for m in messages), text
    assert {"time", "level", "logger", "message"} <= set(records[0])


def _queries_counted(base: str) -> float:
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
        text = response.read().decode()
    return queries_answered(text)


def test_the_images_workers_are_given_time_to_start() -> None:
    """uvicorn's default worker health check (5 s) kills workers still importing on a busy
    host, again and again: the image waits as `serve --workers` does."""
    assert int(image_env()["UVICORN_TIMEOUT_WORKER_HEALTHCHECK"]) >= 30


# -- the demo target: `make run` in a container ----------------------------------------------


def test_the_demo_target_serves_the_embedded_backend_with_the_locks_embedded_extra() -> None:
    """`docker build --target demo` (docker does not run here: the Dockerfile read as it would
    be): the embedded extra's exact, hashed pins; `graph-api serve` of the embedded demo on
    every interface (a container's port is reached from outside it), not as root; and the
    production image, the default target, still without moto."""
    steps = instructions("demo")
    assert steps[0][1].startswith("python:3.11-slim ")
    runs = " ".join(a for n, a in steps if n == "RUN")
    assert "pip install --no-cache-dir --require-hashes -r requirements-demo.txt" in runs
    assert "pip install --no-cache-dir --no-deps ." in runs
    demo_pins = (ROOT / "deploy" / "requirements-demo.txt").read_text(encoding="utf-8")
    assert "--extra embedded -o deploy/requirements-demo.txt" in demo_pins.splitlines()[1]
    assert "\nmoto==" in demo_pins and "\nflask==" in demo_pins
    assert "moto" not in (ROOT / "requirements.txt").read_text(encoding="utf-8")
    env = image_env("demo")
    settings = Settings.from_env(env)
    assert settings.backend == "embedded" and settings.host == "0.0.0.0"
    assert [a for n, a in steps if n == "EXPOSE"] == [str(settings.port)]
    assert exec_form("CMD", "demo") == ["graph-api", "serve"]
    assert f"127.0.0.1:{settings.port}/healthz" in " ".join(exec_form("HEALTHCHECK", "demo"))
    (user,) = [a for n, a in steps if n == "USER"]
    assert user not in ("root", "0")
    dockerignore = (ROOT / ".dockerignore").read_text(encoding="utf-8")
    assert "!deploy/requirements-demo.txt" in dockerignore


def test_the_demo_target_has_the_graphiql_bundles_the_page_loads() -> None:
    """The demo's GraphiQL works offline, as `make run`'s: the files the page loads
    (`graphiql.ASSETS`), from the npm packages web/graphiql pins, into the package's
    static folder before it is installed."""
    from graph_api.http import graphiql

    node = instructions("graphiql")
    assert any(n == "RUN" and a.startswith("npm ci") for n, a in node)
    (copy,) = [a for n, a in instructions("demo") if n == "COPY" and a.startswith("--from=")]
    words = copy.split()
    assert words[0] == "--from=graphiql"
    assert words[-1] == "./" + str(graphiql.ASSETS_DIR.relative_to(ROOT)) + "/"
    sources = sorted(words[1:-1])
    assert sources == sorted(f"/web/node_modules/{source}" for source in graphiql.ASSETS.values())
    assert sorted(Path(s).name for s in sources) == sorted(graphiql.ASSETS)
    dockerignore = (ROOT / ".dockerignore").read_text(encoding="utf-8")
    assert "!web/graphiql/package-lock.json" in dockerignore


def test_the_readme_gives_the_demos_one_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docker build --target demo -t graph-api-demo ." in readme
    assert "docker run --rm -p 8000:8000 graph-api-demo" in readme
