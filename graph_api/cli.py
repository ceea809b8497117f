"""`graph-api`: serve the API, create and seed a table, export and check the schema, make a
development token."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.metadata
import importlib.util
import logging
import os
import signal
import socket
import sys
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from graph_api import logs
from graph_api.errors import Unavailable
from graph_api.graph.auth.policy import CLAIMABLE
from graph_api.ops import demo, embedded_file
from graph_api.settings import Settings, SettingsError, with_dev_cursor_secret
from graph_api.store import admin
from graph_api.store.client import Dynamo

if TYPE_CHECKING:  # imported when used: only the embedded backend needs moto
    from pathlib import Path

    from graph_api.embedded import EmbeddedDynamoDB
    from graph_api.store.admin import ScanGaveUp

log = logging.getLogger("graph_api")
T = TypeVar("T")


class CommandError(Exception):
    """A command that cannot go on: one line for the user (no traceback), exit code 2."""


class _ProgressLine:
    """A line on stderr rewritten in place (`\r`), ended before anything else is printed.

    Where stderr is not a terminal (CI logs, containers, a bench's output) a rewritten line
    would be thousands of lines, so only the last state is printed, once, at the end."""

    def __init__(self) -> None:
        self.open = False
        self.last = ""
        self.terminal = sys.stderr.isatty()

    def show(self, text: str) -> None:
        self.last = text
        if self.terminal:
            print(f"\r{text}", end="", file=sys.stderr, flush=True)
            self.open = True

    def end(self) -> None:
        if self.open:
            print(file=sys.stderr, flush=True)
            self.open = False
        elif self.last and not self.terminal:
            print(self.last, file=sys.stderr, flush=True)
        self.last = ""


@contextmanager
def _progress_line() -> Iterator[_ProgressLine]:
    line = _ProgressLine()
    try:
        yield line
    finally:
        line.end()


def run(dynamo: Dynamo, work: Coroutine[Any, Any, T]) -> T:
    """A command's DynamoDB work, to its end: under `asyncio.run`, one event loop for the
    command, on which `dynamo` opens its client at the first call and closes it at the end."""

    async def closing() -> T:
        try:
            return await work
        finally:
            await dynamo.aclose()

    return asyncio.run(closing())


async def seed(
    dynamo: Dynamo, settings: Settings, students: int, seed_value: int, progress: bool = True
) -> int:
    """Write the demo school; with `progress`, a line on stderr says how far it got."""
    items = demo.generate(students=students, seed=seed_value)
    with _progress_line() as line:

        def show(done: int, total: int) -> None:
            if progress:
                line.show(f"seeding {settings.table}: {done}/{total} items")

        await admin.batch_write(dynamo, settings.table, items, show)
    return len(items)


def start_embedded(settings: Settings) -> tuple[Settings, EmbeddedDynamoDB]:
    """Start the embedded DynamoDB (moto, a child process), create the table and load the
    demo school into it."""
    if importlib.util.find_spec("moto") is None:  # the container image and Lambda lack it
        raise CommandError(
            "the embedded backend needs moto: install graph-api[embedded] (make run does),"
            " or point the API at a DynamoDB (AWS_ENDPOINT_URL_DYNAMODB, GRAPH_API_BACKEND)"
        )
    from graph_api.embedded import EmbeddedDynamoDB

    server = EmbeddedDynamoDB()
    settings = dataclasses.replace(settings, endpoint_url=server.start())
    _say_where(settings, f" (embedded moto, {settings.demo_students} demo students)")
    dynamo = Dynamo(settings)
    json_logs = settings.log_format == "json"

    async def create_and_seed() -> int:
        await admin.create(dynamo, settings.table)
        return await seed(
            dynamo, settings, settings.demo_students, settings.demo_seed, not json_logs
        )

    count = run(dynamo, create_and_seed())
    if json_logs:
        banner(settings, f"seeded {count} items into {settings.table}")
    return settings, server


def _say_where(settings: Settings, found: str) -> None:
    """`serve`'s first line: which endpoint, which table (resolved as botocore does, before
    any credentials are looked for, which botocore would log first)."""
    from graph_api.store.client import endpoint_of

    # botocore notes where it found the endpoint (INFO): this line says it, first.
    notes = logging.getLogger("botocore.configprovider")
    level = notes.level
    notes.setLevel(logging.WARNING)
    try:
        endpoint = settings.endpoint_url or endpoint_of("dynamodb", settings.region)
    finally:
        notes.setLevel(level)
    banner(settings, f"graph-api: DynamoDB at {endpoint}{found}, table {settings.table}")


def graphiql_url(settings: Settings) -> str:
    """Where a browser on this machine opens what `serve` serves: a server bound to every
    interface (the demo image's 0.0.0.0) at localhost, as `docker run -p` publishes it
    there; an IPv6 address in brackets."""
    host = settings.host
    if host in ("0.0.0.0", "::", ""):
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port}/graphql"


def banner(settings: Settings, line: str) -> None:
    """A line of `serve`'s start-up banner: on stdout for a person reading text logs; a log
    record (a JSON line on stderr, as every other) when logs are JSON, so that what reads
    the log reads one format."""
    if settings.log_format == "json":
        log.info("%s", line)
    else:
        print(line, flush=True)


def _subscriptions_line(settings: Settings) -> str:
    """How events reach this server's subscriptions, and where the stream is read."""
    from graph_api.store.client import streams_endpoint

    streams = streams_endpoint(settings) or f"DynamoDB Streams of AWS ({settings.region})"
    if settings.events_broker == "memory":
        return (
            f"Subscriptions: on, one worker process (the in-process events broker; for more"
            f" workers or instances set GRAPH_API_EVENTS_BROKER=redis://...); stream read at"
            f" {streams}"
        )
    return f"Subscriptions: on, events shared through Redis; stream read at {streams}"


def _exit_on_sigterm(signum: int, _: object) -> None:
    raise SystemExit(128 + signum)


def default_workers(settings: Settings, environ: Mapping[str, str] | None = None) -> int:
    """`serve`'s worker processes when `--workers` is not given: WEB_CONCURRENCY (uvicorn's
    variable, the Dockerfile's too) if set; else one for the embedded backend (a demo: its
    moto serializes writes in one process, see README), one with the in-process events
    broker (workers share events only through Redis: one keeps subscriptions working), and
    one per core for a remote backend with a Redis broker."""
    env = os.environ if environ is None else environ
    raw = env.get("WEB_CONCURRENCY", "").strip()
    if raw:
        try:
            return _positive(raw)
        except (ValueError, argparse.ArgumentTypeError):
            raise SettingsError(
                f"WEB_CONCURRENCY must be a whole number of 1 or more, not {raw!r}"
            ) from None
    if settings.backend == "embedded" or settings.events_broker == "memory":
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# What the embedded demo keeps of the shell's AWS settings: the region, nothing else.
_KEPT_AWS = frozenset({"AWS_REGION", "AWS_DEFAULT_REGION"})


def forget_aws_settings() -> None:
    """The embedded demo reaches its own moto with throwaway credentials: the shell's
    profile, keys and endpoints are none of its business, and a profile missing from this
    machine's config would stop botocore from making any client (`make run` in any shell).
    Removed from this process's environment, so its workers and moto's process lack them too."""
    for name in [n for n in os.environ if n.startswith("AWS_") and n not in _KEPT_AWS]:
        del os.environ[name]


def check_port_free(host: str, port: int, setting: str = "GRAPH_API_PORT (or --port)") -> None:
    """CommandError when `host:port` cannot be listened on (another server holds it), before
    `serve` starts a DynamoDB, seeds it or writes `.data/embedded.json`. Bound as uvicorn
    binds (SO_REUSEADDR), then let go."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as error:
        raise CommandError(
            f"cannot listen on {host}:{port}: {error} (GRAPH_API_HOST, --host)"
        ) from None
    family, kind, proto, _, address = found[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            raise CommandError(
                f"cannot listen on {host}:{port}: {error.strerror or error}; another server"
                f" may use it: set {setting} to a free port"
            ) from None


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    from graph_api.events.live import NO_SHARED_BROKER
    from graph_api.http.hosting import announce, open_writes_problem, serve

    settings = dataclasses.replace(
        settings, host=args.host or settings.host, port=args.port or settings.port
    )
    if not 1 <= settings.port <= 65535:  # --port; GRAPH_API_PORT is checked with the settings
        raise CommandError(f"--port must be 1 to 65535, not {settings.port}")
    refusal = open_writes_problem(settings)
    if refusal is not None:
        raise CommandError(refusal)
    # Before a DynamoDB is started and seeded: a second `make run` fails here, in one line.
    check_port_free(settings.host, settings.port)
    if settings.metrics and settings.metrics_port:
        check_port_free(settings.metrics_host, settings.metrics_port, "GRAPH_API_METRICS_PORT")
    api = graphiql_url(settings)
    if settings.documents_manifest:  # a bad one in one line now, not from every worker later
        from graph_api.http.persisted import load_manifest

        load_manifest(settings.documents_manifest)
    # SIGTERM as an exception, so that the cleanup below runs: uvicorn shuts down on it, puts
    # this handler back and raises the signal again, which by default would end the process
    # on the spot (and leave .data/embedded.json naming a dead server).
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    server = None
    replaced = None  # the file of another embedded server in this folder, put back at exit
    # `make run`: cursors a client holds survive a restart (unless the secret is set).
    settings = with_dev_cursor_secret(settings)
    if settings.backend == "embedded":
        forget_aws_settings()
        settings, server = start_embedded(settings)
    else:
        _say_where(settings, "")
    try:
        if server is not None:
            assert settings.endpoint_url is not None
            replaced = embedded_file.running()
            found_at = embedded_file.write(settings.endpoint_url, settings.table, api)
            banner(
                settings,
                f"Embedded DynamoDB: {settings.endpoint_url}, table {settings.table}"
                f" (`graph-api check` finds it through {found_at})",
            )
        announce(settings)
        workers = args.workers or default_workers(settings)

        def started() -> None:  # the banner's last lines, as the server is handed to uvicorn
            if workers <= 1:
                banner(settings, f"GraphiQL: {api}")
                banner(settings, _subscriptions_line(settings))
            elif settings.events_broker == "memory":
                banner(settings, f"GraphiQL: {api} ({workers} worker processes)")
                banner(settings, f"Subscriptions: off ({NO_SHARED_BROKER})")
            else:
                banner(settings, f"GraphiQL: {api} ({workers} worker processes)")
                banner(settings, _subscriptions_line(settings))

        serve(settings, workers, started)
    finally:
        if server is not None:
            embedded_file.remove(restore=replaced)
            server.stop()
    return 0


def _locate(settings: Settings, environ: Mapping[str, str] | None = None) -> tuple[Settings, str]:
    """The DynamoDB a table command talks to, and how it was found: the configured one, else
    serve's embedded one. AWS_ENDPOINT_URL_DYNAMODB and GRAPH_API_TABLE, when set, win over
    what the embedded one's file says (a command never writes where it was not sent)."""
    env = os.environ if environ is None else environ
    if settings.backend != "embedded" or env.get("AWS_ENDPOINT_URL_DYNAMODB"):
        return settings, ""
    try:
        found = embedded_file.find()
    except embedded_file.NotRunning as error:
        raise CommandError(
            f"no DynamoDB configured, and {error}: start `make run` (or `graph-api serve`)"
            " in this folder, or set AWS_ENDPOINT_URL_DYNAMODB (DynamoDB Local, Alternator)"
            " or AWS credentials"
        ) from None
    table = env.get("GRAPH_API_TABLE") or found.table
    located = dataclasses.replace(settings, endpoint_url=found.endpoint, table=table)
    return located, f" (the embedded DynamoDB of `graph-api serve`, pid {found.pid})"


def explain(error: BaseException, dynamo: Dynamo, table_name: str) -> str:
    """One line for what went wrong between a table command and DynamoDB."""
    endpoint = dynamo.endpoint
    cause = error.__cause__
    if isinstance(error, Unavailable) and isinstance(cause, EndpointConnectionError):
        return f"cannot connect to DynamoDB at {endpoint}: is it running?"
    if isinstance(error, Unavailable):
        return f"{error.message} (DynamoDB at {endpoint}: {cause or 'no answer'})"
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        if code == "ResourceNotFoundException":
            return (
                f"table {table_name} does not exist at {endpoint}:"
                " create it with `graph-api create-table` (GRAPH_API_TABLE names it)"
            )
        message = error.response.get("Error", {}).get("Message", "")
        return f"DynamoDB at {endpoint} refused {error.operation_name}: {code}: {message}"
    return f"DynamoDB at {endpoint}: {error}"


def scan_gave_up(
    error: ScanGaveUp, dynamo: Dynamo, table_name: str, stopped: str, after: str = ""
) -> str:
    """One line for a table command whose Scan gave up: what failed, and how far it got when
    it got anywhere (`stopped after N items scanned`, then `after`)."""
    assert error.__cause__ is not None
    reason = explain(error.__cause__, dynamo, table_name)
    if error.scanned or error.attempts > 1:
        reason = (
            f"{stopped} after {error.scanned} items scanned: the next Scan page"
            f" failed {error.attempts} time(s): {reason}{after}"
        )
    return reason


@contextmanager
def _dynamodb(settings: Settings) -> Iterator[tuple[Settings, Dynamo]]:
    """A client for a table command, whose work `run` runs; DynamoDB's failures become
    one-line CommandErrors."""
    settings, found = _locate(settings)
    dynamo = Dynamo(settings)
    try:
        # The first line of every table command: where its reads and writes go.
        endpoint = dynamo.endpoint
        print(f"graph-api: DynamoDB at {endpoint}{found}, table {settings.table}", file=sys.stderr)
        yield settings, dynamo
    except (Unavailable, ClientError, BotoCoreError) as error:
        raise CommandError(explain(error, dynamo, settings.table)) from error


def cmd_create_table(settings: Settings, _: argparse.Namespace) -> int:
    with _dynamodb(settings) as (settings, dynamo):
        created = run(dynamo, admin.create(dynamo, settings.table))
    print(f"table {settings.table} {'created' if created else 'already exists'}")
    return 0


def cmd_seed(settings: Settings, args: argparse.Namespace) -> int:
    """The demo school into an empty table; with `--force`, into a table emptied first: demo
    items written over a graph that has changed would leave stale copies and counters."""
    with _dynamodb(settings) as (settings, dynamo):

        async def emptied_and_seeded() -> int:
            if not args.force and await admin.holds_items(dynamo, settings.table):
                raise CommandError(
                    f"table {settings.table} already holds items: seed writes into an empty"
                    " table; `graph-api seed --force` deletes every item first"
                )
            if args.force:
                with _progress_line() as line:

                    def progress(done: int) -> None:
                        line.show(f"emptying {settings.table}: {done} items deleted")

                    deleted = await admin.delete_items(dynamo, settings.table, progress)
                print(f"deleted {deleted} items from {settings.table}")
            return await seed(dynamo, settings, args.students, args.seed)

        count = run(dynamo, emptied_and_seeded())
    print(f"seeded {count} items into {settings.table}")
    return 0


def cmd_check(settings: Settings, args: argparse.Namespace) -> int:
    from graph_api.ops.check import check_table
    from graph_api.store.admin import ScanGaveUp

    with _dynamodb(settings) as (settings, dynamo), _progress_line() as line:

        def progress(scanned: int) -> None:
            line.show(f"checking {settings.table}: {scanned} items scanned")

        try:
            findings = run(
                dynamo, check_table(dynamo, settings.table, progress, page_size=args.page_size)
            )
        except ScanGaveUp as error:
            raise CommandError(
                scan_gave_up(error, dynamo, settings.table, "check gave up")
            ) from error
    for finding in findings:
        print(finding)
    print(f"{len(findings)} finding(s)" if findings else "clean: every invariant holds")
    return 1 if findings else 0


def cmd_finish(settings: Settings, args: argparse.Namespace) -> int:
    """Finish the copies that interrupted writes left to their to-dos, now (a serving
    process finishes those older than its grace by itself)."""
    from graph_api.writes.finisher import Finished, finish_all, grace, pass_table

    with _dynamodb(settings) as (settings, dynamo):

        async def finished() -> Finished:
            table = pass_table(settings, dynamo)
            return await finish_all(table, grace(settings) if args.wait_grace else 0.0)

        done = run(dynamo, finished())
    print(
        f"{done.finished} write(s) finished, {done.dropped} to-do(s) with nothing left,"
        f" {done.left} left (younger than the grace, or finishing elsewhere)"
    )
    return 0


def _bar(done: int, total: int, width: int = 30) -> str:
    filled = width * done // total if total else width
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from graph_api.ops.migrate import Report, migrate_table
    from graph_api.store.admin import ScanGaveUp

    with _dynamodb(settings) as (settings, dynamo):

        async def migrated() -> tuple[Report, bool]:
            stream_line, stream_ok = await _enable_stream(dynamo, settings.table)
            print(stream_line, flush=True)
            try:
                for index in await admin.add_indexes(dynamo, settings.table):
                    print(f"index: {index} added to {settings.table}", flush=True)
            except admin.IndexNotReady as error:
                raise CommandError(f"{error}: run `graph-api migrate` again once it is") from None
            with _progress_line() as line:

                def progress(phase: str, done: int, total: int) -> None:
                    if phase == "scan":
                        line.show(f"migrating {settings.table}: scanning, {done} items")
                    else:
                        line.show(f"migrating {settings.table}: {_bar(done, total)} nodes")

                report = await migrate_table(
                    dynamo, settings.table, progress, page_size=args.page_size
                )
            return report, stream_ok

        try:
            report, stream_ok = run(dynamo, migrated())
        except ScanGaveUp as error:
            reason = scan_gave_up(
                error,
                dynamo,
                settings.table,
                "migrate stopped",
                "; what was migrated stays, run `graph-api migrate` again to go on",
            )
            raise CommandError(reason) from error
    for problem in report.changed + report.skipped:
        print(problem)
    if report.nothing_done and report.complete:
        print(
            f"nothing to migrate: {settings.table} is already in the new layout"
            f" ({report.scanned} items scanned)"
        )
        return 0 if stream_ok else 1
    layout = report.transactions - report.counters - report.folded
    if layout:
        print(
            f"migrated {settings.table}: {report.students} student(s)"
            f" ({report.edges_moved} edge(s) moved to their class or sport,"
            f" {report.homes_moved} home(s) onto the student),"
            f" {report.teachers} teacher(s) ({report.teaching_deleted} teaching edge(s) folded"
            f" into the teacher) in {layout} transaction(s)"
            + (f"; {report.search_keys} search key(s) written" if report.search_keys else "")
            + (f"; {report.rosters} roster count(s) moved into shards" if report.rosters else "")
            + (
                f"; {report.locations} location entr(ies) moved to their state's shard"
                if report.locations
                else ""
            )
        )
    if report.folded:
        print(f"folded {report.folded} counter(s) of one item into their shards")
    if report.counters:
        print(f"set {report.counters} counter(s) of catalogs and places to the counts walked")
    if report.changed:
        print(
            f"{len(report.changed)} node(s) or counter(s) changed during the migration and are"
            " not migrated:"
            " stop the API's writers and run `graph-api migrate` again"
        )
    if report.skipped:
        print(f"{len(report.skipped)} node(s) cannot be migrated: see above")
    if report.complete:
        print("done: run `graph-api check` to verify the table")
    return 0 if report.complete and stream_ok else 1


async def _enable_stream(dynamo: Dynamo, name: str) -> tuple[str, bool]:
    """migrate's first step: the change stream subscriptions read (a line to print, and
    whether the table now has the stream they need)."""
    view = admin.STREAM["StreamViewType"]
    try:
        enabled = await admin.enable_stream(dynamo, name)
    except admin.OtherStreamView as other:
        return (
            f"change stream: {name}'s stream is on with {other.view}, not {view}: subscriptions"
            " need both images; disable the stream (UpdateTable) and run `graph-api migrate`"
            " again",
            False,
        )
    if enabled:
        return f"change stream: enabled on {name} ({view})", True
    return f"change stream: already on ({view})", True


def _write_out(text: str, output: str | None) -> int:
    """Write to the file named by `-o`, or to stdout for none or `-`."""
    if output in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(output, "w", encoding="utf-8") as out:
            out.write(text)
    return 0


def cmd_export_schema(_: Settings, args: argparse.Namespace) -> int:
    from graph_api.graph.schema import schema

    return _write_out(schema.as_str() + "\n", args.output)


def cmd_schema_check(_: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from graph_api.graph.schema import schema
    from graph_api.ops import schema_check

    if args.operations is not None:
        return _check_operations(Path(args.operations))
    try:
        report, lines = schema_check.run(schema.as_str(), Path(args.released), Path(args.intended))
    except schema_check.SchemaCheckError as error:
        print(f"graph-api: {error}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    return 0 if report.passed else 1


def _check_operations(root: Path) -> int:
    """`schema-check --operations DIR`: the client's operations against the code's schema."""
    from graphql import build_schema

    from graph_api.graph.schema import schema
    from graph_api.ops import operations_check

    try:
        report = operations_check.check(build_schema(schema.as_str()), root)
    except operations_check.OperationsError as error:
        print(f"graph-api: {error}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(line)
    return 0 if report.passed else 1


def cmd_persist(_: Settings, args: argparse.Namespace) -> int:
    """`persist DIR`: the persisted-query manifest of the operations under DIR."""
    import json
    from pathlib import Path

    from graphql import build_schema

    from graph_api.graph.schema import schema
    from graph_api.ops import operations_check, persist

    try:
        made = persist.manifest(
            build_schema(schema.as_str()), Path(args.directory), args.add_typename
        )
    except operations_check.OperationsError as error:
        print(f"graph-api: {error}", file=sys.stderr)
        return 1 if isinstance(error, persist.Broken) else 2
    _write_out(json.dumps(made, indent=2, ensure_ascii=False) + "\n", args.output)
    if args.output not in (None, "-"):
        print(f"{len(made['operations'])} operation(s) persisted in {args.output}")
    return 0


def cmd_export_model(_: Settings, args: argparse.Namespace) -> int:
    from graph_api.ops import workbench

    return _write_out(workbench.dumps(workbench.model(args.table)), args.output)


def cmd_token(settings: Settings, args: argparse.Namespace) -> int:
    from graph_api.graph.auth.policy import Role
    from graph_api.ops import token

    students = [part.strip() for part in (args.students or "").split(",") if part.strip()]
    try:
        claims = token.claims(settings, Role(args.role), args.id, students, args.ttl)
        signed = token.token(settings, claims)
    except token.TokenError as error:
        raise CommandError(str(error)) from None
    who = f"{args.role} {args.id or ','.join(students)}".strip()
    print(f"# {who}, for {args.ttl} s: send 'Authorization: Bearer <the next line>'")
    print(signed)
    return 0


def _positive(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="graph-api", description=__doc__)
    root.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = root.add_subparsers(dest="command", required=True)

    def command(name: str, *, help: str, **options: Any) -> argparse.ArgumentParser:
        """A command whose `--help` opens with the line the command list shows for it."""
        options.setdefault("description", help)
        return commands.add_parser(name, help=help, **options)

    serve = command("serve", help="serve GraphQL (embedded moto when no endpoint)")
    serve.add_argument("--host", help="interface to bind (GRAPH_API_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (GRAPH_API_PORT, default 8000)")
    serve.add_argument(
        "--workers",
        type=_positive,
        help="worker processes (WEB_CONCURRENCY; default 1, or one per core on a remote"
        " table with GRAPH_API_EVENTS_BROKER=redis://...: workers share events only through"
        " Redis)",
    )
    serve.set_defaults(run=cmd_serve)
    create = command(
        "create-table",
        help="create the table and its indexes",
        description="create the table with its change stream and its global secondary indexes"
        f" {' and '.join(admin.INDEXES)}; a table that exists is left as it is (`graph-api"
        " migrate` adds the indexes an older one lacks)",
    )
    create.set_defaults(run=cmd_create_table)
    seed_cmd = command("seed", help="load deterministic demo data")
    seed_cmd.add_argument(
        "--students",
        type=_positive,
        default=Settings.demo_students,
        help="students in the school (default %(default)s); teachers and classes scale with it",
    )
    seed_cmd.add_argument(
        "--seed",
        type=int,
        default=Settings.demo_seed,
        help="the generator's seed: the same seed makes the same school (default %(default)s)",
    )
    seed_cmd.add_argument(
        "--force",
        action="store_true",
        help="seed a table that holds items: delete every item first (the stream's lease stays)",
    )
    seed_cmd.set_defaults(run=cmd_seed)
    check = command("check", help="scan the table and report broken invariants")
    check.add_argument(
        "--page-size", type=_positive, help="items a Scan page (default: DynamoDB's 1 MB pages)"
    )
    check.set_defaults(run=cmd_check)
    finish = command(
        "finish", help="finish the copies that interrupted renames and handovers left pending"
    )
    finish.add_argument(
        "--wait-grace",
        action="store_true",
        help="only to-dos older than a request's deadline (as a serving process does)",
    )
    finish.set_defaults(run=cmd_finish)
    migrate = command(
        "migrate", help="rewrite a table of the old layout into the new one (resumable)"
    )
    migrate.add_argument(
        "--page-size", type=_positive, help="items a Scan page (default: DynamoDB's 1 MB pages)"
    )
    migrate.set_defaults(run=cmd_migrate)
    export = command("export-schema", help="print the GraphQL SDL")
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    export.set_defaults(run=cmd_export_schema)
    schema_check = command(
        "schema-check", help="fail on breaking changes since the released schema"
    )
    schema_check.add_argument(
        "--released",
        default="schema/released.graphql",
        help="the schema clients have (default %(default)s)",
    )
    schema_check.add_argument(
        "--intended",
        default="schema/intended-breaking-changes.txt",
        help="the breaking changes meant, one a line (default %(default)s)",
    )
    schema_check.add_argument(
        "--operations",
        metavar="DIR",
        help="instead, validate the client operations (.graphql files) under DIR"
        " against the code's schema",
    )
    schema_check.set_defaults(run=cmd_schema_check)
    persist = command(
        "persist", help="write the persisted-query manifest of the operations under DIR"
    )
    persist.add_argument("directory", metavar="DIR", help="the .graphql operations")
    persist.add_argument("-o", "--output", help="write to this file instead of stdout")
    persist.add_argument(
        "--add-typename",
        action="store_true",
        help="add __typename to every selection set but the operation's, as Apollo Client does",
    )
    persist.set_defaults(run=cmd_persist)
    token_cmd = command(
        "token",
        help="print a bearer token for a role (last line), signed as the server checks them",
    )
    token_cmd.add_argument(
        "--role",
        required=True,
        choices=sorted(r.value for r in CLAIMABLE),
        help="whom the token speaks for",
    )
    token_cmd.add_argument("--id", help="the teacher or student node the caller is")
    token_cmd.add_argument("--students", metavar="ID,ID", help="whom a guardian answers for")
    token_cmd.add_argument(
        "--ttl", type=_positive, default=3600, metavar="SECONDS", help="lifetime (default 3600)"
    )
    token_cmd.set_defaults(run=cmd_token)
    model = command("export-model", help="write the NoSQL Workbench data model")
    model.add_argument("-o", "--output", help="write to this file instead of stdout")
    model.add_argument(
        "--table", default="graph", help="table name in the model (default %(default)s)"
    )
    model.set_defaults(run=cmd_export_model)
    for parser in commands.choices.values():  # whose usage a bad argument prints (`parse`)
        parser.set_defaults(command_parser=parser)
    return root


def _version() -> str:
    try:
        return importlib.metadata.version("graph-api")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "unknown"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; an argument a command does not take is refused with that
    command's usage (argparse's own would print the top-level one)."""
    root = parser()
    args, unknown = root.parse_known_args(argv)
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        settings = Settings.from_env()
        level = settings.log_level
        if args.run is not cmd_serve and not os.environ.get("GRAPH_API_LOG_LEVEL"):
            # A command's own lines say what happened (a failure in one line); botocore's
            # notes and the client's warnings would bury them. GRAPH_API_LOG_LEVEL shows them.
            level = "ERROR"
        logs.configure(level, settings.log_format)
        return int(args.run(settings, args))
    except (SettingsError, CommandError) as error:
        print(f"graph-api: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
