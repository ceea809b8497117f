"""`graph-api migrate`: rewrite a table of the old layout (the edge layout, before nodes
carried their relations) into the new one.

The new layout (`graph_api/model/items.py`, `schema/table.md`) keeps a node's bounded relations on
the node: a student item carries its `classes`, `sports` and `home` maps (and, with a home,
its place in GSI1), a teacher item its `classes`; enrolment and membership edges live in
their class's or sport's partition; home items and teaching edges are gone.

How it runs (an offline tool, like `graph-api check`): one paged, retrying Scan
(`store.admin.scan`) reads the table; each node still in the old layout becomes a *job* of
transactions, sent one after the other:

- a student: one transaction sets the node's maps and home (with its GSI1 keys), deletes
  its home item and moves its old edges to their target's partition (put the new edge,
  delete the old one). A student with more than 49 edges takes several: its edges move
  first, 49 pairs a transaction beside a check of the student node, then, last, the node
  update, whose maps are built from its old edges *and* any already-moved new edges, so a
  run that crashed between the two finishes the job;
- a teacher: one transaction sets its `classes` map (from the class nodes naming it, the
  new layout's statement of who teaches what) and deletes its first 99 teaching edges;
  further ones, if any, go 99 a transaction.

Search keys (which the layout before search lacked): a student, teacher or class whose GSI2
key (`keys.name_key`) is missing or disagrees with its name (a class: subject) gets it, in the
node update its layout job makes, else in a transaction of its own conditioned on the name
scanned.
`graph-api migrate` first adds the indexes `store.admin.definition` has and the table lacks
(`admin.add_indexes`: UpdateTable, then a wait until the index is active).

First of all, a counter kept in one item (the layout before counter shards) is folded into
its shards, online: its count added to shard 0 and the item deleted in one transaction
conditioned on its `moves` as read, read again and retried while writers (the old code) move
it (`fold_counters`).

A class whose `studentCount` is on its item (the layout before roster shards) gets its
`keys.ROSTER_SHARDS` roster shards, stamped with its copied fields, each counting the
enrolments walked for it and shard 0 the rest, and loses the count from its item, in one
transaction conditioned on the class's version, count and copied fields as scanned
(`plan_roster`): online, as an old instance's enrolment moves the count and refuses it. A
class in shards with a shard missing or stamped unlike it gets that shard.

Last, the counters of catalogs and places (`totalCount`, which the layout before search did
not keep) are backfilled. Every counter shard is read (a consistent Scan) *before* the
pass's scan; each counter whose shard sum then differs from the count the scan walks gets
the shards that differ put, each conditioned on its `moves` being what that read saw.
Every write that changes a shard's nodes moves the shard (`writes/counts.py` adds 1 to
`moves` in the same transaction), so a put that succeeds had no write change them between
the read and the put: the count walked is the shard's count then. A counter that did move
is not written and is reported ("changed during the scan: run migrate again"); equal ones
are left alone.

Every transaction is conditioned on what the plan was made from: the node still at the
`version` and counter scanned (a catalog's or place's counter: the `moves` read before),
each old item still there, each new edge not yet there. So a crash at any point leaves a
table that a later run finishes (a node is done when it carries its maps and no old item of
it is left), nothing is lost and nothing doubled; a second run changes nothing. A node
changed by a writer during the run fails its step: it is planned again from a new Scan (up
to `PASSES` scans), else reported. Writers must be stopped for a migration all the same:
neither the old API nor the new one writes the other layout, and copies of a class or sport
renamed mid-run are not fenced (`graph-api check` reports them as stale).
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from graph_api.model import items, keys
from graph_api.model.items import ENROLMENT, MEMBERSHIP, TEACHING, Place, Relation
from graph_api.model.keys import PK, SK, Key, Kind
from graph_api.store import admin, codec, layout
from graph_api.store import transactions as tx
from graph_api.store.admin import scan
from graph_api.store.client import Dynamo
from graph_api.store.codec import Item
from graph_api.store.retry import Retries, cancellation_reasons, error_code

# -- The legacy layout: what migrate (and check, to point at migrate) must recognize --------
#
# Before nodes carried their relations (the edge layout), the table held, beside today's
# nodes and email guards:
#   home        PK = STUDENT#<id>  SK = HOME           GSI1 = COUNTRY#… / STATE#…#STUDENT#<id>
#               country, state, city, street, studentId, studentName
#   enrolment   PK = STUDENT#<id>  SK = CLASS#<id>     GSI1 = CLASS#<id> / STUDENT#<id>
#               studentId, classId, studentName, subject, teacherId, teacherName
#   membership  PK = STUDENT#<id>  SK = SPORT#<id>     GSI1 = SPORT#<id> / STUDENT#<id>
#               studentId, sportId, studentName, sportName
#   teaching    PK = TEACHER#<id>  SK = CLASS#<id>     GSI1 = CLASS#<id> / TEACHER#<id>
#               teacherId, classId, subject, teacherName
# and student and teacher nodes without maps. Old items are deleted by the key they were
# scanned with: no old key is ever built.

LEGACY_HOME = "home"
LEGACY_TEACHING = "teaching"
# Old edges carried their target's fields: new map entry attribute -> old edge attribute.
# Used only for an edge whose target node is missing (its copies are all that is left).
LEGACY_ENTRY_COPIES = {
    ENROLMENT.name: {"subject": "subject", "teacherId": "teacherId", "teacherName": "teacherName"},
    MEMBERSHIP.name: {"name": "sportName"},
}
STUDENT_RELATIONS = (ENROLMENT, MEMBERSHIP)
_EDGES = {relation.name: relation for relation in items.EDGE_TYPES}


def legacy_kind(item: Item) -> str | None:
    """The old-layout item this is (`home`, `teaching`, `enrolment`, `membership`), or None.

    An enrolment or membership is old when it sits in its owner's (the student's) partition.
    """
    type_ = item.get(items.TYPE)
    if type_ in (LEGACY_HOME, LEGACY_TEACHING):
        return str(type_)
    relation = _EDGES.get(str(type_))
    if relation is not None and keys.kind_of(str(item.get(PK, ""))) == relation.owner:
        return relation.name
    return None


# -- Planning: from the scanned table, the transactions each node still needs --------------

PAIRS_PER_TRANSACTION = (tx.MAX_ACTIONS - 1) // 2  # beside the node's check
DELETES_PER_TRANSACTION = tx.MAX_ACTIONS - 1
PASSES = 3  # scans at most: a node changed during a pass is planned again from a new scan


@dataclass
class _School:
    """What the scan found that migration needs."""

    nodes: dict[tuple[str, str], Item] = field(default_factory=dict)
    old_edges: dict[str, list[Item]] = field(default_factory=lambda: defaultdict(list))
    new_edges: dict[str, list[Item]] = field(default_factory=lambda: defaultdict(list))
    homes: dict[str, list[Item]] = field(default_factory=lambda: defaultdict(list))
    teaching: dict[str, list[Item]] = field(default_factory=lambda: defaultdict(list))
    classes_of: dict[str, list[Item]] = field(default_factory=lambda: defaultdict(list))
    walked: Counter[Key] = field(default_factory=Counter)  # what each counter shard must hold
    rosters: dict[tuple[Kind, str], dict[Key, Item]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    roster_walked: Counter[Key] = field(default_factory=Counter)  # a roster shard's edges
    scanned: int = 0

    def add(self, item: Item) -> None:
        self.scanned += 1
        type_ = item.get(items.TYPE)
        legacy = legacy_kind(item)
        if legacy == LEGACY_HOME:
            self.homes[str(item.get("studentId"))].append(item)
            self.walked.update(items.old_home_shards(item))
        elif legacy == LEGACY_TEACHING:
            self.teaching[str(item.get("teacherId"))].append(item)
        elif legacy is not None:
            self.old_edges[str(item.get("studentId"))].append(item)
            self.count_roster(legacy, item)
        elif type_ in _EDGES:
            self.new_edges[str(item.get("studentId"))].append(item)
            self.count_roster(str(type_), item)
        elif type_ == items.COUNTER_TYPE and keys.roster_counted(_key(item)) is not None:
            roster = keys.roster_counted(_key(item))
            assert roster is not None
            self.rosters[roster][_key(item)] = item
        elif type_ in {kind.lower() for kind in Kind}:
            self.nodes[(str(type_), str(item.get("id")))] = item
            if type_ == "class":
                self.classes_of[str(item.get("teacherId"))].append(item)
            self.walked.update(items.shards_moved(item, damaged_ok=True))

    def count_roster(self, relation_name: str, edge: Item) -> None:
        """An enrolment (membership), for the roster shard its student picks."""
        for kind, relation in items.SHARDED.items():
            if relation_name == relation.name:
                target_id, student_id = (
                    str(edge.get(f"{kind.lower()}Id")),
                    str(edge.get("studentId")),
                )
                shard = keys.roster_shard(kind, keys.check_id(target_id), student_id)
                self.roster_walked[shard] += 1

    def node(self, kind: Kind, id_: str) -> Item | None:
        return self.nodes.get((kind.lower(), id_))

    def ids(self, kind: Kind, *extra: dict[str, list[Item]]) -> list[str]:
        found = {id_ for (type_, id_) in self.nodes if type_ == kind.lower()}
        for by_id in extra:
            found.update(id_ for id_, listed in by_id.items() if listed)
        return sorted(found)


@dataclass
class Job:
    """One node's migration: transactions in order, and what they move."""

    kind: Kind
    id: str
    transactions: list[list[tx.Action]]
    edges_moved: int = 0
    homes_moved: int = 0
    teaching_deleted: int = 0
    search_keys: int = 0  # 1 when the job writes the node's search key
    rosters: int = 0  # 1 when the job moves a class's roster count into shards
    locations: int = 0  # 1 when the job moves a student's location entry into its shard
    layout: bool = True  # False: a class's job (search key, roster shards)

    @property
    def label(self) -> str:
        return f"{self.kind.lower()} {self.id}"


