"""The README's snippets, run as a newcomer would, as written, on `make run`'s demo school.

`make run` itself, in a folder of its own: every ```graphql block of README.md, in order,
sent as admin must answer without errors (nor user errors, for its mutations) and with data;
every ```sh block's commands run (curl and `graph-api` against that server), answering with
no errors but those the README names; every ```js block runs under Node. A README that
drifts from the API fails here. Each GraphQL example is a named operation that selects `id`
wherever it can, as clients' own tools want (tests/project/test_client_conventions.py runs GraphQL
Code Generator over them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from graphql import (
    FieldNode,
    GraphQLInterfaceType,
    GraphQLObjectType,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    TypeInfo,
    TypeInfoVisitor,
    Visitor,
    build_schema,
    get_named_type,
    parse,
    visit,
)
from support import (
    OPERATIONS,
    README,
    README_BLOCKS,
    RELAY,
    ROOT,
    assert_clean,
    awaited,
    fresh_services,
    npm_package,
    run,
    tool,
)
from websockets.sync.client import connect

from graph_api.graph.engine.context import Services
from graph_api.ops import demo
from graph_api.settings import Settings
from graph_api.store import admin
from tools.processes import free_port

SCHEMA_FILE = README.parent / "schema" / "schema.graphql"
CLIENTS = ROOT / "tests" / "project" / "clients"  # the pinned npm packages the README's JS imports
JSON_BLOCKS = re.findall(r"```json\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@dataclass(frozen=True)
class MakeRun:
    """`make run`, started as the README says, in a folder of its own: where its commands
    (`.venv/bin/graph-api ...`) run, with the environment they run in."""

    url: str  # http://127.0.0.1:PORT
    folder: Path
    env: dict[str, str]
    admin: str  # the token `graph-api token --role admin` printed there

    def post(self, query: str, token: str | None = None) -> dict[str, Any]:
        headers = {"content-type": "application/json"}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        body = json.dumps({"query": query}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", body, headers)
        with urllib.request.urlopen(request, timeout=RECIPE_WAIT) as response:
            answer: dict[str, Any] = json.load(response)
        return answer

    def subscriptions(self) -> float:
        """Subscriptions the server holds (its /metrics: the embedded backend serves them)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=RECIPE_WAIT) as response:
            text = response.read().decode()
        found = re.search(r"^graph_api_subscriptions_open (\S+)$", text, re.M)
        assert found is not None, text[:2000]
        return float(found[1])

    def until_unsubscribed(self) -> None:
        """Wait until the server holds no subscription (it drops a closed one's soon)."""
        deadline = time.monotonic() + RECIPE_WAIT
        while self.subscriptions() > 0:
            assert time.monotonic() < deadline, f"{self.subscriptions()} still held"
            time.sleep(0.2)

    def until_subscribed(
        self, before: float, client: subprocess.Popen[str], output: list[str]
    ) -> None:
        """Wait until the server holds more subscriptions than `before`, `client` having made
        one: from then on, a write is an event for it (graphql-transport-ws and SSE have no
        acknowledgement of a subscription)."""
        deadline = time.monotonic() + RECIPE_WAIT
        while self.subscriptions() <= before:
            assert client.poll() is None, "".join(output)[-4000:]
            assert time.monotonic() < deadline, "".join(output)[-4000:]
            time.sleep(0.2)


