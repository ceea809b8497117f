"""`graph-api migrate` rewrites a table of the old layout into exactly the new one: whole,
idempotent, and finished by a later run after a crash at any point."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from old_layout import Pupil, School, new_items, old_items, random_school
from support import awaited, make_settings

from graph_api import cli
from graph_api.events.lease import Lease
from graph_api.model import items, keys
from graph_api.model.items import Place
from graph_api.model.keys import Kind
from graph_api.ops import migrate
from graph_api.ops.check import check_table
from graph_api.ops.migrate import Report, migrate_table
from graph_api.settings import Settings
from graph_api.store import admin, codec
from graph_api.store.client import Dynamo
from graph_api.store.codec import Item


@dataclass
class Table:
    dynamo: Dynamo
    settings: Settings

    @property
    def name(self) -> str:
        return self.settings.table

    def seed(self, items: list[Item]) -> None:
        awaited(admin.batch_write(self.dynamo, self.name, items))

    def items(self) -> list[Item]:
        found: list[Item] = []
        params: dict[str, Any] = {"TableName": self.name, "ConsistentRead": True}
        while True:
            page = awaited(self.dynamo.call("Scan", params, None, missing_table=False))
            found += [codec.decode(wire) for wire in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return _sorted(found)
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def migrate(self, **options: Any) -> Report:
        return awaited(migrate_table(self.dynamo, self.name, **options))


def _sorted(items: list[Item]) -> list[Item]:
    return sorted(items, key=lambda i: (i["PK"], i["SK"]))


@pytest.fixture
def fresh(endpoint: str) -> Iterator[Table]:
    settings = make_settings(endpoint)
    dynamo = Dynamo(settings)
    awaited(admin.create(dynamo, settings.table))
    yield Table(dynamo, settings)
    awaited(dynamo.call("DeleteTable", {"TableName": settings.table}, None, missing_table=False))


def small_school() -> School:
    """The old demo's school of 12, and the cases it may miss: a student with no home and no
    edges, a home without a street, a teacher with no class."""
    school = random_school(12, 5)
    school.students.append(Pupil("stu-lone", "Lone Wolf", "lone@school.example"))
    school.students.append(
        Pupil("stu-nost", "No Street", "nost@school.example", Place("Canada", "Québec", "Montréal"))
    )
    school.teachers["tch-idle"] = "Idle Teacher"
    return school


def big_school() -> School:
    """One student in 60 classes and 10 sports, one teacher of 120 classes: several
    transactions for one node."""
    school = School(teachers={"tch-busy": "Busy Bee", "tch-2": "Second"})
    for i in range(120):
        school.classes[f"cls-{i:03d}"] = (f"Subject {i}", "tch-busy")
    school.classes["cls-other"] = ("Other", "tch-2")
    for i in range(10):
        school.sports[f"spt-{i:02d}"] = (f"Sport {i}", None)
    school.students = [
        Pupil(
            "stu-many",
            "Many Things",
            "many@school.example",
            Place("Germany", "Berlin", "Berlin", "1 Unter den Linden"),
            classes=[f"cls-{i:03d}" for i in range(60)],
            sports=list(school.sports),
        ),
        Pupil("stu-few", "Few Things", "few@school.example", classes=["cls-other", "cls-001"]),
    ]
    return school


def assert_migrated(fresh: Table, school: School) -> None:
    assert fresh.items() == _sorted(new_items(school))
    assert awaited(check_table(fresh.dynamo, fresh.name)) == []


@pytest.mark.parametrize("school", [small_school, big_school])
def test_migrate_leaves_exactly_the_new_layout(fresh: Table, school: Any) -> None:
    built: School = school()
    fresh.seed(old_items(built))
    report = fresh.migrate()
    assert report.complete
    assert report.students == len(built.students)
    assert report.teachers == len(built.teachers)
    pupils = built.students
    assert report.edges_moved == sum(len(p.classes) + len(p.sports) for p in pupils)
    assert report.homes_moved == sum(p.home is not None for p in pupils)
    assert report.teaching_deleted == len(built.classes)
    assert_migrated(fresh, built)


def test_old_table_is_reported_by_check_until_migrated(fresh: Table) -> None:
    fresh.seed(old_items(small_school()))
    kinds = {f.kind for f in awaited(check_table(fresh.dynamo, fresh.name))}
    assert "old-layout" in kinds


def test_a_second_run_changes_nothing(fresh: Table) -> None:
    fresh.seed(old_items(small_school()))
    fresh.migrate()
    before = fresh.items()
    again = fresh.migrate()
    assert again.nothing_done and again.complete
    assert (again.students, again.teachers, again.scans) == (0, 0, 1)
    assert fresh.items() == before


def test_a_table_in_the_new_layout_is_left_alone(fresh: Table) -> None:
    fresh.seed(new_items(small_school()))
    report = fresh.migrate()
    assert report.nothing_done and report.complete
    assert_migrated(fresh, small_school())


def test_the_stream_readers_lease_is_left_alone(fresh: Table) -> None:
    async def hold() -> None:
        lease = Lease(fresh.dynamo, fresh.name, 10.0)
        assert await lease.take()
        await lease.checkpoint("shard-1", "000000000000000000042")

    fresh.seed(old_items(small_school()))
    asyncio.run(hold())
    (lease,) = [i for i in fresh.items() if i["type"] == "lease"]
    assert fresh.migrate().complete
    assert [i for i in fresh.items() if i["type"] == "lease"] == [lease]
    assert awaited(check_table(fresh.dynamo, fresh.name)) == []


class Crash(BaseException):
    """The process dies: nothing of migrate's catches it."""


