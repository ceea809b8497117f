"""`graph-api check`: read the whole table and report every broken invariant of the graph.

The one place a Scan is right (`store.admin.scan`): an offline tool, paged, with progress.
Each finding names its kind, the item and what is wrong; none means the materialized graph is
whole. A write whose copies are still to be finished (its to-do, `writes/todos.py`) is one
`pending` finding, and the copies it will rewrite are `pending` too, not `stale-copy`:
`graph-api finish` (or any serving process, after a grace) finishes them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from graph_api.errors import BadUserInput
from graph_api.model import items, keys
from graph_api.model.items import EDGE_TYPES, RELATIONS, TEACHING, Relation
from graph_api.model.keys import GSI1PK, GSI1SK, GSI2PK, GSI2SK, PK, SK, Kind
from graph_api.ops.migrate import LEGACY_HOME, LEGACY_TEACHING, legacy_kind
from graph_api.store.admin import scan
from graph_api.store.client import Dynamo
from graph_api.store.codec import Item

NODE_TYPES = {kind.lower(): kind for kind in Kind}
KEY_ATTRS = (PK, SK, GSI1PK, GSI1SK, GSI2PK, GSI2SK)
SEARCH_ATTRS = (GSI2PK, GSI2SK)
_STREAM_LEASE = keys.stream_lease().as_item()
_LOCATION_MIGRATION = keys.location_migration().as_item()
_MIGRATE_AGAIN = " (run `graph-api migrate`)"


@dataclass(frozen=True)
class Finding:
    kind: str  # orphan-edge, missing-entry, bad-key, stale-copy, count, old-layout, ...
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind:<13} {self.key}: {self.message}"


# Items of the edge layout (before nodes carried their relations: home items, enrolment,
# membership and teaching edges), and what each one is, for the old-layout finding.
_MIGRATE = " (old layout: run `graph-api migrate`)"


def _old_item(legacy: str, item: Item) -> str:
    """What an item of the old layout is, by ids."""
    student = f"student {item.get('studentId')}"
    if legacy == LEGACY_HOME:
        return f"home of {student} is an item of its own"
    if legacy == LEGACY_TEACHING:
        return f"teaching edge of teacher {item.get('teacherId')} to class {item.get('classId')}"
    target = _RELATIONS_BY_NAME[legacy].target.lower()
    return (
        f"{legacy} of {student} in {target} {item.get(f'{target}Id')} is in the student's partition"
    )


_RELATIONS_BY_NAME = {r.name: r for r in EDGE_TYPES}


def _ends(relation: Relation, edge: Item) -> tuple[str, str]:
    """An edge item's (owner id, target id)."""
    return (
        str(edge.get(f"{relation.owner.lower()}Id", "")),
        str(edge.get(f"{relation.target.lower()}Id", "")),
    )


def _key_of(item: Item) -> dict[str, str]:
    return {PK: item.get(PK, ""), SK: item.get(SK, "")}


def _where(item: Item) -> str:
    return f"{item.get(PK)} / {item.get(SK)}"


def _unsharded(node: Item, expected: Item) -> bool:
    """Whether a student's location entry is on its country's partition of the layout
    before location shards: the shard's key without its `#<n>`."""
    return bool(node.get(GSI1PK) == str(expected.get(GSI1PK, "")).rsplit(keys.SEP, 1)[0])


def _keys_differ(actual: Item, expected: Item) -> list[str]:
    return [a for a in KEY_ATTRS if actual.get(a) != expected.get(a)]


def _label(kind: Kind, id_: str) -> str:
    return f"{kind.lower()} {id_}"


OWNED = {kind: tuple(r for r in RELATIONS if r.owner is kind) for kind in Kind}
COUNTERS = {
    kind: {r.owner_count for r in OWNED[kind]}
    | {r.target_count for r in RELATIONS if r.target is kind and r.target_count}
    for kind in Kind
}


