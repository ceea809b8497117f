"""The counters of catalogs and places under races: a write that lost one to another (a
second delete, a delete-and-create of the same id, a write during `graph-api migrate`)
reads again instead of moving a count twice, and a drifted or damaged item is reported,
never served as a negative total or a 500."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from racing import held_count, interleave
from support import (
    USER_ERRORS,
    assert_clean,
    awaited,
    create_class,
    create_sport,
    create_student,
    create_teacher,
    get_item,
    ok,
    run,
)

from graph_api.graph.engine.context import Services
from graph_api.model import items, keys
from graph_api.model.keys import Kind
from graph_api.ops import migrate
from graph_api.ops.check import check_table
from graph_api.store import admin
from graph_api.writes import classes, deletion, students

HOME_A = {"country": "Canada", "state": "Ontario", "city": "Ottawa"}
HOME_B = {"country": "Brazil", "state": "Bahia", "city": "Salvador"}
HOME_C = {"country": "Chile", "state": "Maule", "city": "Talca"}


def delete_doc(field: str, id_: str) -> str:
    return f'mutation {{ {field}(id: "{id_}") {{ {USER_ERRORS} }} }}'


def count(services: Services, counter: keys.Key) -> int | None:
    return held_count(services, counter)


@pytest.mark.parametrize(
    ("field", "module", "kind"),
    [
        ("deleteTeacher", deletion, Kind.TEACHER),
        ("deleteSport", deletion, Kind.SPORT),
        ("deleteClass", classes, Kind.CLASS),
        ("deleteStudent", students, None),
    ],
)
def test_two_deletes_of_one_node_at_once_count_it_once(
    svc: Services, monkeypatch: pytest.MonkeyPatch, field: str, module: Any, kind: Kind | None
) -> None:
    """The second delete runs whole between the first's read and its write: the first
    finds the node gone (NOT_FOUND), and the count drops by one."""
    create_teacher(svc, "t1")
    create_teacher(svc, "t0")  # the class's teacher, so the teachers' count is not t1 alone
    create_class(svc, "c1", "t0")
    create_sport(svc, "p1")
    create_student(svc, id="s1", home=HOME_A)
    id_ = {"deleteTeacher": "t1", "deleteSport": "p1", "deleteClass": "c1"}.get(field, "s1")
    counter = keys.catalog_counter(kind) if kind else keys.location_counter("Canada")
    before = count(svc, counter)
    assert before is not None
    second = interleave(monkeypatch, module, svc, delete_doc(field, id_))
    first = run(svc, delete_doc(field, id_))
    assert first.errors == [] and second[0].errors == []
    assert second[0].user_codes == [] and first.user_codes == ["NOT_FOUND"]
    assert count(svc, counter) == before - 1
    assert_clean(svc)


RECREATE = f"""mutation($home: HomeInput) {{
  deleteStudent(id: "s1") {{ {USER_ERRORS} }}
  createStudent(input: {{id: "s1", name: "Bo", email: "bo@ex.org", home: $home}}) {{
    student {{ id }} {USER_ERRORS} }} }}"""
SET_HOME = f"""mutation($h: HomeInput) {{
  setHome(studentId: "s1", home: $h) {{ student {{ id }} {USER_ERRORS} }} }}"""


def place_counts(services: Services) -> dict[str, int | None]:
    return {
        home["country"]: count(services, keys.location_counter(home["country"]))
        for home in (HOME_A, HOME_B, HOME_C)
    }


@pytest.mark.parametrize(
    ("read_home", "made_home", "new_home"),
    [(HOME_A, HOME_B, HOME_C), (None, HOME_B, HOME_C), (HOME_A, None, None)],
    ids=["moved", "homeless-then-housed", "housed-then-homeless"],
)
def test_set_home_after_the_student_was_deleted_and_made_again_moves_the_new_ones_counts(
    svc: Services,
    monkeypatch: pytest.MonkeyPatch,
    read_home: dict[str, str] | None,
    made_home: dict[str, str] | None,
    new_home: dict[str, str] | None,
) -> None:
    """Made again, the student is at version 1 as read, elsewhere: setHome reads again."""
    create_student(svc, id="s1", home=read_home)
    intruder = interleave(monkeypatch, students, svc, RECREATE, {"home": made_home})
    ok(svc, SET_HOME, {"h": new_home})
    assert intruder[0].problems == []
    expected = {h["country"]: 0 for h in (HOME_A, HOME_B, HOME_C)}
    if new_home is not None:
        expected[new_home["country"]] = 1
    assert {c: n or 0 for c, n in place_counts(svc).items()} == expected
    assert_clean(svc)


def test_delete_student_after_it_was_deleted_and_made_again_deletes_the_new_one(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The student made again lives elsewhere, with another email: deleteStudent reads
    again, so it moves that home's counters and releases that email."""
    create_student(svc, id="s1", home=HOME_A, email="al@ex.org")
    intruder = interleave(monkeypatch, students, svc, RECREATE, {"home": HOME_B})
    assert run(svc, delete_doc("deleteStudent", "s1")).problems == []
    assert intruder[0].problems == []
    assert {c: n or 0 for c, n in place_counts(svc).items()} == {
        "Canada": 0,
        "Brazil": 0,
        "Chile": 0,
    }
    assert get_item(svc, *keys.email_guard("bo@ex.org")) is None
    assert_clean(svc)


