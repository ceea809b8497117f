"""`make bench-scale`: writes that meet on one item, behind a front that contends as AWS does.

Sixteen writers (tasks on one event loop: one API worker, GraphQL executed in process as
the server executes it, without HTTP) write for `--seconds` each, every transaction's items
held `--hold` seconds (15 ms: AWS's commit time) by `tools/contention.py`:

    createStudent   each writer its own city   | all in one city
    enrollStudent   a class each               | all into one class

and the table prints each one's rate, its failures by code, the transactions the front
cancelled for `TransactionConflict`, and the hot case's rate over the spread one's. Then
`graph-api check`. On the embedded backend, started here, or `--endpoint` (DynamoDB Local).

`--base REF` (`make bench-scale BASE=<ref>`): then the same run of REF's own
`bench/scale.py`, in its checkout under `.cache/bench-base/` with its own venv (as `make
bench BASE=` builds it, `bench/servers.py`), and one table of both, head beside base.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from graph_api.embedded import EmbeddedDynamoDB
from graph_api.graph.engine.context import Context, Services
from graph_api.graph.schema import build_schema
from graph_api.model import items
from graph_api.ops.check import check_table
from graph_api.settings import Settings
from graph_api.store import admin, codec
from tools.contention import ContentionFront

WRITERS = 16
CREATE = """mutation($i: CreateStudentInput!) {
  createStudent(input: $i) { student { id } userErrors { code } } }"""
ENROL = """mutation($s: ID!, $c: ID!) {
  enrollStudent(studentId: $s, classId: $c) { class { id } userErrors { code } } }"""
Operation = Callable[[int, int], tuple[str, dict[str, Any]]]  # (writer, n) -> query, vars


@dataclasses.dataclass
class Tally:
    done: int = 0
    failed: Counter[str] = dataclasses.field(default_factory=Counter)
    seconds: float = 0.0
    conflicts: int = 0

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0


def creates(same_city: bool, run: str) -> Operation:
    def operation(writer: int, n: int) -> tuple[str, dict[str, Any]]:
        city = "Ottawa" if same_city else f"City {writer}"
        student = {
            "id": f"{run}-w{writer}-{n}",
            "name": f"S {writer} {n}",
            "email": f"{run}-{writer}-{n}@ex.org",
            "home": {"country": "Canada", "state": "Ontario", "city": city},
        }
        return CREATE, {"i": student}

    return operation


def enrolments(one_class: bool) -> Operation:
    pool = "one" if one_class else "each"  # students of their own: none enrolled already

    def operation(writer: int, n: int) -> tuple[str, dict[str, Any]]:
        return ENROL, {"s": f"{pool}-w{writer}-{n}", "c": "c-0" if one_class else f"c-{writer}"}

    return operation


def seed_for_enrolments(services: Services, per_writer: int) -> None:
    """A class for each writer and `per_writer` students each, written directly (with the
    catalogs' counters and the classes' roster shards, as the mutations would leave them)."""
    teacher = items.teacher("t-0", "Teacher")
    classes = [items.school_class(f"c-{w}", f"Class {w}", teacher) for w in range(WRITERS)]
    for klass in classes:
        items.TEACHING.attach(teacher, klass)  # the teacher's entries (no edge item)
    nodes = [teacher, *classes]
    nodes += [
        items.student(f"{pool}-w{w}-{n}", f"E {w} {n}", f"{pool}-{w}-{n}@ex.org")
        for pool in ("each", "one")
        for w in range(WRITERS)
        for n in range(per_writer)
    ]
    nodes += [items.email_guard(n) for n in nodes if n["type"] == "student"]
    table = services.settings.table
    asyncio.run(admin.batch_write(services.dynamo, table, nodes + items.roster_shards(nodes)))
    for key, count in items.counters(nodes).items():
        asyncio.run(
            services.dynamo.call(
                "UpdateItem",
                {
                    "TableName": table,
                    "Key": codec.encode(key.as_item()),
                    "UpdateExpression": "SET #t = :t ADD #n :n",
                    "ExpressionAttributeNames": {"#t": items.TYPE, "#n": items.COUNT},
                    "ExpressionAttributeValues": codec.encode(
                        {":t": items.COUNTER_TYPE, ":n": count}
                    ),
                },
                None,
                missing_table=False,
            )
        )


async def drive(
    services: Services, operation: Operation, seconds: float, limit: int | None
) -> Tally:
    schema = build_schema(services.settings)
    tally = Tally()
    started = time.monotonic()
    stop = started + seconds

    async def writer(w: int) -> None:
        n = 0
        while time.monotonic() < stop and (limit is None or n < limit):
            query, variables = operation(w, n)
            n += 1
            context = Context.create(services, f"scale-{w}-{n}")
            result = await schema.execute(query, variable_values=variables, context_value=context)
            codes = [str((e.extensions or {}).get("code", "INTERNAL")) for e in result.errors or []]
            payload = next(iter((result.data or {}).values()), None) or {}
            codes += [e["code"] for e in payload.get("userErrors", [])]
            if codes:
                tally.failed.update(codes)
            else:
                tally.done += 1

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    tally.seconds = time.monotonic() - started
    return tally


Row = list[str]  # a table row's cells: case, rate, failed, conflicts, hot / spread


def table_rows(output: str) -> tuple[list[Row], str]:
    """The rows of the case table `main` prints, and its `graph-api check` line."""
    rows = []
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 5 and not cells[0].startswith("case"):
            rows.append(cells)
    check = next((ln for ln in output.splitlines() if ln.startswith("graph-api check:")), "")
    return rows, check.removeprefix("graph-api check:").strip()


SCRIPT = "bench/scale.py"  # what a base runs: its own copy of this file


def run_base(ref: str, seconds: float, hold: float) -> str:
    """REF's own `make bench-scale` table: its `bench/scale.py` in its checkout and venv."""
    from bench import servers  # git worktrees and venvs: only with --base

    if not servers.holds(ref, SCRIPT):  # before its checkout and venv are made for nothing
        since = servers.added(SCRIPT)
        raise SystemExit(
            f"make bench-scale: BASE={ref} has no {SCRIPT}; BASE must be a commit that has it"
            + (f" (it came in {since})" if since else "")
        )
    checkout = servers.base(ref)
    print(f"base {checkout.commit}: its bench/scale.py, {seconds:.0f} s a case", flush=True)
    python = checkout.root / ".venv" / "bin" / "python"
    command = [str(python), "-m", "bench.scale", "--seconds", str(seconds), "--hold", str(hold)]
    done = subprocess.run(command, cwd=checkout.root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"make bench-scale: the base's run failed:\n{done.stderr[-2000:]}")
    return done.stdout