class Skip(Exception):
    """A node migrate cannot rewrite: the message says why (one line, ids only)."""


async def read_counters(
    dynamo: Dynamo, table: str, page_size: int | None = None
) -> dict[Key, Item]:
    """Every counter item, by key: read before the scan whose walked counts the backfill
    puts (`plan_counters`)."""
    return {
        _key(item): item
        async for item in scan(dynamo, table, page_size=page_size)
        if item.get(items.TYPE) == items.COUNTER_TYPE and keys.roster_counted(_key(item)) is None
    }  # a class's roster shards are the class job's (`plan_roster`)


def plan_counters(school: _School, before: dict[Key, Item]) -> list[list[tx.Action]]:
    """Backfill: for each counter whose total `before` (read before the scan: its shards, and
    its single item of the layout before shards if one is left) differs from the count
    walked, one transaction that puts each shard whose count differs from the count walked
    for it, conditioned on its `moves` as read then (any write to its nodes since fails it),
    and deletes a single item left, conditioned the same way. A shard is fenced on its own
    `moves`: only its own nodes move it. Equal totals are left alone (a shard alone may
    differ: it holds what was folded), so a second run puts nothing."""
    held = {key: counter.get(items.COUNT, 0) for key, counter in before.items()}
    drifted = {key for key, _, _ in items.drifted(items.totals(school.walked), items.totals(held))}
    by_counter: dict[Key, list[Key]] = defaultdict(list)
    for key in sorted(school.walked.keys() | before.keys()):
        if keys.counter_of(key) in drifted:
            by_counter[keys.counter_of(key)].append(key)
    transactions = []
    for counter in sorted(by_counter):
        actions = []
        for key in by_counter[counter]:
            read, walked = before.get(key), school.walked.get(key, 0)
            if key == counter:  # the single item of the layout before shards
                actions.append(tx.delete(key, *_moved_as(read)))
            elif held.get(key, 0) != walked:
                item = items.counter(key, walked)
                if read is not None and items.MOVES in read:
                    item[items.MOVES] = read[items.MOVES]
                actions.append(tx.put(item, *_moved_as(read)))
        transactions.append(actions)
    return transactions


