"""Counters in shards: the writes of one place meet on no single item, every
`totalCount` still equals a full read, and `graph-api migrate` folds a table's counters of
one item into their shards while writers (the old code's too) keep writing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from racing import all_ok, execute_concurrently, held_count
from support import USER_ERRORS, assert_clean, awaited, get_item, ok, scan

from graph_api.graph.engine.context import Services
from graph_api.model import items, keys
from graph_api.model.keys import Kind
from graph_api.ops import migrate
from graph_api.ops.check import check_table
from graph_api.store import admin
from graph_api.store import transactions as tx

OTTAWA = {"country": "Canada", "state": "Ontario", "city": "Ottawa"}
TORONTO = {"country": "Canada", "state": "Ontario", "city": "Toronto"}
CREATE = f"""mutation($i: CreateStudentInput!) {{
  createStudent(input: $i) {{ student {{ id }} {USER_ERRORS} }} }}"""
SET_HOME = f"""mutation($id: ID!, $h: HomeInput) {{
  setHome(studentId: $id, home: $h) {{ student {{ id }} {USER_ERRORS} }} }}"""
DELETE = f"""mutation($id: ID!) {{ deleteStudent(id: $id) {{ {USER_ERRORS} }} }}"""
LOCATION = """query($c: String!, $s: String, $t: String) {
  studentsByLocation(country: $c, state: $s, city: $t, first: 100) {
    totalCount edges { node { id } } pageInfo { hasNextPage } } }"""
PLACES = [("Canada",), ("Canada", "Ontario"), ("Canada", "Ontario", "Ottawa")]
PLACES += [("Canada", "Ontario", "Toronto")]


def create(n: int, home: dict[str, str] = OTTAWA) -> tuple[str, dict[str, Any]]:
    return CREATE, {"i": {"id": f"s{n:02d}", "name": "Ada", "email": f"s{n}@ex.org", "home": home}}


def where(student: dict[str, Any]) -> list[str]:
    return [keys.normalize_place(student["home"][k]) for k in ("country", "state", "city")]


def assert_totals_are_full_reads(svc: Services) -> None:
    """Each place's totalCount is what reading all its pages lists, and what the table holds."""
    students = [i for i in scan(svc) if i["type"] == "student" and "home" in i]
    for place in PLACES:
        names = dict(zip(("c", "s", "t"), place, strict=False))
        page = ok(svc, LOCATION, names)["studentsByLocation"]
        assert not page["pageInfo"]["hasNextPage"]
        wanted = [keys.normalize_place(name) for name in place]
        lives_there = [s for s in students if where(s)[: len(place)] == wanted]
        assert page["totalCount"] == len(page["edges"]) == len(lives_there), place


def test_concurrent_writes_in_one_city_meet_on_no_counter_item_and_count_exactly(
    svc: Services,
) -> None:
    """32 creates in one city at once, then deletes, moves out, moves within the city and more
    creates, all at once: every total equals a full read, and no counter item took more than
    a fraction of the city's writes (before shards, its one item took every one)."""
    all_ok(execute_concurrently(svc, [create(n) for n in range(32)]))
    mixed = [(DELETE, {"id": f"s{n:02d}"}) for n in range(0, 8)]
    mixed += [(SET_HOME, {"id": f"s{n:02d}", "h": TORONTO}) for n in range(8, 16)]
    mixed += [(SET_HOME, {"id": f"s{n:02d}", "h": {**OTTAWA, "city": " OTTAWA"}}) for n in (16, 17)]
    mixed += [create(n) for n in range(32, 40)]
    all_ok(execute_concurrently(svc, mixed, in_flight=len(mixed)))
    assert_totals_are_full_reads(svc)
    assert held_count(svc, keys.location_counter(*OTTAWA.values())) == 32 - 8 - 8 + 8

    city = keys.location_counter(*OTTAWA.values())
    shards = [get_item(svc, *key) for key in keys.counter_shards(city)]
    moves = [int(shard[items.MOVES]) for shard in shards if shard]
    assert sum(moves) == 32 + 8 + 8 + 8  # every create, delete and move out moved one
    assert max(moves) <= sum(moves) // 4, moves  # spread: no item takes every write
    assert get_item(svc, *city) is None  # and the counter has no item of its own
    assert_clean(svc)


def test_a_nodes_create_and_delete_move_the_same_shard(svc: Services) -> None:
    """The shard is the node's id's: created and deleted, it leaves every shard at 0."""
    all_ok(execute_concurrently(svc, [create(n) for n in range(6)]))
    all_ok(execute_concurrently(svc, [(DELETE, {"id": f"s{n:02d}"}) for n in range(6)]))
    counters = [i for i in scan(svc) if i["type"] == items.COUNTER_TYPE]
    assert counters and all(i[items.COUNT] == 0 for i in counters)
    assert ok(svc, LOCATION, {"c": "Canada"})["studentsByLocation"]["totalCount"] == 0