def side_by_side(head: str, base: str, base_label: str) -> str:
    """One table of head's and base's runs, case by case."""
    (ours, our_check), (theirs, their_check) = table_rows(head), table_rows(base)
    by_case = {row[0]: row for row in theirs}
    lines = [
        f"head beside base {base_label}",
        "| case | rate head | rate base | failed head | failed base | conflicts head"
        " | conflicts base | hot / spread head | hot / spread base |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in ours:
        other = by_case.get(row[0], ["", "-", "-", "-", "-"])
        cells = [row[0], *(x for pair in zip(row[1:], other[1:], strict=True) for x in pair)]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(f"graph-api check: head {our_check}, base {their_check}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per case (default 10)")
    parser.add_argument("--hold", type=float, default=0.015, help="seconds an item is held")
    parser.add_argument("--endpoint", help="a DynamoDB to use (default: the embedded one)")
    parser.add_argument("--base", help="a git ref to run too, and print beside head")
    args = parser.parse_args()
    if args.base:  # base first: its install may take a while, and then both tables print
        base = run_base(args.base, args.seconds, args.hold)
        print(base, flush=True)
        head = run_head(args)
        print(side_by_side(head, base, args.base))
    else:
        run_head(args)


def run_head(args: argparse.Namespace) -> str:
    """This checkout's run: prints its table as it goes, and returns what it printed."""
    out: list[str] = []

    def say(line: str) -> None:
        out.append(line)
        print(line, flush=True)

    embedded = None if args.endpoint else EmbeddedDynamoDB()
    endpoint = args.endpoint or (embedded.start() if embedded else "")
    settings = Settings(
        table=f"scale-{uuid.uuid4().hex[:8]}",
        backend="embedded",
        endpoint_url=endpoint,
        cursor_secret=b"bench-scale",
        cursor_secret_configured=True,
        deadline_seconds=10.0,  # the default: what a client of the API gets
        open_writes=True,  # no sign-in: the writers are anonymous, as `make run`'s demo
    )
    services = Services.create(settings)
    asyncio.run(admin.create(services.dynamo, settings.table))
    # Enough students that no enrolling writer runs out: 20 a second each is past what one
    # API worker reaches.
    per_writer = max(50, int(args.seconds * 20))
    seed_for_enrolments(services, per_writer)

    front = ContentionFront(hold=args.hold)
    front.attach(services.dynamo)
    run = uuid.uuid4().hex[:6]
    cases = [
        ("createStudent, each writer its own city", creates(False, run + "a")),
        ("createStudent, all in one city", creates(True, run + "b")),
        ("enrollStudent, a class each", enrolments(False)),
        ("enrollStudent, all into one class", enrolments(True)),
    ]
    say(
        f"{WRITERS} writers, one API worker, items held {args.hold * 1000:.0f} ms, "
        f"{args.seconds:.0f} s a case, on {'the embedded backend' if embedded else endpoint}"
    )
    say("| case | rate | failed | conflicts | hot / spread |")
    say("|---|---:|---:|---:|---:|")
    spread = 0.0
    try:
        for n, (name, operation) in enumerate(cases):
            before = front.counts.cancelled
            tally = asyncio.run(drive(services, operation, args.seconds, per_writer))
            tally.conflicts = front.counts.cancelled - before
            failed = sum(tally.failed.values())
            detail = (
                f" ({', '.join(f'{c} {k}' for c, k in tally.failed.most_common())})"
                if failed
                else ""
            )
            ratio = f"{tally.rate / spread:.2f}x" if n % 2 and spread else ""
            spread = tally.rate
            say(
                f"| {name} | {tally.rate:.1f} /s | {failed}{detail} | {tally.conflicts} | {ratio} |"
            )
        front.detach()
        findings = asyncio.run(check_table(services.dynamo, settings.table))
        say("graph-api check: " + ("clean" if not findings else f"{len(findings)} findings"))
        for finding in findings[:10]:
            say(f"  {finding.kind}: {finding.message}")
    finally:
        asyncio.run(
            services.dynamo.call(
                "DeleteTable", {"TableName": settings.table}, None, missing_table=False
            )
        )
        services.close()
        if embedded is not None:
            embedded.stop()
    return "\n".join(out)


if __name__ == "__main__":
    main()
