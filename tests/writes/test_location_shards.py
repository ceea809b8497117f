"""The location index in shards: a country's students lie in the GSI1 shards of
their states, `COUNTRY#<c>#<n>`. A country's pages merge its shards and stay exact in both
directions, cursors working across pages; a state's or a city's page is one Query; `graph-api
migrate` moves entries of the layout before shards online, pages exact meanwhile, and
`graph-api check` names what is left."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from support import USER_ERRORS, assert_clean, awaited, execute, get_item, ok, run_on, seed

from graph_api.graph.engine.context import Services
from graph_api.model import items, keys
from graph_api.ops import migrate
from graph_api.ops.check import check_table
from graph_api.store import codec
from graph_api.store.layout import Layout

COUNTRY = "Canada"
# Provinces whose shards differ (asserted below), two cities in some of them.
HOMES = [
    ("Ontario", "Toronto"),
    ("Ontario", "Ottawa"),
    ("Quebec", "Montréal"),
    ("Quebec", "Laval"),
    ("Alberta", "Calgary"),
    ("Manitoba", "Winnipeg"),
    ("Nova Scotia", "Halifax"),
    ("Yukon", "Whitehorse"),
]
PAGE = """query($c: String!, $s: String, $t: String, $first: Int, $after: String,
  $last: Int, $before: String, $order: PlaceOrder) {
  studentsByLocation(country: $c, state: $s, city: $t, first: $first, after: $after,
    last: $last, before: $before, orderBy: $order) {
    edges { cursor node { id } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"""


def place_of(n: int) -> items.Place:
    state, city = HOMES[n % len(HOMES)]
    return items.Place(COUNTRY, state, city, None)


def seeded(svc: Services, count: int = 29) -> list[str]:
    """`count` students spread over the provinces; their ids in the list's order (GSI1SK)."""
    students = [
        items.student(f"s{n:02d}", f"Student {n}", f"s{n}@ex.org", place_of(n))
        for n in range(count)
    ]
    seed(svc, students, [])
    return [s["id"] for s in sorted(students, key=lambda s: s[keys.GSI1SK])]


def page(svc: Services, **args: Any) -> tuple[list[str], dict[str, Any], Any]:
    result = execute(svc, PAGE, {"c": COUNTRY, **args})
    assert result.errors == [], result.errors
    connection = result.data["studentsByLocation"]
    ids = [edge["node"]["id"] for edge in connection["edges"]]
    return ids, connection["pageInfo"], result


def queries(result: Any) -> int:
    return sum(1 for call in result.context.ledger.calls if call.operation == "Query")


def test_the_provinces_land_on_several_shards() -> None:
    shards = {keys.location_shard(COUNTRY, state) for state, _ in HOMES}
    assert len(shards) >= 3  # else the merge below would be tried on too few partitions
    assert keys.home_location("s1", "Canada", " ONTARIO ", "Toronto").pk == keys.location_shard(
        "canada", "ontario"
    )


@pytest.mark.parametrize("size", [1, 4, 7])
def test_every_forward_page_of_a_country_is_its_slice(svc: Services, size: int) -> None:
    """first: k, after: endCursor, to the end: each page is the next k of the full sorted
    list, no duplicate, no gap; hasNextPage is true exactly while items follow."""
    want = seeded(svc)
    got: list[str] = []
    after = None
    while True:
        ids, info, result = page(svc, first=size, after=after)
        assert ids == want[len(got) : len(got) + size]
        got += ids
        assert info["hasNextPage"] == (len(got) < len(want))
        assert queries(result) == keys.LOCATION_SHARDS  # every shard, in one wave
        if not info["hasNextPage"]:
            break
        after = info["endCursor"]
    assert got == want


@pytest.mark.parametrize("size", [1, 5])
def test_every_backward_page_of_a_country_is_its_slice(svc: Services, size: int) -> None:
    """last: k, before: startCursor, back to the start: the pages, read backward, are the
    full list; hasPreviousPage is exact."""
    want = seeded(svc)
    got: list[str] = []
    before = None
    while True:
        ids, info, _ = page(svc, last=size, before=before)
        end = len(want) - len(got)
        assert ids == want[max(end - size, 0) : end]
        got = ids + got
        assert info["hasPreviousPage"] == (len(got) < len(want))
        if not info["hasPreviousPage"]:
            break
        before = info["startCursor"]
    assert got == want


def test_a_cursor_resumes_in_both_directions_and_in_descending_order(svc: Services) -> None:
    want = seeded(svc)
    ids, info, _ = page(svc, first=10)
    middle = info["endCursor"]  # after want[9]
    assert page(svc, first=6, after=middle)[0] == want[10:16]
    assert page(svc, last=6, before=middle)[0] == want[3:9]
    down = list(reversed(want))
    ids, info, _ = page(svc, first=8, order={"field": "PLACE", "direction": "DESC"})
    assert ids == down[:8]
    assert (
        page(svc, first=8, after=info["endCursor"], order={"direction": "DESC"})[0] == (down[8:16])
    )


def test_a_states_and_a_citys_pages_are_one_query_and_exact(svc: Services) -> None:
    want = seeded(svc)
    for state, city in HOMES[:3]:
        listed = [i for n, i in enumerate(sorted(want)) if place_of(n).state == state]
        ids, _, result = page(svc, s=state, first=100)
        assert sorted(ids) == listed and queries(result) == 1
        in_city = [i for n, i in enumerate(sorted(want)) if place_of(n).city == city]
        ids, _, result = page(svc, s=state, t=city, last=100)
        assert sorted(ids) == in_city and queries(result) == 1


MOVE = f"""mutation($id: ID!, $h: HomeInput) {{
  setHome(studentId: $id, home: $h) {{ student {{ id }} {USER_ERRORS} }} }}"""


def test_writes_put_the_entry_on_its_states_shard_and_a_move_changes_shard(
    svc: Services,
) -> None:
    ok(
        svc,
        f"""mutation($i: CreateStudentInput!) {{
          createStudent(input: $i) {{ student {{ id }} {USER_ERRORS} }} }}""",
        {"i": {"id": "mover", "name": "Ada", "email": "a@ex.org", "home": _home(0)}},
    )
    node = get_item(svc, *keys.node(keys.Kind.STUDENT, "mover"))
    assert node is not None and node[keys.GSI1PK] == keys.location_shard(COUNTRY, "Ontario")
    ok(svc, MOVE, {"id": "mover", "h": _home(4)})  # Alberta: another shard
    node = get_item(svc, *keys.node(keys.Kind.STUDENT, "mover"))
    assert node is not None and node[keys.GSI1PK] == keys.location_shard(COUNTRY, "Alberta")
    assert page(svc, s="Alberta")[0] == ["mover"] and page(svc, s="Ontario")[0] == []
    assert_clean(svc)


def _home(n: int) -> dict[str, str]:
    place = place_of(n)
    return {"country": place.country, "state": place.state, "city": place.city}


def unshard(svc: Services, student_id: str, pk: str | None = None) -> None:
    """Put a student's entry back on its country's partition, as the layout before shards
    left it (or on partition `pk`)."""
    awaited(
        svc.dynamo.call(
            "UpdateItem",
            {
                "TableName": svc.settings.table,
                "Key": codec.encode(keys.node(keys.Kind.STUDENT, student_id).as_item()),
                "UpdateExpression": "SET #pk = :pk",
                "ExpressionAttributeNames": {"#pk": keys.GSI1PK},
                "ExpressionAttributeValues": codec.encode({":pk": pk or keys.location(COUNTRY).pk}),
            },
            None,
            missing_table=False,
        )
    )


def test_migrate_moves_entries_into_shards_with_pages_exact_meanwhile(svc: Services) -> None:
    """A table half in the layout before shards: check names each entry left on the country's
    partition; while migrate's marker is there, every page (country, state, both directions)
    holds every student; migrate moves them, check is clean, and a state's page is one Query
    again."""
    want = seeded(svc)
    old = want[::2]
    for student_id in old:
        unshard(svc, student_id)
    findings = awaited(check_table(svc.dynamo, svc.settings.table))
    assert sorted(f.key.split(" / ")[0] for f in findings) == sorted(
        keys.node(keys.Kind.STUDENT, i).pk for i in old
    )
    assert {f.kind for f in findings} == {"location-key"}

    # Half migrated, the marker put as migrate puts it: a process that reads it reads the
    # country's old partition too.
    marker = {**keys.location_migration().as_item(), items.TYPE: items.LAYOUT_TYPE}
    awaited(migrate._put(svc.dynamo, svc.settings.table, marker))
    reading = dataclasses.replace(svc, layout=Layout())
    assert _all_pages(reading, 4) == want
    assert _all_pages(reading, 3, backward=True) == want
    ontario = [i for n, i in enumerate(sorted(want)) if place_of(n).state == "Ontario"]
    ids, _, result = page(reading, s="Ontario", first=100)
    assert sorted(ids) == ontario and queries(result) == 2  # its shard and the old partition

    report = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table, notice=0))
    assert report.complete and report.locations == len(old)
    assert get_item(svc, *keys.location_migration()) is None
    assert_clean(svc)
    again = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table, notice=0))
    assert again.nothing_done and again.locations == 0

    after = dataclasses.replace(svc, layout=Layout())
    assert _all_pages(after, 5) == want
    ids, _, result = page(after, s="Ontario", first=100)
    assert sorted(ids) == ontario and queries(result) == 1