def test_check_reports_a_shard_that_makes_the_sum_wrong(svc: Services) -> None:
    all_ok(execute_concurrently(svc, [create(n) for n in range(3)]))
    country = keys.location_counter("Canada")
    shard = keys.counter_shard(country, "s01")
    item = get_item(svc, *shard)
    assert item is not None
    awaited(admin.batch_write(svc.dynamo, svc.settings.table, [{**item, items.COUNT: 2}]))
    findings = awaited(check_table(svc.dynamo, svc.settings.table))
    assert [(f.kind, f.key, f.message) for f in findings] == [
        (
            "counter",
            f"{country.pk} / COUNT",
            "counts 4, the list holds 3 (`graph-api migrate` sets it)",
        )
    ]
    report = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table))
    assert report.complete and report.counters == 1
    assert get_item(svc, *shard) == {**item, items.COUNT: 1}
    assert_clean(svc)


# -- migrating a table whose counters are one item each -------------------------------------


def to_single_items(svc: Services) -> list[keys.Key]:
    """Rewrite the table's counters as the code before shards kept them: one item a counter,
    holding its total, moved once for each write that moved it. Its counters, in key order."""
    shards = [i for i in scan(svc) if i["type"] == items.COUNTER_TYPE]
    totals: dict[keys.Key, dict[str, Any]] = {}
    for shard in shards:
        counter = keys.counter_of(keys.Key(shard["PK"], shard["SK"]))
        single = totals.setdefault(counter, items.counter(counter, 0) | {items.MOVES: 0})
        single[items.COUNT] += shard[items.COUNT]
        single[items.MOVES] += shard[items.MOVES]
        awaited(
            migrate.transact(
                svc.dynamo, svc.settings.table, [tx.delete(keys.Key(shard["PK"], shard["SK"]))]
            )
        )
    awaited(admin.batch_write(svc.dynamo, svc.settings.table, list(totals.values())))
    return sorted(totals)


def old_code_creates(svc: Services, n: int, home: dict[str, str] = OTTAWA) -> None:
    """A create by an instance of the code before shards: the node and its email guard, and
    its places' single counter items moved, in one transaction."""
    student = items.student(f"s{n:02d}", "Ada", f"s{n}@ex.org", items.Place(**home, street=None))
    moved = [
        tx.update(
            key, assign={items.TYPE: items.COUNTER_TYPE}, add={items.COUNT: 1, items.MOVES: 1}
        )
        for key in keys.home_counters(*home.values())
    ]
    actions = [tx.put(student, tx.NOT_EXISTS), tx.put(items.email_guard(student)), *moved]
    awaited(migrate.transact(svc.dynamo, svc.settings.table, actions))


def test_migrate_folds_single_counters_into_shards_while_old_and_new_code_write(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before migrate, totals read the single items and the shards new code writes beside
    them; migrate folds each single item into its shard 0, and a write by old code between
    its read and its fold makes it read again, so nothing is lost or counted twice."""
    all_ok(execute_concurrently(svc, [create(n) for n in range(10)]))
    ok(svc, SET_HOME, {"id": "s09", "h": TORONTO})
    singles = to_single_items(svc)
    assert {f.kind for f in awaited(check_table(svc.dynamo, svc.settings.table))} == {"old-layout"}
    assert_totals_are_full_reads(svc)  # the old layout is read as it is
    all_ok(execute_concurrently(svc, [create(n) for n in range(10, 14)]))  # new code: shards
    old_code_creates(svc, 14)
    assert_totals_are_full_reads(svc)

    original, folds = migrate.transact, []

    async def transact(dynamo: Any, table: str, actions: list[tx.Action]) -> None:
        if len(actions) == 2 and actions[1].kind == "Delete" and len(folds) < 2:
            folds.append(True)  # an instance of the old code writes before each of two folds
            await asyncio.to_thread(old_code_creates, svc, 20 + len(folds))
        await original(dynamo, table, actions)

    monkeypatch.setattr(migrate, "transact", transact)
    report = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table))
    assert report.complete and report.folded == len(singles)
    assert report.counters == 0  # folded totals were right: nothing to backfill
    assert all(get_item(svc, *counter) is None for counter in singles)
    assert_totals_are_full_reads(svc)
    assert held_count(svc, keys.location_counter(*OTTAWA.values())) == 9 + 4 + 1 + 2
    assert_clean(svc)
    again = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table))
    assert again.complete and again.transactions == 0


def test_a_catalog_counts_in_shards_too(svc: Services) -> None:
    teacher = f"""mutation($i: CreateTeacherInput!) {{
      createTeacher(input: $i) {{ {USER_ERRORS} }} }}"""
    teachers = [(teacher, {"i": {"id": f"t{n}", "name": "T"}}) for n in range(12)]
    all_ok(execute_concurrently(svc, teachers))
    catalog = keys.catalog_counter(Kind.TEACHER)
    assert get_item(svc, *catalog) is None
    assert len([k for k in keys.counter_shards(catalog) if get_item(svc, *k)]) > 1
    assert ok(svc, "{ teachers { totalCount } }") == {"teachers": {"totalCount": 12}}
