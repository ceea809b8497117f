"""`graph-api`: serve the API, create and seed a table, export and check the schema."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Sequence

from graph_api import demo, logs
from graph_api.settings import Settings, SettingsError
from graph_api.store import table
from graph_api.store.client import Dynamo

log = logging.getLogger("graph_api")


def _progress(label: str) -> table.Progress:
    def report(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        print(f"\r{label}: {done}/{total} items", end=end, file=sys.stderr, flush=True)

    return report


def seed(dynamo: Dynamo, settings: Settings, students: int, seed_value: int) -> int:
    items = demo.generate(students=students, seed=seed_value)
    table.batch_write(dynamo, settings.table, items, _progress(f"seeding {settings.table}"))
    return len(items)


def start_embedded(settings: Settings) -> tuple[Settings, object]:
    """Start moto in process, create the table and load the demo school into it."""
    from graph_api.store.embedded import EmbeddedDynamoDB

    server = EmbeddedDynamoDB()
    settings = dataclasses.replace(settings, endpoint_url=server.start())
    dynamo = Dynamo(settings)
    try:
        table.create(dynamo, settings.table)
        seed(dynamo, settings, settings.demo_students, settings.demo_seed)
    finally:
        dynamo.close()
    return settings, server


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from graph_api.app import create_app
    from graph_api.graph.context import Services
    from graph_api.hosting import announce

    settings = dataclasses.replace(
        settings, host=args.host or settings.host, port=args.port or settings.port
    )
    server = None
    if settings.backend == "embedded":
        settings, server = start_embedded(settings)
    announce(settings)
    services = Services.create(settings)
    print(f"GraphiQL: http://{settings.host}:{settings.port}/graphql", flush=True)
    try:
        uvicorn.run(
            create_app(services),
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            log_config=None,  # keep the logging that logs.configure set up
        )
    finally:
        services.close()
        if server is not None:
            server.stop()  # type: ignore[attr-defined]
    return 0


def _remote(settings: Settings) -> Dynamo:
    if settings.backend == "embedded":
        raise SettingsError(
            "no DynamoDB configured: set AWS_ENDPOINT_URL_DYNAMODB (DynamoDB Local, Alternator)"
            " or AWS credentials; the embedded backend lives only inside `graph-api serve`"
        )
    return Dynamo(settings)


def cmd_create_table(settings: Settings, _: argparse.Namespace) -> int:
    dynamo = _remote(settings)
    created = table.create(dynamo, settings.table)
    print(f"table {settings.table} {'created' if created else 'already exists'}")
    return 0


def cmd_seed(settings: Settings, args: argparse.Namespace) -> int:
    dynamo = _remote(settings)
    count = seed(dynamo, settings, args.students, args.seed)
    print(f"seeded {count} items into {settings.table}")
    return 0


def cmd_check(settings: Settings, _: argparse.Namespace) -> int:
    from graph_api.check import check_table

    def progress(scanned: int) -> None:
        print(f"\rchecking {settings.table}: {scanned} items scanned", end="", file=sys.stderr)

    findings = check_table(_remote(settings), settings.table, progress)
    print(file=sys.stderr)
    for finding in findings:
        print(finding)
    print(f"{len(findings)} finding(s)" if findings else "clean: every invariant holds")
    return 1 if findings else 0


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

    from graph_api import schema_check
    from graph_api.graph.schema import schema

    try:
        report, lines = schema_check.run(schema.as_str(), Path(args.released), Path(args.intended))
    except schema_check.SchemaCheckError as error:
        print(f"graph-api: {error}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    return 0 if report.passed else 1


def cmd_export_model(_: Settings, args: argparse.Namespace) -> int:
    from graph_api import workbench

    return _write_out(workbench.dumps(workbench.model(args.table)), args.output)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="graph-api", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve GraphQL (embedded moto when no endpoint)")
    serve.add_argument("--host", help="interface to bind (GRAPH_API_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (GRAPH_API_PORT, default 8000)")
    serve.set_defaults(run=cmd_serve)
    create = commands.add_parser("create-table", help="create the table and its index")
    create.set_defaults(run=cmd_create_table)
    seed_cmd = commands.add_parser("seed", help="load deterministic demo data")
    seed_cmd.add_argument("--students", type=int, default=500)
    seed_cmd.add_argument("--seed", type=int, default=7)
    seed_cmd.set_defaults(run=cmd_seed)
    check = commands.add_parser("check", help="scan the table and report broken invariants")
    check.set_defaults(run=cmd_check)
    export = commands.add_parser("export-schema", help="print the GraphQL SDL")
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    export.set_defaults(run=cmd_export_schema)
    schema_check = commands.add_parser(
        "schema-check", help="fail on breaking changes since the released schema"
    )
    schema_check.add_argument("--released", default="schema/released.graphql")
    schema_check.add_argument("--intended", default="schema/intended-breaking-changes.txt")
    schema_check.set_defaults(run=cmd_schema_check)
    model = commands.add_parser("export-model", help="write the NoSQL Workbench data model")
    model.add_argument("-o", "--output", help="write to this file instead of stdout")
    model.add_argument("--table", default="graph", help="table name in the model")
    model.set_defaults(run=cmd_export_model)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        logs.configure(settings.log_level, settings.log_format)
        return int(args.run(settings, args))
    except SettingsError as error:
        print(f"graph-api: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