def _moved_as(read: Item | None) -> tuple[tx.Clause, ...]:
    """A counter item as read: absent, or present with the `moves` it had."""
    if read is None:
        return (tx.NOT_EXISTS,)
    if items.MOVES in read:
        return (tx.EXISTS, ("eq", items.MOVES, read[items.MOVES]))
    return (tx.EXISTS, ("lacks", items.MOVES))


# -- Counters of the layout before shards: folded online -------------------------------------

FOLD_TRIES = 10  # reads of one busy counter's single item before migrate gives up on it


def fold_actions(counter: Key, read: Item) -> list[tx.Action]:
    """Fold a counter's single item of the layout before shards into its shard 0: add its
    count there and delete it, conditioned on its `moves` as read. Shards only ever ADD, so a
    write to shard 0 meanwhile is kept; a write that still moves the single item (an
    instance of the old code) fails the delete and the fold is read and tried again, so no
    write is lost and none is counted twice."""
    shard = keys.shard_number(counter, 0)
    add = {items.COUNT: int(read.get(items.COUNT, 0)), items.MOVES: 1}
    return [
        tx.update(shard, assign={items.TYPE: items.COUNTER_TYPE}, add=add),
        tx.delete(counter, *_moved_as(read)),
    ]


async def fold_counters(
    dynamo: Dynamo, table: str, counters: dict[Key, Item], report: Report
) -> None:
    """Fold every single-item counter among `counters` (read by `read_counters`) into its
    shards, each in its own transaction, reading it again (strongly) while writers move it."""
    for counter in sorted(key for key in counters if keys.counter_of(key) == key):
        read: Item | None = counters[counter]
        for _ in range(FOLD_TRIES):
            if read is None:
                break  # gone: another migrate folded it
            try:
                await transact(dynamo, table, fold_actions(counter, read))
            except Refused:
                read = await _read(dynamo, table, counter)
                continue
            report.transactions += 1
            report.folded += 1
            break
        else:
            report.changed.append(
                f"counter {counter.pk} kept moving while it was folded into shards:"
                " run migrate again"
            )