class CrashAfter:
    """A botocore hook that kills migrate at its transaction number `n` (from 1): before
    the request is sent, or after DynamoDB committed it but before migrate hears so."""

    def __init__(self, n: int, when: str) -> None:
        self.n, self.when, self.seen = n, when, 0

    def __call__(self, **_: Any) -> None:
        self.seen += 1
        if self.seen == self.n:
            raise Crash()

    def install(self, dynamo: Dynamo) -> None:
        event = "before-send" if self.when == "before" else "after-call"
        dynamo.register(f"{event}.dynamodb.TransactWriteItems", self)


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize(
    ("school", "n"), [(small_school, 1), (small_school, 9), (big_school, 3), (big_school, 6)]
)
def test_a_crash_halfway_is_finished_by_the_next_run(
    fresh: Table, endpoint: str, backend: str, school: Any, n: int, when: str
) -> None:
    if backend != "moto" and school is big_school:
        # Minutes each on DynamoDB Local, where the small school's crashes and the big
        # school's whole run still go; resuming is the same code on every backend.
        pytest.skip("the big school's crashes run on the embedded backend")
    built: School = school()
    fresh.seed(old_items(built))
    dying = Dynamo(fresh.settings)
    CrashAfter(n, when).install(dying)
    with pytest.raises(Crash):
        awaited(migrate_table(dying, fresh.name))
    halfway = fresh.items()
    assert halfway != _sorted(new_items(built))  # the crash did leave work undone
    findings = awaited(check_table(fresh.dynamo, fresh.name))
    assert "old-layout" in {f.kind for f in findings}
    report = fresh.migrate()  # the resend
    assert report.complete and report.transactions > 0
    assert_migrated(fresh, built)