class _Checker:
    """The invariants of the layout in `model/items.py` (see `schema/table.md`)."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.nodes: dict[tuple[str, str], Item] = {}
        self.guards: list[Item] = []
        self.edges: dict[str, list[Item]] = defaultdict(list)  # relation name -> edge items
        # (relation, owner id, target id) of every edge item, old layout's included
        self.pairs: set[tuple[str, str, str]] = set()
        self.counted: Counter[tuple[str, str, str]] = Counter()  # (type, id, counter) -> edges
        self.counters: dict[keys.Key, Item] = {}  # counter items, by key
        # A class's (sport's) roster shards, by the node: shard key -> item
        self.rosters: dict[tuple[Kind, str], dict[keys.Key, Item]] = defaultdict(dict)
        self.walked: Counter[keys.Key] = Counter()  # what each counter shard must hold
        self.todos: dict[tuple[str, str], Item] = {}  # (type, id) of a node -> its to-do

    def report(self, kind: str, item: Item, message: str) -> None:
        self.findings.append(Finding(kind, _where(item), message))

    def add(self, item: Item) -> None:
        kind = item.get(items.TYPE)
        legacy = legacy_kind(item)
        if legacy is not None:
            self.report("old-layout", item, _old_item(legacy, item) + _MIGRATE)
            if legacy in _RELATIONS_BY_NAME:  # an old edge still counts for its target
                self.count_edge(_RELATIONS_BY_NAME[legacy], item)
            elif legacy == LEGACY_HOME:  # and an old home for its places
                self.walked.update(items.old_home_shards(item))
        elif kind in NODE_TYPES:
            self.nodes[(kind, item.get("id", ""))] = item
            self.walked.update(items.shards_moved(item, damaged_ok=True))
        elif kind == items.COUNTER_TYPE:
            key = keys.Key(item.get(PK, ""), item.get(SK, ""))
            roster = keys.roster_counted(key)
            if roster is not None:
                self.rosters[roster][key] = item
            else:
                self.counters[key] = item
        elif kind == "email":
            self.guards.append(item)
        elif kind == items.LEASE_TYPE and _key_of(item) == _STREAM_LEASE:
            pass  # the stream reader's lease and checkpoints: no part of the graph
        elif kind == items.LAYOUT_TYPE and _key_of(item) == _LOCATION_MIGRATION:
            self.report(
                "location-key",
                item,
                "a migration of location entries into shards has not finished: location pages"
                " read each country's unsharded partition too" + _MIGRATE_AGAIN,
            )
        elif kind == items.TODO_TYPE:
            self.todos[(str(item.get("kind", "")).lower(), str(item.get("id", "")))] = item
        elif kind in _RELATIONS_BY_NAME:
            self.edges[kind].append(item)
            relation = _RELATIONS_BY_NAME[kind]
            self.pairs.add((kind, *_ends(relation, item)))
            self.count_edge(relation, item)
        else:
            self.report("unknown-item", item, f"item of unknown type {kind!r}")

    def count_edge(self, relation: Relation, edge: Item) -> None:
        if relation.target_count:
            target_id = edge.get(f"{relation.target.lower()}Id", "")
            self.counted[(relation.target.lower(), target_id, relation.target_count)] += 1

    def node(self, kind: Kind, id_: str) -> Item | None:
        return self.nodes.get((kind.lower(), id_))

    def pending(self, kind: Kind, id_: str) -> bool:
        """Whether a to-do will rewrite the copies of this node: its own, or (a class) its
        teacher's, which copies the name through it."""
        if (kind.lower(), id_) in self.todos:
            return True
        node = self.node(kind, id_)
        teacher = node.get("teacherId") if node is not None and kind is Kind.CLASS else None
        return isinstance(teacher, str) and (Kind.TEACHER.lower(), teacher) in self.todos

    def stale(self, item: Item, source: Kind, source_id: str, message: str) -> None:
        """A copy unlike its source: `pending` when a to-do will rewrite it."""
        pending = self.pending(source, source_id)
        self.report("pending" if pending else "stale-copy", item, message)

    def check_todos(self) -> None:
        for (type_name, id_), todo in sorted(self.todos.items()):
            what = f"{type_name} {id_}" if type_name in NODE_TYPES else f"{type_name!r} {id_}"
            self.report(
                "pending",
                todo,
                f"the copies of {what} are still to be finished: a serving process does once"
                " they are old enough, `graph-api finish` does now",
            )

    def run(self) -> list[Finding]:
        self.check_todos()
        for node in self.nodes.values():
            self.checked(node, self.check_node)
        for relation in EDGE_TYPES:
            for edge in self.edges[relation.name]:
                self.checked(edge, partial(self.check_edge, relation))
        self.check_guards()
        self.check_counters()
        self.check_orphan_rosters()
        return self.findings

    def checked(self, item: Item, check: Callable[[Item], None]) -> None:
        """Run one item's check; an item too damaged to rebuild is a finding too."""
        try:
            check(item)
        except (KeyError, TypeError, AttributeError, BadUserInput) as error:
            self.report("malformed", item, f"cannot be checked: {error!r}")

    # -- nodes ---------------------------------------------------------------------------

    def check_node(self, node: Item) -> None:
        kind = NODE_TYPES[node[items.TYPE]]
        searched = keys.SEARCHED.get(kind)
        named = {searched: node[searched]} if searched in node else {}
        expected = items.node_item(kind, node["id"], **named)
        if kind is Kind.STUDENT and isinstance(node.get(items.HOME), dict):
            home = node[items.HOME]
            place = items.Place(home["country"], home["state"], home["city"])
            expected.update(items.home_attributes(node["id"], place))
        bad = _keys_differ(node, expected)
        if kind is Kind.STUDENT and bad == [GSI1PK] and _unsharded(node, expected):
            self.report(
                "location-key",
                node,
                f"its location entry is on {node[GSI1PK]}, the country's partition before"
                f" shards, not on its state's shard {expected[GSI1PK]}" + _MIGRATE_AGAIN,
            )
            bad = []
        if search := [a for a in bad if a in SEARCH_ATTRS]:
            fix = " (run `graph-api migrate`)" if not any(a in node for a in SEARCH_ATTRS) else ""
            self.report(
                "search-key", node, f"{', '.join(search)} disagree with its {searched}{fix}"
            )
        if bad := [a for a in bad if a not in SEARCH_ATTRS]:
            where = "the home's place" if kind is Kind.STUDENT else "the node's id"
            self.report("bad-key", node, f"{', '.join(bad)} disagree with {where}")
        if kind is Kind.CLASS:
            self.check_class(node)
        if kind in items.SHARDED:
            self.check_roster_shards(kind, node)
        relations = OWNED[kind]
        if missing := [r.field for r in relations if not isinstance(node.get(r.field), dict)]:
            self.report(
                "old-layout",
                node,
                f"{_label(kind, node['id'])} has no {' or '.join(missing)} map" + _MIGRATE,
            )
        else:
            for relation in relations:
                self.check_entries(relation, node)
        self.check_counts(kind, node, relations if not missing else ())

    def check_class(self, klass: Item) -> None:
        teacher = self.node(Kind.TEACHER, klass["teacherId"])
        if teacher is None:
            self.report("orphan-class", klass, f"teacher {klass['teacherId']} does not exist")
            return
        if klass.get("teacherName") != teacher["name"]:
            self.stale(
                klass, Kind.TEACHER, teacher["id"], f"teacherName is not {teacher['name']!r}"
            )
        taught = teacher.get(TEACHING.field)
        if isinstance(taught, dict) and klass["id"] not in taught:
            self.report(
                "missing-entry",
                klass,
                f"class {klass['id']} is not in the classes of its teacher {teacher['id']}",
            )

    def check_entries(self, relation: Relation, owner: Item) -> None:
        entries = relation.entries(owner)
        name = f"{_label(relation.owner, owner['id'])}'s {relation.field}"
        if len(entries) > relation.limit:
            self.report(
                "bounds", owner, f"{name} has {len(entries)} entries, more than {relation.limit}"
            )
        for target_id, entry in entries.items():
            target = self.node(relation.target, target_id)
            listed = f"{name} list {_label(relation.target, target_id)}"
            if target is None:
                self.report("orphan-entry", owner, f"{listed}, which does not exist")
                continue
            expected = relation.entry_of(target)
            if stale := [
                a
                for a in (*relation.entry, *relation.flags)
                if not isinstance(entry, dict) or entry.get(a) != expected.get(a)
            ]:
                self.stale(
                    owner,
                    relation.target,
                    target_id,
                    f"{listed} with {', '.join(stale)} unlike the {relation.target.lower()}'s",
                )
            if (
                relation.roster is not None
                and (relation.name, owner["id"], target_id) not in self.pairs
            ):
                self.report("missing-edge", owner, f"{listed} but no {relation.name} edge")
            if relation is TEACHING and target.get("teacherId") != owner["id"]:
                self.report(
                    "teaching", owner, f"{listed}, whose teacher is {target.get('teacherId')}"
                )

    def check_counts(self, kind: Kind, node: Item, relations: Sequence[Relation]) -> None:
        """Owner counters equal their entries (maps of old-layout nodes are not counted);
        target counters equal the edges pointing at the node."""
        entries: Counter[str] = Counter()
        for relation in relations:
            entries[relation.owner_count] += len(relation.entries(node))
        for counter in sorted(COUNTERS[kind]):
            if counter in entries:
                actual, what = entries[counter], "entries"
            elif any(r.owner_count == counter for r in OWNED[kind]):
                continue  # an old-layout node: no maps to count
            else:
                actual, what = self.counted[(kind.lower(), node["id"], counter)], "edges"
            held = node.get(counter)
            if kind in items.SHARDED and counter == items.SHARDED[kind].target_count:
                shards = self.rosters.get((kind, node["id"]), {}).values()
                held = (held or 0) + sum(s.get(items.COUNT, 0) for s in shards)
            if (held or 0) != actual:
                self.report("count", node, f"{counter} is {held}, {what} say {actual}")

    def check_roster_shards(self, kind: Kind, node: Item) -> None:
        """A class (sport) counts its students in its roster shards, every one of them
        there (a link conditions its shard on existing), each carrying the node's copied
        fields (a link conditions its shard on them: `writes/roster_shards.py`)."""
        label = _label(kind, node["id"])
        if not items.in_sharded_layout(items.SHARDED[kind], node):
            self.report(
                "old-layout",
                node,
                f"studentCount is on the {kind.lower()} item, not in shards" + _MIGRATE,
            )
            return
        held = self.rosters.get((kind, node["id"]), {})
        wanted = keys.roster_shards(kind, node["id"])
        if missing := [str(n) for n, key in enumerate(wanted) if key not in held]:
            self.report(
                "roster-shard",
                node,
                f"{label}'s roster counter lacks shard(s) {', '.join(missing)}"
                " (`graph-api migrate` makes them)",
            )
        stamped = items.stamped(kind, node)
        for _, shard in sorted(held.items()):
            fields = items.stamp_fields(kind)
            if stale := sorted(f for f in fields if shard.get(f) != stamped.get(f)):
                self.stale(shard, kind, node["id"], f"{', '.join(stale)} unlike {label}'s")

    def check_orphan_rosters(self) -> None:
        for (kind, id_), held in sorted(self.rosters.items()):
            if self.node(kind, id_) is None:
                for shard in held.values():
                    self.report("orphan-counter", shard, f"{kind.lower()} {id_} does not exist")

    # -- edges ---------------------------------------------------------------------------

    def check_edge(self, relation: Relation, edge: Item) -> None:
        owner_id, target_id = _ends(relation, edge)
        owner, target = self.node(relation.owner, owner_id), self.node(relation.target, target_id)
        if owner is None or target is None:
            ends = [(relation.owner, owner_id, owner), (relation.target, target_id, target)]
            missing = [_label(k, i) for k, i, node in ends if node is None]
            self.report("orphan-edge", edge, f"{' and '.join(missing)} missing")
            return
        expected = relation.edge_item(owner, target)
        if bad := _keys_differ(edge, expected):
            self.report("bad-key", edge, f"{', '.join(bad)} disagree with its endpoints")
        assert relation.roster is not None
        if stale := [a for a in relation.roster if edge.get(a) != expected[a]]:
            self.stale(
                edge,
                relation.owner,
                owner_id,
                f"{', '.join(stale)} differ from {_label(relation.owner, owner_id)}'s",
            )
        entries = owner.get(relation.field)
        if isinstance(entries, dict) and target_id not in entries:
            self.report(
                "missing-entry",
                edge,
                f"{_label(relation.owner, owner_id)}'s {relation.field} do not list"
                f" {_label(relation.target, target_id)}",
            )

    # -- counters of catalogs and places -------------------------------------------------

    def check_counters(self) -> None:
        """Each counter's shards sum to what walking its list counts (an absent shard counts
        0; a shard alone may differ: `migrate` folds the counter's single item of the layout
        before shards into shard 0, which then holds other shards' nodes too). That single
        item, where still there, counts in the sum and is reported as old layout."""
        held = {key: c.get(items.COUNT, 0) for key, c in self.counters.items()}
        for key, item in self.counters.items():
            if keys.counter_of(key) == key:
                self.report("old-layout", item, "counter is one item, not shards" + _MIGRATE)
        walked, totals = items.totals(self.walked), items.totals(held)
        for key, count, listed in items.drifted(walked, totals):
            self.report(
                "counter",
                key.as_item(),
                f"counts {count}, the list holds {listed}"
                + ("" if key in totals else " (no counter item)")
                + " (`graph-api migrate` sets it)",
            )

    # -- email guards --------------------------------------------------------------------

    def check_guards(self) -> None:
        guarded: dict[str, Item] = {}
        for guard in self.guards:
            student = self.node(Kind.STUDENT, guard.get("studentId", ""))
            if student is None:
                self.report(
                    "email-guard",
                    guard,
                    f"guards for student {guard.get('studentId')}, who does not exist",
                )
            elif keys.email_guard(student["email"]).pk != guard[PK]:
                self.report(
                    "email-guard", guard, f"student {student['id']}'s email is {student['email']!r}"
                )
            else:
                guarded[student["id"]] = guard
        for (type_name, id_), node in self.nodes.items():
            if type_name == "student" and id_ not in guarded:
                self.report("email-guard", node, f"email {node.get('email')!r} has no guard item")


async def check_table(
    dynamo: Dynamo,
    table: str,
    progress: Callable[[int], None] | None = None,
    *,
    page_size: int | None = None,
) -> list[Finding]:
    checker = _Checker()
    async for item in scan(dynamo, table, progress, page_size=page_size):
        checker.add(item)
    return checker.run()