async def _read(dynamo: Dynamo, table: str, key: Key) -> Item | None:
    params = {"TableName": table, "Key": codec.encode(key.as_item()), "ConsistentRead": True}
    found = (await admin.call(dynamo, "GetItem", params, Retries(dynamo.budget))).get("Item")
    return None if found is None else codec.decode(found)


def _guard(node: Item, counter: str) -> tuple[tx.Clause, ...]:
    """The node as scanned: its version and its relation counter (writers move both)."""
    clauses: list[tx.Clause] = [tx.EXISTS, ("eq", "version", node.get("version"))]
    if counter in node:
        clauses.append(("eq", counter, node[counter]))
    return tuple(clauses)


def _search_key(kind: Kind, node: Item) -> dict[str, Any]:
    """The node's GSI2 key attributes if it lacks them or they disagree with its name."""
    want = items.search_attributes(kind, node["id"], node)
    return {} if all(node.get(a) == v for a, v in want.items()) else want


def _key(item: Item) -> Key:
    return Key(item[PK], item[SK])


def _chunks(actions: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(actions), size):
        yield list(actions[start : start + size])


def _entry(school: _School, relation: Relation, edge: Item, legacy: bool) -> dict[str, Any]:
    target_id = edge[f"{relation.target.lower()}Id"]
    target = school.node(relation.target, target_id)
    if target is not None:
        return relation.entry_of(target)
    if legacy:
        return {attr: edge.get(src) for attr, src in LEGACY_ENTRY_COPIES[relation.name].items()}
    raise Skip(
        f"student {edge['studentId']}: {relation.target.lower()} {target_id} does not exist"
        " and its moved edge has no copy of it; fix it by hand (graph-api check shows it)"
    )