def bump_version(table: Table, student_id: str) -> None:
    """Another writer's change to a student: its version one up, as any write of it does."""
    key = {"PK": f"STUDENT#{student_id}", "SK": f"STUDENT#{student_id}"}
    awaited(
        table.dynamo.call(
            "UpdateItem",
            {
                "TableName": table.name,
                "Key": codec.encode(key),
                "UpdateExpression": "SET version = version + :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            },
            None,
            missing_table=False,
        )
    )


def test_a_student_changed_during_the_run_is_planned_again(
    fresh: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    school = small_school()
    fresh.seed(old_items(school))
    plan = migrate.plan
    changed: list[str] = []

    def plan_then_write(found: Any) -> Any:
        jobs, skipped = plan(found)
        if not changed:  # a writer renames the first student after the first scan
            job = next(j for j in jobs if j.kind == "STUDENT")
            changed.append(job.id)
            bump_version(fresh, job.id)
        return jobs, skipped

    monkeypatch.setattr(migrate, "plan", plan_then_write)
    once = fresh.migrate(passes=1)
    assert once.changed == [
        f"student {changed[0]} changed while it was migrated (a writer is running?)"
    ]
    assert not once.complete
    report = fresh.migrate()
    assert report.complete and report.students == 1  # only the one left
    items = {(i["PK"], i["SK"]): i for i in fresh.items()}
    student = items[(f"STUDENT#{changed[0]}", f"STUDENT#{changed[0]}")]
    assert student["version"] == 2 and "classes" in student


def test_a_changed_student_is_retried_within_one_run(
    fresh: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh.seed(old_items(small_school()))
    plan = migrate.plan
    bumped: list[str] = []

    def plan_then_write(found: Any) -> Any:
        jobs, skipped = plan(found)
        if not bumped:
            job = next(j for j in jobs if j.kind == "STUDENT")
            bumped.append(job.id)
            bump_version(fresh, job.id)
        return jobs, skipped

    monkeypatch.setattr(migrate, "plan", plan_then_write)
    report = fresh.migrate()
    assert report.complete and report.scans == 2
    assert awaited(check_table(fresh.dynamo, fresh.name)) == []


# -- the command ----------------------------------------------------------------------------


@pytest.fixture
def env(fresh: Table, endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Table:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("GRAPH_API_TABLE", fresh.name)
    return fresh


def test_the_command_migrates_then_says_there_is_nothing_to_do(
    env: Table, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    school = small_school()
    env.seed(old_items(school))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # an operator's terminal
    assert cli.main(["migrate", "--page-size", "50"]) == 0
    captured = capsys.readouterr()
    students, teachers = len(school.students), len(school.teachers)
    edges = sum(len(p.classes) + len(p.sports) for p in school.students)
    homes = sum(p.home is not None for p in school.students)
    # One transaction a node, each fits in one; a student's and a teacher's search key ride
    # in it, a class's takes one of its own, and a class's or sport's roster count's move
    # into shards another.
    nodes = students + teachers + len(school.classes)
    rosters = len(school.classes) + len(school.sports)  # each class's and sport's count
    shards = [
        i
        for i in new_items(school)
        if i["type"] == "counter" and keys.roster_counted(keys.Key(i["PK"], i["SK"])) is None
    ]
    counters = {keys.counter_of(keys.Key(i["PK"], i["SK"])) for i in shards}  # one transaction each
    assert captured.out.splitlines() == [
        "change stream: already on (NEW_AND_OLD_IMAGES)",
        f"migrated {env.name}: {students} student(s) ({edges} edge(s) moved to their class or"
        f" sport, {homes} home(s) onto the student), {teachers} teacher(s) ({len(school.classes)}"
        f" teaching edge(s) folded into the teacher) in {nodes + rosters}"
        f" transaction(s); {nodes} search key(s) written;"
        f" {rosters} roster count(s) moved into shards",
        f"set {len(counters)} counter(s) of catalogs and places to the counts walked",
        "done: run `graph-api check` to verify the table",
    ]
    progress = captured.err.split("\r")
    assert f"migrating {env.name}: scanning, 50 items" in progress
    bar = "#" * 30
    jobs = nodes + len(school.sports)  # a sport's job: its roster count only
    assert progress[-1].rstrip("\n") == f"migrating {env.name}: [{bar}] {jobs}/{jobs} nodes"
    assert cli.main(["check"]) == 0
    capsys.readouterr()
    assert cli.main(["migrate"]) == 0
    assert capsys.readouterr().out == (
        "change stream: already on (NEW_AND_OLD_IMAGES)\n"
        f"nothing to migrate: {env.name} is already in the new layout"
        f" ({len(new_items(school))} items scanned)\n"
    )


def test_the_command_names_what_it_cannot_migrate_and_exits_1(
    env: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    school = small_school()
    orphan = next(i for i in old_items(school) if i["type"] == "membership")
    env.seed([{**orphan, "PK": "STUDENT#gone", "GSI1SK": "STUDENT#gone", "studentId": "gone"}])
    assert cli.main(["migrate"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "change stream: already on (NEW_AND_OLD_IMAGES)",
        "student gone does not exist: its 1 old-layout item(s) are left in place"
        " (graph-api check reports them)",
        "1 node(s) cannot be migrated: see above",
    ]


def _stream(fresh: Table) -> dict[str, Any]:
    described = awaited(
        fresh.dynamo.call("DescribeTable", {"TableName": fresh.name}, None, missing_table=False)
    )
    spec: dict[str, Any] = described["Table"].get("StreamSpecification") or {}
    return spec


def _recreate(fresh: Table, stream: dict[str, Any] | None) -> None:
    """The test's table again, made as a table of before the change stream (no stream), or
    with another stream."""
    awaited(fresh.dynamo.call("DeleteTable", {"TableName": fresh.name}, None, missing_table=False))
    definition = admin.definition(fresh.name)
    del definition["StreamSpecification"]
    if stream is not None:
        definition["StreamSpecification"] = stream
    awaited(fresh.dynamo.call("CreateTable", definition, None, missing_table=False))
    awaited(admin.wait_active(fresh.dynamo, fresh.name))


def test_migrate_turns_on_the_stream_of_a_table_made_without_one(
    env: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    _recreate(env, None)
    env.seed(new_items(small_school()))
    assert not _stream(env).get("StreamEnabled")
    assert cli.main(["migrate"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"change stream: enabled on {env.name} (NEW_AND_OLD_IMAGES)"
    assert out[1].startswith(f"nothing to migrate: {env.name} is already in the new layout")
    assert _stream(env) == admin.STREAM
    assert cli.main(["migrate"]) == 0  # idempotent: the stream is left as it is
    assert capsys.readouterr().out.splitlines()[0] == (
        "change stream: already on (NEW_AND_OLD_IMAGES)"
    )
    assert _stream(env) == admin.STREAM


def test_migrate_leaves_a_stream_of_other_images_alone_and_exits_1(
    env: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    other = {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    _recreate(env, other)
    assert cli.main(["migrate"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"change stream: {env.name}'s stream is on with KEYS_ONLY, not NEW_AND_OLD_IMAGES:"
        " subscriptions need both images; disable the stream (UpdateTable) and run"
        " `graph-api migrate` again"
    )
    assert _stream(env) == other


def test_migrate_adds_the_search_index_and_writes_the_keys_check_asks_for(
    env: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table from before search: no GSI2, nodes without their search keys (one stale)."""
    awaited(env.dynamo.call("DeleteTable", {"TableName": env.name}, None, missing_table=False))
    definition = admin.definition(env.name)
    definition["GlobalSecondaryIndexes"] = [admin.index_definition(keys.GSI1)]
    definition["AttributeDefinitions"] = admin.attribute_definitions([keys.GSI1])
    awaited(env.dynamo.call("CreateTable", definition, None, missing_table=False))
    awaited(admin.wait_active(env.dynamo, env.name))
    school = small_school()
    before = [{k: v for k, v in i.items() if k not in items.SEARCH_KEYS} for i in new_items(school)]
    stale = next(i for i in before if i["type"] == "student")
    stale.update(keys.name_key(Kind.STUDENT, stale["id"], "Somebody Else").as_item())
    env.seed(before)
    findings = awaited(check_table(env.dynamo, env.name))
    searched = [i for i in before if i["type"] in ("student", "teacher", "class")]
    assert [f.kind for f in findings] == ["search-key"] * len(searched)
    assert sum("run `graph-api migrate`" in f.message for f in findings) == len(searched) - 1

    assert cli.main(["migrate"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"index: GSI2 added to {env.name}"
    assert out[2].endswith(
        f"in {len(searched)} transaction(s); {len(searched)} search key(s) written"
    )
    assert awaited(check_table(env.dynamo, env.name)) == []
    found = awaited(
        env.dynamo.call(
            "Query",
            {
                "TableName": env.name,
                "IndexName": keys.GSI2,
                "KeyConditionExpression": "GSI2PK = :pk AND begins_with(GSI2SK, :prefix)",
                "ExpressionAttributeValues": codec.encode(
                    {
                        ":pk": (rng := keys.name_prefix(Kind.STUDENT, stale["name"])).pk,
                        ":prefix": rng.prefix,
                    }
                ),
            },
            None,
            missing_table=False,
        )
    )
    assert stale["id"] in [codec.decode(i)["id"] for i in found["Items"]]
    assert cli.main(["migrate"]) == 0  # the index is there, the keys are right: nothing to do
    assert capsys.readouterr().out.splitlines()[1].startswith("nothing to migrate")