@pytest.fixture(scope="module")
def make_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeRun]:
    """`make run` word for word, on a free port (GRAPH_API_PORT, as the README says), in a
    shell with no AWS_* or GRAPH_API_* set: the 500-student demo, as a newcomer has it. Ready
    once /readyz answers (the stream reader runs, so a subscription hears what follows)."""
    folder = tmp_path_factory.mktemp("make-run")
    for name in CHECKOUT:
        (folder / name).symlink_to(README.parent / name)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GRAPH_API_"))}
    env["GRAPH_API_PORT"] = str(port)
    process = _start(["make", "run"], folder, env)
    try:
        _wait_for_line(process, "GraphiQL:")
        _until_healthy(f"http://127.0.0.1:{port}/readyz")
        minted = subprocess.run(
            [".venv/bin/graph-api", "token", "--role", "admin"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        yield MakeRun(f"http://127.0.0.1:{port}", folder, env, minted.stdout.splitlines()[-1])
    finally:
        _stop(process)


def test_the_readme_has_examples() -> None:
    assert len(README_BLOCKS) >= 4
    assert any(block.lstrip().startswith("mutation") for block in README_BLOCKS)


def test_every_readme_example_is_named_and_selects_id_wherever_a_type_has_one() -> None:
    """Named, because GraphQL Code Generator refuses anonymous operations; `id` on every
    object that has one, because Apollo's InMemoryCache normalizes an object only by its
    `__typename` and `id` (without it, the same student read twice is two cache entries)."""
    schema = build_schema(SCHEMA_FILE.read_text(encoding="utf-8"))
    names = []
    for block in README_BLOCKS:
        document = parse(block)
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        assert operations and all(op.name for op in operations), block
        names += [op.name.value for op in operations if op.name]
        assert _without_id(schema, document) == [], block
    assert len(set(names)) == len(names), names  # one document set: names are unique


def _without_id(schema: Any, document: Any) -> list[str]:
    """The fields whose objects have an `id` the selection leaves out (as Type.field)."""
    type_info = TypeInfo(schema)
    found: list[str] = []

    class Check(Visitor):
        def enter_field(self, node: FieldNode, *_: Any) -> None:
            named = get_named_type(type_info.get_type())
            has_id = isinstance(named, GraphQLObjectType | GraphQLInterfaceType) and (
                "id" in named.fields
            )
            if has_id and node.selection_set and not _selects_id(node.selection_set):
                found.append(f"{type_info.get_parent_type()}.{node.name.value}")

    visit(document, TypeInfoVisitor(type_info, Check()))
    return found


def _selects_id(selection_set: SelectionSetNode) -> bool:
    """`id` selected unaliased, directly or in an inline fragment (`... on Class { id }`)."""
    return any(
        (isinstance(s, FieldNode) and s.name.value == "id" and s.alias is None)
        or (isinstance(s, InlineFragmentNode) and _selects_id(s.selection_set))
        for s in selection_set.selections
    )


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {}


def test_every_readme_example_answers_with_data(make_run: MakeRun) -> None:
    """Each ```graphql block sent as the README says to send it: to `make run`, as admin
    (the token `graph-api token --role admin` prints)."""
    assert "`.venv/bin/graph-api token --role admin` prints" in README.read_text(encoding="utf-8")
    for n, block in enumerate(README_BLOCKS, 1):
        body = make_run.post(block, make_run.admin)
        assert body.get("errors") is None, (n, block, body.get("errors"))
        assert body["data"] and not any(_empty(v) for v in body["data"].values()), (n, body)
        refused = [
            error
            for payload in body["data"].values()
            if isinstance(payload, dict)
            for error in payload.get("userErrors", [])
        ]
        assert refused == [], (n, block, refused)


def _token(make_run: MakeRun, *argv: str) -> str:
    """The token `.venv/bin/graph-api token ARGV` prints (last line) beside `make run`."""
    minted = subprocess.run(
        [".venv/bin/graph-api", "token", *argv],
        cwd=make_run.folder,
        env=make_run.env,
        capture_output=True,
        text=True,
        check=True,
    )
    return minted.stdout.splitlines()[-1]


def _emails(body: dict[str, Any]) -> dict[str, str | None]:
    return {s["id"]: s["email"] for s in body["data"]["students"]}


def _codes(body: dict[str, Any]) -> set[str]:
    return {e["extensions"]["code"] for e in body.get("errors", [])}


EMAILS = '{ students(ids: ["stu-0001", "stu-0002"]) { id email } }'


def test_make_run_enforces_the_policy_with_its_dev_tokens(make_run: MakeRun) -> None:
    """`make run` as a newcomer starts it, nothing set: a student's dev token reads that
    student's email and not another's; without a token a caller reads none and is told how to
    get a token (not that the server has no sign-in, which it has: its dev tokens), and may
    not write; admin reads both."""
    student = _token(make_run, "--role", "student", "--id", "stu-0001")
    mine = make_run.post(EMAILS, student)
    assert _emails(mine)["stu-0001"] and _emails(mine)["stu-0002"] is None, mine
    assert _codes(mine) == {"FORBIDDEN"}, mine

    anonymous = make_run.post(EMAILS)
    assert _emails(anonymous) == {"stu-0001": None, "stu-0002": None}, anonymous
    assert _codes(anonymous) == {"UNAUTHENTICATED"}, anonymous
    assert "no sign-in configured" not in json.dumps(anonymous)
    assert "graph-api token --role admin" in anonymous["errors"][0]["message"]
    write = make_run.post(
        'mutation { joinSport(studentId: "stu-0001", sportId: "spt-01") { userErrors { code } } }'
    )
    assert write.get("data") is None and _codes(write) == {"UNAUTHENTICATED"}, write

    everyone = _emails(make_run.post(EMAILS, make_run.admin))
    assert all(everyone.values()), everyone


def test_make_runs_graphiql_offers_the_five_roles_with_working_tokens(make_run: MakeRun) -> None:
    """The GraphiQL page `make run` serves has the **Act as** picker of the README: admin, a
    teacher, a student, a guardian and anonymous, each token (minted by the server) acting
    as that role: the student's reads its own email only, anonymous sends no header."""
    request = urllib.request.Request(f"{make_run.url}/graphql", headers={"accept": "text/html"})
    with urllib.request.urlopen(request, timeout=RECIPE_WAIT) as response:
        html = response.read().decode()
    found = re.search(r"const roles = (\[.*?\]);\n", html)
    assert found is not None, html[:2000]
    roles = {entry["role"]: entry for entry in json.loads(found[1])}
    assert set(roles) == {"admin", "teacher", "student", "guardian", "anonymous"}, roles
    assert roles["anonymous"]["headers"] == ""
    readme = " ".join(README.read_text(encoding="utf-8").split())
    for entry in roles.values():
        assert f"`{entry['label']}`" in readme, entry["label"]  # the README names each button
    answers = {}
    for role in ("admin", "teacher", "student", "guardian"):
        header = json.loads(roles[role]["headers"])["Authorization"]
        answers[role] = _emails(make_run.post(EMAILS, header.removeprefix("Bearer ")))
    assert all(answers["admin"].values()) and all(answers["guardian"].values()), answers
    assert all(answers["teacher"].values()), answers  # tch-001 teaches both (README)
    assert answers["student"]["stu-0001"] and answers["student"]["stu-0002"] is None, answers


@pytest.fixture
def small_school(endpoint: str) -> Iterator[Services]:
    """A demo school of its own, small (the README's ids exist from 55 students on)."""
    with fresh_services(endpoint, deadline_seconds=60.0) as services:
        school = demo.generate(students=60, seed=Settings().demo_seed)
        awaited(admin.batch_write(services.dynamo, services.settings.table, school))
        yield services


def test_the_mutation_example_sent_again_answers_what_the_readme_shows(
    small_school: Services,
) -> None:
    """The README shows the answer to its three-mutation example sent a second time: each
    mutation refused on its own, beside the others, in `data` and without `errors`."""
    (example,) = [b for b in README_BLOCKS if b.lstrip().startswith("mutation")]
    assert example.count("userErrors") == 3
    first = run(small_school, example)
    assert first.problems == []
    assert {
        e["node"]["teacher"]["name"]
        for e in first.data["updateTeacher"]["teacher"]["classes"]["edges"]
    } == {"Grace Hopper"}

    again = run(small_school, example)
    (shown,) = [json.loads(b) for b in JSON_BLOCKS if '"userErrors"' in b]
    assert again.errors == []
    assert {"data": again.data} == shown
    assert_clean(small_school)


RECIPE = re.search(
    r"### Against DynamoDB Local, Alternator or AWS\n\n```sh\n(.*?)```",
    README.read_text(encoding="utf-8"),
    re.S,
)
# What `make dynamodb-local` needs of a checkout; the recipe runs in a folder of its own so
# that its `.data/dynamodb` is not the developer's.
CHECKOUT = ("Makefile", ".venv", "tools", "pyproject.toml", "uv.lock", "web")
RECIPE_WAIT = 180  # seconds: a busy 2-core machine starts Java and a server slowly
RENAME_TEACHER = """mutation($name: String!) {
  updateTeacher(id: "tch-001", input: {name: $name}) { userErrors { code } } }"""


def test_the_dynamodb_local_recipe_serves_subscriptions(backend: str, tmp_path: Path) -> None:
    """ "Against DynamoDB Local": the README's commands word for word, in a shell of their
    own (no AWS_* or GRAPH_API_* set), on free ports rather than 8001 and 8000 (through
    DYNAMODB_LOCAL_PORT and GRAPH_API_PORT, the variables the Makefile and `serve` read).
    On what `serve` then serves, a websocket subscription hears the event of a mutation
    sent on another connection."""
    if backend != "dynamodb-local":
        pytest.skip("starts DynamoDB Local as the README does: --backend=dynamodb-local")
    assert RECIPE is not None
    lines = [line for line in RECIPE.group(1).splitlines() if line.strip()]
    assert lines[0].startswith("make dynamodb-local &")
    assert lines[-1] == ".venv/bin/graph-api serve"

    root = README.parent
    for name in CHECKOUT:
        (tmp_path / name).symlink_to(root / name)
    db_port, api_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GRAPH_API_"))}
    env.update(DYNAMODB_LOCAL_PORT=str(db_port), GRAPH_API_PORT=str(api_port))
    started: list[subprocess.Popen[str]] = []
    try:
        for line in lines:
            words = shlex.split(line.replace(":8001", f":{db_port}"), comments=True)
            if words[-1] == "&":  # in the background, as the shell would; on once it says so
                started.append(_start(words[:-1], tmp_path, env))
                _wait_for_line(started[-1], "DynamoDB Local on")
            elif words[0] == "export":
                env.update(word.split("=", 1) for word in words[1:])
            elif words[1:] == ["serve"]:
                started.append(_start(words, tmp_path, env))
                output = _wait_for_line(started[-1], "GraphiQL:")
                assert (
                    _message(output[0])
                    == f"graph-api: DynamoDB at http://127.0.0.1:{db_port}, table graph"
                )
                _until_healthy(f"http://127.0.0.1:{api_port}/healthz")
            else:
                done = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True)
                assert done.returncode == 0, (line, done.stdout, done.stderr)
        _a_subscription_hears_a_mutation(f"127.0.0.1:{api_port}")
    finally:
        for process in reversed(started):  # serve, then make and its DynamoDB Local
            _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    """Stop a process `_start` started, with its children."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _start(words: list[str], folder: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        words,
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: stopped with its children
    )


def _wait_for_line(process: subprocess.Popen[str], start: str) -> list[str]:
    """Read the process's output until a line starts with `start`, and return the lines so
    far (the rest is drained on a thread, so that it never blocks on a full pipe)."""
    seen = _drain(process)
    deadline = time.monotonic() + RECIPE_WAIT
    while not any(_message(line).startswith(start) for line in list(seen)):
        assert process.poll() is None and time.monotonic() < deadline, "".join(seen)[-4000:]
        time.sleep(0.2)
    return seen


def _message(line: str) -> str:
    """A line's text: a JSON log record's message (a remote table's default logs)."""
    try:
        record = json.loads(line)
    except ValueError:
        return line.rstrip("\n")
    return str(record["message"]) if isinstance(record, dict) else line.rstrip("\n")


def _drain(process: subprocess.Popen[str]) -> list[str]:
    """The process's output lines, read on a thread into the list returned as they come."""
    seen: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)

    threading.Thread(target=read, daemon=True).start()
    return seen


def _until_healthy(url: str) -> None:
    deadline = time.monotonic() + RECIPE_WAIT
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            assert time.monotonic() < deadline, f"{url} did not answer"
            time.sleep(0.2)


def _a_subscription_hears_a_mutation(host: str) -> None:
    with connect(
        f"ws://{host}/graphql",
        subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
        open_timeout=RECIPE_WAIT,
    ) as ws:
        ws.send(json.dumps({"type": "connection_init"}))
        assert json.loads(ws.recv(timeout=RECIPE_WAIT))["type"] == "connection_ack"
        query = 'subscription { teacherChanged(id: "tch-001") { kind teacher { name } } }'
        ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
        # No acknowledgement of a subscription, and the stream reader reads what is written
        # once it holds the lease: rename until an event comes (each rename is one).
        names: list[str] = []
        deadline = time.monotonic() + RECIPE_WAIT
        while time.monotonic() < deadline:
            names.append(f"Recipe {len(names)}")
            _post(host, RENAME_TEACHER, {"name": names[-1]})
            try:
                message = json.loads(ws.recv(timeout=1))
            except TimeoutError:
                continue
            assert message["type"] == "next", message
            assert message["payload"]["data"]["teacherChanged"]["kind"] == "UPDATED", message
            assert message["payload"]["data"]["teacherChanged"]["teacher"]["name"] in names
            return
        raise AssertionError(f"no event in {RECIPE_WAIT} s for {len(names)} renames")


def _post(host: str, query: str, variables: dict[str, Any]) -> None:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        f"http://{host}/graphql", body, {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=RECIPE_WAIT) as response:
        answer = json.load(response)
    assert answer["data"]["updateTeacher"]["userErrors"] == [], answer


# -- the shell and JavaScript snippets, as the README writes them, on `make run` -----------

SNIPPETS = re.findall(r"```(\w*)\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
PORT = re.compile(r"(?:localhost|127\.0\.0\.1):8000\b")
# What a test cannot run, and why: each skipped command must match one of these.
CANNOT_RUN = {
    r"^make (run|test)\b": "`make run` is the server these run against; `make test` runs this",
    r"^make dynamodb-local|^export AWS_|:8001\b|graph-api (create-table|seed|serve)\b": (
        "DynamoDB Local or AWS: test_the_dynamodb_local_recipe_serves_subscriptions runs"
        " that recipe with --backend=dynamodb-local"
    ),
}
# A comment line after a command that shows its output (else it is prose about it).
OUTPUT = re.compile(r"^(\{|event:|data:)")
CODE = re.compile(r"\b[A-Z][A-Z_]{5,}\b")


@dataclass
class Command:
    text: str
    notes: list[str]  # the comment lines that follow it

    @property
    def shown(self) -> list[str]:
        """The output it is shown to print: each line, up to a `...`, starts a line of it."""
        return [n.split("...")[0] for n in self.notes if OUTPUT.match(n)]

    @property
    def allowed(self) -> set[str]:
        """The error codes the README says it answers with."""
        return {c for n in self.notes for c in CODE.findall(n)}


def commands(block: str) -> list[Command]:
    """A ```sh block's commands (continuation lines joined), each with its comment lines."""
    found: list[Command] = []
    for line in block.replace("\\\n", " ").splitlines():
        if line.startswith("#") and found:
            found[-1].notes.append(line.lstrip("# "))
        elif line.strip():
            found.append(Command(line.strip(), []))
    return found


def test_every_readme_shell_snippet_runs_as_written(make_run: MakeRun) -> None:
    """Each ```sh block's commands, in order, in one environment (a `NAME=$(...)` line sets
    NAME for the next ones), in `make run`'s folder and against it: each exits 0; an answer
    in JSON has no errors but those the comments after it name; a command sent to the
    background (a stream) prints, while the rest of its block runs, what its comments show.
    What cannot run in a test is skipped by CANNOT_RUN, which says why."""
    blocks = [block for kind, block in SNIPPETS if kind == "sh"]
    ran, skipped = [], []
    for block in blocks:
        env = dict(make_run.env)
        streams: list[tuple[Command, subprocess.Popen[str], list[str]]] = []
        try:
            for command in commands(block):
                text = PORT.sub(make_run.url.removeprefix("http://"), command.text)
                why = [r for pattern, r in CANNOT_RUN.items() if re.search(pattern, text)]
                if why:
                    skipped.append(command.text)
                    continue
                ran.append(command.text)
                if text.endswith("&"):
                    make_run.until_unsubscribed()
                    before = make_run.subscriptions()
                    stream = _start(["bash", "-c", text[:-1]], make_run.folder, env)
                    streams.append((command, stream, _drain(stream)))
                    make_run.until_subscribed(before, stream, streams[-1][2])
                    continue
                assigned = re.match(r"^(\w+)=", text)
                script = f'{text}\nprintf %s "${assigned[1]}"' if assigned else text
                done = subprocess.run(
                    ["bash", "-c", script],
                    cwd=make_run.folder,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=RECIPE_WAIT,
                )
                assert done.returncode == 0, (command.text, done.stdout, done.stderr)
                if assigned:
                    env[assigned[1]] = done.stdout.splitlines()[-1]
                    continue
                _check_output(command, done.stdout.splitlines())
            for command, stream, lines in streams:
                _until_shown(command, stream, lines)
        finally:
            for _, stream, _ in streams:
                _stop(stream)
    assert any("text/event-stream" in c for c in ran) and any("token" in c for c in ran), ran
    assert skipped, "the recipe's commands are skipped for the reasons CANNOT_RUN gives"


def _check_output(command: Command, lines: list[str]) -> None:
    for shown in command.shown:
        assert any(line.startswith(shown) for line in lines), (command.text, shown, lines)
    if not lines or not lines[0].startswith("{"):
        return
    answer = json.loads("\n".join(lines))
    codes = {e.get("extensions", {}).get("code") for e in answer.get("errors", [])}
    refused = {
        e["code"]
        for payload in (answer.get("data") or {}).values()
        if isinstance(payload, dict)
        for e in payload.get("userErrors", [])
    }
    assert codes | refused <= command.allowed, (command.text, answer)
    assert answer.get("data"), (command.text, answer)


def _until_shown(command: Command, stream: subprocess.Popen[str], lines: list[str]) -> None:
    """Wait until a background command printed what its comments show."""
    deadline = time.monotonic() + RECIPE_WAIT
    while not all(any(line.startswith(s) for line in lines) for s in command.shown):
        assert stream.poll() is None, (command.text, lines)
        assert time.monotonic() < deadline, (command.text, command.shown, lines)
        time.sleep(0.2)


def test_the_readme_javascript_runs_under_node(make_run: MakeRun, tmp_path: Path) -> None:
    """Each ```js block as a Node module (the npm packages of tests/project/clients, pinned: they
    include the README's graphql-ws and ws), on `make run`: its subscription hears a student
    join the class it names, made by an admin once the server holds the subscription."""
    node = tool("node", "apt-get install nodejs npm")
    npm_package(CLIENTS)
    (tmp_path / "node_modules").symlink_to(CLIENTS / "node_modules")
    blocks = [block for kind, block in SNIPPETS if kind == "js"]
    assert blocks
    for n, block in enumerate(blocks):
        (class_id,) = re.findall(r'rosterChanged\(classId: "([\w-]+)"\)', block)
        script = tmp_path / f"snippet-{n}.mjs"
        script.write_text(PORT.sub(make_run.url.removeprefix("http://"), block), "utf-8")
        make_run.until_unsubscribed()  # another test's stream, closed, may still be held
        before = make_run.subscriptions()
        process = _start([node, str(script)], tmp_path, make_run.env)
        try:
            lines = _drain(process)
            make_run.until_subscribed(before, process, lines)
            student = f"stu-js-{n}"
            joined = make_run.post(
                f'mutation {{ createStudent(input: {{id: "{student}", name: "Js {n}",'
                f' email: "js{n}@example.org"}}) {{ userErrors {{ code }} }}'
                f' enrollStudent(studentId: "{student}", classId: "{class_id}")'
                " { userErrors { code } } }",
                make_run.admin,
            )
            assert joined.get("errors") is None, joined
            deadline = time.monotonic() + RECIPE_WAIT
            while not any(student in line for line in lines):
                assert process.poll() is None, "".join(lines)
                assert time.monotonic() < deadline, "".join(lines)
                time.sleep(0.2)
            (event,) = [json.loads(line) for line in lines if student in line]
            assert event["rosterChanged"]["kind"] == "JOINED", event
            assert event["rosterChanged"]["class"]["id"] == class_id, event
        finally:
            _stop(process)


# -- a front end's CI, as the README writes it ------------------------------------------------

# A CI step that cannot run here, and why: each skipped step must match one of these.
CI_CANNOT_RUN = {
    r"^pip install .*git\+https://github\.com/OWNER/": (
        "installs the API from your fork on GitHub (OWNER); this checkout's .venv is that install"
    ),
}


def _block(kind: str) -> str:
    (block,) = [block for found, block in SNIPPETS if found == kind]
    return block


def _front_end(folder: Path, operations: Path) -> dict[str, str]:
    """`folder` as a front end's checkout: `src/` holding `operations`' files; the environment
    its commands run in (the API's commands on PATH, as the CI step's pip install puts them)."""
    shutil.copytree(operations, folder / "src")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GRAPH_API_"))}
    env["PATH"] = f"{README.parent / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def test_the_readme_ci_steps_check_a_front_ends_operations(tmp_path: Path) -> None:
    """The ```yaml block's `run:` steps, as GitHub Actions runs each (bash), in a front end's
    checkout whose `src/` holds tests/ops/operations: they pass; with an operation the schema
    does not serve added, the check step fails the job naming it."""
    steps = [step["run"] for step in yaml.safe_load(_block("yaml")) if "run" in step]
    env = _front_end(tmp_path, OPERATIONS)
    skipped = [s for s in steps if any(re.search(p, s) for p in CI_CANNOT_RUN)]
    checks = [s for s in steps if s not in skipped]
    assert skipped and checks, steps

    def run_steps() -> list[subprocess.CompletedProcess[str]]:
        return [
            subprocess.run(
                ["bash", "-e", "-c", step],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=RECIPE_WAIT,
            )
            for step in checks
        ]

    for done in run_steps():
        assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    (tmp_path / "src" / "Broken.graphql").write_text(
        'query BrokenByTheApi { student(id: "stu-0001") { id nickname } }\n', "utf-8"
    )
    failed = [done for done in run_steps() if done.returncode != 0]
    assert failed and "BrokenByTheApi" in failed[0].stdout + failed[0].stderr, failed


def test_the_readme_relay_check_validates_a_relay_front_end(tmp_path: Path) -> None:
    """The ```make block as a Relay front end's Makefile, `make relay-check` run as written
    (its schema.graphql target fetches the API's schema from your fork on GitHub: here it is
    this checkout's, `make -o schema.graphql` keeps it), in a checkout whose `src/` holds
    tests/project/relay's documents with their compiled artifacts: it passes; with a document the
    schema does not serve, it fails."""
    tool("node", "apt-get install nodejs npm")
    npm = tool("npx", "apt-get install nodejs npm")
    npm_package(RELAY)
    (tmp_path / "Makefile").write_text(_block("make"), "utf-8")
    env = _front_end(tmp_path, RELAY / "runtime")
    (tmp_path / "node_modules").symlink_to(RELAY / "node_modules")
    shutil.copy(SCHEMA_FILE, tmp_path / "schema.graphql")
    found = re.search(r'"schemaConfig":\s*(\{[^}]*\})', README.read_text(encoding="utf-8"))
    assert found is not None
    config = {"src": "./src", "schema": "./schema.graphql", "language": "javascript"}
    (tmp_path / "relay.config.json").write_text(
        json.dumps({**config, "schemaConfig": json.loads(found[1])}), "utf-8"
    )

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RECIPE_WAIT
        )

    compiled = run(npm, "relay-compiler")  # the front end's committed artifacts
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    checked = run("make", "-o", "schema.graphql", "relay-check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    documents = tmp_path / "src" / "documents.js"
    text = documents.read_text("utf-8")
    documents.write_text(text.replace("          nodeId\n", "          nickname\n", 1), "utf-8")
    broken = run("make", "-o", "schema.graphql", "relay-check")
    assert broken.returncode != 0 and "nickname" in broken.stdout + broken.stderr, broken


# Each kind of fenced block the README holds, and the test that runs its blocks as written.
RUN_BY = {
    "graphql": test_every_readme_example_answers_with_data,
    "json": test_the_mutation_example_sent_again_answers_what_the_readme_shows,
    "sh": test_every_readme_shell_snippet_runs_as_written,
    "js": test_the_readme_javascript_runs_under_node,
    "yaml": test_the_readme_ci_steps_check_a_front_ends_operations,
    "make": test_the_readme_relay_check_validates_a_relay_front_end,
}


def test_every_readme_code_block_is_run_by_a_test() -> None:
    """No snippet a reader would run goes untested: every fenced block names its language, one
    of RUN_BY's, whose test runs it (a block of output, unfenced, belongs with its command)."""
    kinds = [kind for kind, _ in SNIPPETS]
    assert set(kinds) <= set(RUN_BY) and "" not in kinds, kinds
    assert all('"userErrors"' in block for block in JSON_BLOCKS)  # the answer that test checks
    assert len(re.findall(r"^```\w*$", README.read_text(encoding="utf-8"), re.M)) == 2 * len(
        SNIPPETS
    )