def _all_pages(svc: Services, size: int, *, backward: bool = False) -> list[str]:
    got: list[str] = []
    cursor = None
    for _ in range(100):
        if backward:
            ids, info, _ = page(svc, last=size, before=cursor)
            got = ids + got
            cursor, more = info["startCursor"], info["hasPreviousPage"]
        else:
            ids, info, _ = page(svc, first=size, after=cursor)
            got += ids
            cursor, more = info["endCursor"], info["hasNextPage"]
        if not more:
            return got
    raise AssertionError("the pages never ended")


def test_a_process_sees_the_migration_marker_within_its_ttl(svc: Services) -> None:
    """What migrate's wait relies on: a process trusts what it read of the marker for `ttl`
    seconds, then reads it again (and sees the marker migrate put meanwhile)."""
    from graph_api.graph.engine.context import Context

    now = [0.0]
    layout = Layout(ttl=30.0, clock=lambda: now[0])
    table = Context.create(svc, "t").table
    assert run_on(svc, layout.migrating(table)) is False
    marker = {**keys.location_migration().as_item(), items.TYPE: items.LAYOUT_TYPE}
    awaited(migrate._put(svc.dynamo, svc.settings.table, marker))
    now[0] = 29.0
    assert run_on(svc, layout.migrating(table)) is False  # still trusted
    now[0] = 30.5
    assert run_on(svc, layout.migrating(table)) is True
    assert table.ledger is None or not table.ledger.calls  # no request's count