def plan_student(school: _School, student_id: str) -> Job | None:
    """The transactions that bring one student to the new layout; None when it is there."""
    node = school.node(Kind.STUDENT, student_id)
    old, moved, homes = (
        school.old_edges.get(student_id, []),
        school.new_edges.get(student_id, []),
        school.homes.get(student_id, []),
    )
    if node is None:
        if old or homes:
            raise Skip(
                f"student {student_id} does not exist: its {len(old) + len(homes)} old-layout"
                " item(s) are left in place (graph-api check reports them)"
            )
        return None
    has_maps = all(isinstance(node.get(r.field), dict) for r in STUDENT_RELATIONS)
    if has_maps and not old and not homes:
        return plan_location_key(school, student_id)
    guard = _guard(node, ENROLMENT.owner_count)
    maps: dict[str, dict[str, Any]] = {}
    for relation in STUDENT_RELATIONS:
        entries = dict(relation.entries(node))
        for edge, legacy in [(e, False) for e in moved] + [(e, True) for e in old]:
            if edge[items.TYPE] == relation.name:
                target_id = edge[f"{relation.target.lower()}Id"]
                entries[target_id] = _entry(school, relation, edge, legacy)
        maps[relation.field] = entries
    already = {(e[items.TYPE], _key(e)) for e in moved}
    pairs: list[list[tx.Action]] = []
    for edge in old:
        relation = _EDGES[edge[items.TYPE]]
        new = relation.edge_item(node, {"id": edge[f"{relation.target.lower()}Id"]})
        pair = [tx.delete(_key(edge), tx.EXISTS)]
        if (relation.name, _key(new)) not in already:
            pair.insert(0, tx.put(new, tx.NOT_EXISTS))
        pairs.append(pair)
    node_key = keys.node(Kind.STUDENT, student_id)
    search = _search_key(Kind.STUDENT, node)
    assign: dict[str, Any] = {**maps, **search}
    for home in homes[:1]:  # one home item a student (its key is fixed)
        place = Place(home["country"], home["state"], home["city"], home.get("street"))
        assign.update(items.home_attributes(student_id, place))
    last = [
        tx.update(node_key, *guard, assign=assign),
        *(tx.delete(_key(home), tx.EXISTS) for home in homes),
    ]
    moves = [action for pair in pairs for action in pair]
    if len(last) + len(moves) <= tx.MAX_ACTIONS:  # the usual student: one transaction
        return Job(
            Kind.STUDENT,
            student_id,
            [last + moves],
            edges_moved=len(old),
            homes_moved=len(homes),
            search_keys=int(bool(search)),
        )
    transactions = [
        [tx.check(node_key, *guard), *(action for pair in chunk for action in pair)]
        for chunk in _chunks(pairs, PAIRS_PER_TRANSACTION)
    ]
    transactions.append(last)
    return Job(
        Kind.STUDENT,
        student_id,
        transactions,
        edges_moved=len(old),
        homes_moved=len(homes),
        search_keys=int(bool(search)),
    )


def plan_teacher(school: _School, teacher_id: str) -> Job | None:
    """The transactions that bring one teacher to the new layout; None when it is there."""
    node = school.node(Kind.TEACHER, teacher_id)
    edges = school.teaching.get(teacher_id, [])
    if node is None:
        if edges:
            raise Skip(
                f"teacher {teacher_id} does not exist: its {len(edges)} teaching edge(s) are"
                " left in place (graph-api check reports them)"
            )
        return None
    has_map = isinstance(node.get(TEACHING.field), dict)
    if has_map and not edges:
        return plan_search_key(school, Kind.TEACHER, teacher_id)
    guard = _guard(node, TEACHING.owner_count)
    node_key = keys.node(Kind.TEACHER, teacher_id)
    deletes = [tx.delete(_key(edge), tx.EXISTS) for edge in edges]
    transactions: list[list[tx.Action]] = []
    search: dict[str, Any] = {}
    if not has_map:
        taught = {c["id"]: TEACHING.entry_of(c) for c in school.classes_of.get(teacher_id, [])}
        search = _search_key(Kind.TEACHER, node)
        first = tx.update(node_key, *guard, assign={TEACHING.field: taught, **search})
        transactions.append([first, *deletes[:DELETES_PER_TRANSACTION]])
        deletes = deletes[DELETES_PER_TRANSACTION:]
    transactions += [
        [tx.check(node_key, *guard), *chunk] for chunk in _chunks(deletes, DELETES_PER_TRANSACTION)
    ]
    job = Job(Kind.TEACHER, teacher_id, transactions, teaching_deleted=len(edges))
    if search:
        job.search_keys = 1
    elif (alone := plan_search_key(school, Kind.TEACHER, teacher_id)) is not None:
        job.transactions += alone.transactions  # the map was there: a transaction of its own
        job.search_keys = 1
    return job