# -- migrate's backfill while a writer runs ------------------------------------------------


def deleting_mid_scan(
    services: Services, monkeypatch: pytest.MonkeyPatch, document: str
) -> list[bool]:
    """Patch migrate's scan: the pass's scan (the one that reports progress) hands out the
    nodes, then `document` runs, then the counters as they are then (a scan may read a
    counter after a write that the nodes it read before do not show)."""
    original = migrate.scan
    done: list[bool] = []

    async def scan(dynamo: Any, table: str, progress: Any = None, **kw: Any) -> AsyncIterator[Any]:
        found = [i async for i in original(dynamo, table, progress, **kw)]
        if progress is None or done:
            for item in found:
                yield item
            return
        for item in found:
            if item.get(items.TYPE) != items.COUNTER_TYPE:
                yield item
        done.append(True)
        # The mutation runs as another process's would, while migrate's loop waits.
        assert (await asyncio.to_thread(run, services, document)).problems == []
        async for item in original(dynamo, table):
            if item.get(items.TYPE) == items.COUNTER_TYPE:
                yield item

    monkeypatch.setattr(migrate, "scan", scan)
    return done


def test_migrate_does_not_backfill_a_counter_moved_during_its_scan(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    for id_ in ("t1", "t2"):
        create_teacher(svc, id_)
    counter = keys.catalog_counter(Kind.TEACHER)
    shard = keys.counter_shard(counter, "t1")  # t1's shard, which its delete moves
    drifted = {**(get_item(svc, *shard) or {}), items.COUNT: 4}
    awaited(admin.batch_write(svc.dynamo, svc.settings.table, [drifted]))
    done = deleting_mid_scan(svc, monkeypatch, delete_doc("deleteTeacher", "t1"))

    def progress(*_: Any) -> None:
        pass

    report = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table, progress, passes=1))
    assert done
    assert not report.complete and report.counters == 0
    assert report.changed == [f"counter {counter.pk} changed during the scan: run migrate again"]
    assert count(svc, counter) == 4  # 5, less the delete: not the 2 the scan walked
    assert get_item(svc, *shard) == {**drifted, items.COUNT: 3, items.MOVES: 2}
    again = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table, progress))
    assert again.complete and again.counters == 1
    assert count(svc, counter) == 1
    assert_clean(svc)


# -- drifted and damaged items -------------------------------------------------------------


def test_a_counter_drifted_below_zero_says_zero_and_is_logged(
    svc: Services, caplog: pytest.LogCaptureFixture
) -> None:
    counter = keys.catalog_counter(Kind.SPORT)
    shards = keys.counter_shards(counter)
    drifted = [items.counter(shards[3], -3), items.counter(shards[9], 1)]
    awaited(admin.batch_write(svc.dynamo, svc.settings.table, drifted))
    with caplog.at_level(logging.WARNING, logger="graph_api.graph.query"):
        data = ok(svc, "{ sports(first: 1) { totalCount } }")
    assert data == {"sports": {"totalCount": 0}}
    assert any(counter.pk in r.getMessage() for r in caplog.records)
    findings = awaited(check_table(svc.dynamo, svc.settings.table))
    assert [(f.kind, f.message) for f in findings] == [
        ("counter", "counts -2, the list holds 0 (`graph-api migrate` sets it)")
    ]


@pytest.mark.parametrize("document", [SET_HOME, delete_doc("deleteStudent", "s1")])
def test_a_damaged_home_is_a_conflict_that_names_check(svc: Services, document: str) -> None:
    create_student(svc, id="s1", home=HOME_A)
    node = get_item(svc, *keys.node(Kind.STUDENT, "s1"))
    assert node is not None
    del node[items.HOME]["city"]
    awaited(admin.batch_write(svc.dynamo, svc.settings.table, [node]))
    result = run(svc, document, {"h": HOME_B} if "setHome" in document else None)
    assert result.errors == []
    assert result.user_codes == ["CONFLICT"]
    assert "run graph-api check" in result.user_errors[0]["message"]
    assert get_item(svc, *keys.node(Kind.STUDENT, "s1")) == node  # nothing written


def test_delete_class_after_it_was_made_again_under_another_teacher_deletes_the_new_one(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made again at version 1 under t2: deleteClass reads again and takes it from t2."""
    for id_ in ("t1", "t2"):
        create_teacher(svc, id_)
    create_class(svc, "c1", "t1")
    create_class(svc, "c9", "t1")
    again = f"""mutation {{ deleteClass(id: "c1") {{ {USER_ERRORS} }}
      createClass(input: {{id: "c1", teacherId: "t2", subject: "Art"}}) {{ {USER_ERRORS} }} }}"""
    intruder = interleave(monkeypatch, classes, svc, again)
    assert run(svc, delete_doc("deleteClass", "c1")).problems == []
    assert intruder[0].problems == []
    assert count(svc, keys.catalog_counter(Kind.CLASS)) == 1
    assert_clean(svc)