def test_a_slow_read_of_the_marker_is_trusted_from_when_it_began(svc: Services) -> None:
    """A read that took 10 s (retries) saw the table as it was when it began: trusting it
    for `ttl` from its answer would outlast migrate's notice, which counts from its put."""
    from graph_api.graph.engine.context import Context

    now = [0.0]
    layout = Layout(ttl=30.0, clock=lambda: now[0])
    table = Context.create(svc, "t").table
    call = table.call

    async def slow(*args: Any, **kwargs: Any) -> Any:
        answer = await call(*args, **kwargs)
        now[0] += 10.0  # the answer comes 10 s after the read began
        return answer

    table.call = slow  # type: ignore[method-assign]
    assert run_on(svc, layout.migrating(table)) is False  # read at 0, answered at 10
    marker = {**keys.location_migration().as_item(), items.TYPE: items.LAYOUT_TYPE}
    awaited(migrate._put(svc.dynamo, svc.settings.table, marker))
    now[0] = 30.5  # migrate's notice (35 s from a put at 0.5) has not run out yet
    assert run_on(svc, layout.migrating(table)) is True


def test_check_names_an_entry_on_another_shard_and_migrate_puts_it_back(svc: Services) -> None:
    seeded(svc, 3)
    node = get_item(svc, *keys.node(keys.Kind.STUDENT, "s00"))
    assert node is not None
    other = next(r.pk for r in keys.location_ranges(COUNTRY) if r.pk != node[keys.GSI1PK])
    unshard(svc, "s00", other)
    findings = awaited(check_table(svc.dynamo, svc.settings.table))
    assert [(f.kind, f.message) for f in findings] == [
        ("bad-key", "GSI1PK disagree with the home's place")
    ]
    assert page(svc, s=place_of(0).state)[0] == ["s01"]  # its state's page misses it
    report = awaited(migrate.migrate_table(svc.dynamo, svc.settings.table, notice=0))
    assert report.locations == 1
    assert_clean(svc)
    assert page(svc, s=place_of(0).state)[0] == ["s01", "s00"]  # Ottawa < Toronto