def plan_search_key(school: _School, kind: Kind, id_: str) -> Job | None:
    """A node of the new layout without its search key (or with a stale one): one update
    that writes it, if the node still has the name scanned; None when the key is right."""
    node = school.node(kind, id_)
    field_ = keys.SEARCHED[kind]
    if node is None or not isinstance(node.get(field_), str):
        return None  # `graph-api check` reports a node without its name
    search = _search_key(kind, node)
    if not search:
        return None
    update = tx.update(keys.node(kind, id_), tx.EXISTS, ("eq", field_, node[field_]), assign=search)
    return Job(kind, id_, [[update]], search_keys=1, layout=False)


def _location_key(node: Item) -> dict[str, Any]:
    """A student's GSI1 keys if its home's place says other ones (the country's partition of
    the layout before location shards: `keys.location_shard`)."""
    home = node.get(items.HOME)
    if not isinstance(home, dict):
        return {}
    place = Place(home["country"], home["state"], home["city"])
    want = keys.home_location(node["id"], place.country, place.state, place.city).as_item()
    return {} if all(node.get(a) == v for a, v in want.items()) else want


def _as_scanned(node: Item, *attributes: str) -> tuple[tx.Clause, ...]:
    return tuple(("eq", a, node[a]) if a in node else ("lacks", a) for a in attributes)


def plan_location_key(school: _School, student_id: str) -> Job | None:
    """A student of the new layout whose location entry is not on its state's shard (issue
    54; it sits in its country's partition of before): one update that moves it there,
    conditioned on its GSI1 keys as scanned (a move changes them), with its search key if
    that is missing too. Online: writes that do not move the home leave the keys alone."""
    node = school.node(Kind.STUDENT, student_id)
    assert node is not None
    location = _location_key(node)
    if not location:
        return plan_search_key(school, Kind.STUDENT, student_id)
    search = _search_key(Kind.STUDENT, node) if isinstance(node.get("name"), str) else {}
    fence = _as_scanned(node, *items.LOCATION_KEYS, *(["name"] if search else []))
    update = tx.update(
        keys.node(Kind.STUDENT, student_id), tx.EXISTS, *fence, assign={**location, **search}
    )
    return Job(
        Kind.STUDENT,
        student_id,
        [[update]],
        search_keys=int(bool(search)),
        locations=1,
        layout=False,
    )


def plan_roster(school: _School, kind: Kind, class_id: str) -> list[tx.Action]:
    """A class's roster count into its shards, online, in one transaction
    conditioned on the class's copied fields as scanned (the shards copy them):

    - a class that keeps `studentCount` on its item (the layout before, or an older
      instance's link since the last migrate put it back): the count removed, conditioned on
      its value as scanned (links move it), and added to shard 0; every shard stamped;
    - a class in shards with shards missing (links and unlinks need them: none of the
      shard's edges moved while it was missing) or stamped unlike the class: those put, the
      missing ones with the count of their edges walked.
    Nothing when its shards are whole."""
    klass = school.node(kind, class_id)
    if klass is None:
        return []
    relation = items.SHARDED[kind]
    stamped = items.stamped(kind, klass)
    held = school.rosters.get((kind, class_id), {})
    wanted = keys.roster_shards(kind, class_id)
    fields = items.stamp_fields(kind)
    holds: list[tx.Clause] = [
        ("lacks", f) if stamped.get(f) is None else ("eq", f, stamped[f]) for f in fields
    ]
    node = keys.node(kind, class_id)
    stamp = {items.TYPE: items.COUNTER_TYPE, **stamped}
    unflag = [f for f in relation.flags if f not in stamped]
    if not items.in_sharded_layout(relation, klass):
        moved = int(klass[relation.target_count or ""])
        # Each shard its edges walked, the rest (links since the edges were scanned) on
        # shard 0: the total is the count as scanned, which the class's condition pins. Shards
        # already there (an older instance's link put the count back): all on shard 0.
        counts = [0 if held else school.roster_walked.get(key, 0) for key in wanted]
        counts[0] += moved - sum(counts)
        return [
            tx.update(node, *_guard(klass, "studentCount"), *holds, remove=["studentCount"]),
            *(
                tx.update(key, assign=stamp, remove=unflag, add={items.COUNT: n})
                for key, n in zip(wanted, counts, strict=True)
            ),
        ]
    actions: list[tx.Action] = []
    for key in wanted:
        shard = held.get(key)
        if shard is None:
            count = school.roster_walked.get(key, 0)
            actions.append(tx.put(items.roster_shard(key, kind, klass, count), tx.NOT_EXISTS))
        elif any(shard.get(f) != stamped.get(f) for f in fields):
            actions.append(tx.update(key, tx.EXISTS, assign=stamp, remove=unflag))
    if not actions:
        return []
    return [tx.check(node, tx.EXISTS, *holds), *actions]


def _plan_class(school: _School, class_id: str) -> Job | None:
    search = plan_search_key(school, Kind.CLASS, class_id)
    roster = plan_roster(school, Kind.CLASS, class_id)
    if not roster:
        return search
    before = search.transactions if search is not None else []
    searched = 0 if search is None else 1
    return Job(
        Kind.CLASS, class_id, [*before, roster], search_keys=searched, rosters=1, layout=False
    )


def _plan_sport(school: _School, sport_id: str) -> Job | None:
    roster = plan_roster(school, Kind.SPORT, sport_id)
    return Job(Kind.SPORT, sport_id, [roster], rosters=1, layout=False) if roster else None


def plan(school: _School) -> tuple[list[Job], list[str]]:
    """Every node's job, teachers first, and the nodes that cannot be migrated."""
    jobs: list[Job] = []
    skipped: list[str] = []
    planners: list[tuple[Kind, Callable[[_School, str], Job | None], list[str]]] = [
        (Kind.TEACHER, plan_teacher, school.ids(Kind.TEACHER, school.teaching)),
        (Kind.STUDENT, plan_student, school.ids(Kind.STUDENT, school.old_edges, school.homes)),
        (Kind.CLASS, _plan_class, school.ids(Kind.CLASS)),
        (Kind.SPORT, _plan_sport, school.ids(Kind.SPORT)),
    ]
    for kind, planner, ids in planners:
        for id_ in ids:
            try:
                job = planner(school, id_)
            except Skip as skip:
                skipped.append(str(skip))
            except (KeyError, TypeError, AttributeError) as error:  # too damaged to rewrite
                skipped.append(f"{kind.lower()} {id_} cannot be migrated: malformed ({error!r})")
            else:
                if job is not None:
                    jobs.append(job)
    return jobs, skipped


# -- Running the jobs -----------------------------------------------------------------------


class Refused(Exception):
    """A transaction's condition failed: what the plan was made from changed."""


async def transact(dynamo: Dynamo, table: str, actions: Sequence[tx.Action]) -> None:
    """One TransactWriteItems, a request of its own for the retry policy: conflicts and
    throttles are sent again with the same ClientRequestToken; Refused when a condition
    fails."""
    params = {
        "TransactItems": [action.request(table) for action in actions],
        "ClientRequestToken": tx.new_token(),
    }
    try:
        await admin.call(dynamo, "TransactWriteItems", params, Retries(dynamo.budget))
    except ClientError as error:
        cancelled = error_code(error) == "TransactionCanceledException"
        if cancelled and "ConditionalCheckFailed" in cancellation_reasons(error):
            raise Refused() from None
        raise


@dataclass
class Report:
    scanned: int = 0  # items, in the first scan
    students: int = 0  # rewritten
    teachers: int = 0
    edges_moved: int = 0
    homes_moved: int = 0
    teaching_deleted: int = 0
    search_keys: int = 0  # nodes given their search key
    transactions: int = 0
    counters: int = 0  # counters of catalogs and places set to the count walked
    folded: int = 0  # counters of the layout before shards folded into their shards
    rosters: int = 0  # classes whose roster count was moved into (or completed in) shards
    locations: int = 0  # students whose location entry was moved into its state's shard
    scans: int = 0
    changed: list[str] = field(default_factory=list)  # nodes a writer changed: not migrated
    skipped: list[str] = field(default_factory=list)  # nodes migrate cannot rewrite

    @property
    def complete(self) -> bool:
        return not self.changed and not self.skipped

    @property
    def nothing_done(self) -> bool:
        return self.transactions == 0


# progress(phase, done, total): "scan" (items so far, total 0) or "migrate" (jobs)
Progress = Callable[[str, int, int], None]


async def migrate_table(
    dynamo: Dynamo,
    table: str,
    progress: Progress | None = None,
    *,
    page_size: int | None = None,
    passes: int = PASSES,
    notice: float = layout.MIGRATION_NOTICE,
) -> Report:
    """Bring every node of `table` to the new layout; what was done and what was not.

    Location entries (the layout before location shards kept a country's students in one
    partition): before the first student's entry moves into its shard, the marker
    `keys.location_migration` is put and `notice` seconds waited, so every serving
    process reads the country's unsharded partition beside the shards (`store/layout.py`)
    while students move; it is deleted once a pass leaves none to move."""
    report = Report()
    await fold_counters(dynamo, table, await read_counters(dynamo, table, page_size), report)
    folds_refused, report.changed = report.changed, []
    marked = False
    for _ in range(passes):
        before = await read_counters(dynamo, table, page_size)
        school = _School()
        scanned = None if progress is None else lambda n: progress("scan", n, 0)
        async for item in scan(dynamo, table, scanned, page_size=page_size):
            school.add(item)
        report.scans += 1
        report.scanned = report.scanned or school.scanned
        jobs, report.skipped = plan(school)
        report.changed = []
        moving = any(job.locations for job in jobs)
        if moving and not marked:
            await _put(
                dynamo,
                table,
                {**keys.location_migration().as_item(), items.TYPE: items.LAYOUT_TYPE},
            )
            await asyncio.sleep(notice)
            marked = True
        for done, job in enumerate(jobs, 1):
            try:
                for actions in job.transactions:
                    await transact(dynamo, table, actions)
                    report.transactions += 1
            except Refused:
                report.changed.append(
                    f"{job.label} changed while it was migrated (a writer is running?)"
                )
                continue
            finally:
                if progress:
                    progress("migrate", done, len(jobs))
            report.search_keys += job.search_keys
            report.rosters += job.rosters
            report.locations += job.locations
            if job.layout and job.kind is Kind.STUDENT:
                report.students += 1
            elif job.layout:
                report.teachers += 1
            report.edges_moved += job.edges_moved
            report.homes_moved += job.homes_moved
            report.teaching_deleted += job.teaching_deleted
        if not report.changed:
            await _backfill(dynamo, table, plan_counters(school, before), report)
        if not report.changed:
            break
    if not report.changed and not _student_skipped(report):
        # No student is left on its country's unsharded partition: readers stop reading it.
        await admin.call(dynamo, "DeleteItem", _keyed(table), Retries(dynamo.budget))
    report.changed = folds_refused + report.changed
    return report


def _student_skipped(report: Report) -> bool:
    return any(line.startswith("student ") for line in report.skipped)


def _keyed(table: str) -> dict[str, Any]:
    return {"TableName": table, "Key": codec.encode(keys.location_migration().as_item())}


async def _put(dynamo: Dynamo, table: str, item: Item) -> None:
    params = {"TableName": table, "Item": codec.encode(item)}
    await admin.call(dynamo, "PutItem", params, Retries(dynamo.budget))


async def _backfill(
    dynamo: Dynamo, table: str, transactions: list[list[tx.Action]], report: Report
) -> None:
    """The counters, from the pass's scan: a layout migration moves homes, not counts."""
    for actions in transactions:
        counter = keys.counter_of(_action_key(actions[0]))
        try:
            await transact(dynamo, table, actions)
        except Refused:
            report.changed.append(
                f"counter {counter.pk} changed during the scan: run migrate again"
            )
            continue
        report.transactions += 1
        report.counters += 1


def _action_key(action: tx.Action) -> Key:
    wire = action.body.get("Item") or action.body["Key"]
    return Key(wire[PK]["S"], wire[SK]["S"])
