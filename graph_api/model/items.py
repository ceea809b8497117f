"""Item shapes: what a node or an edge item holds, and which fields are copied where.

Keys come from `graph_api.model.keys`; this module decides the attributes. The relations
(`Relation.entry`: target fields copied into the owner's map; `Relation.roster`: owner fields
copied onto edge items) are the single statement of the denormalization: item builders use
them, readers use them to see a map entry or an edge as the node at its far end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from graph_api.errors import BadUserInput, Conflict
from graph_api.model import keys
from graph_api.model.keys import Kind

Item = dict[str, Any]  # an item as plain Python values; store/codec.py is its wire format
TYPE = "type"
CLAIM = "propagation"  # on a node: the token of the write whose copies are still being applied
# On a class being handed to another teacher: the new teacher's id, set before its students'
# entries are revoked and removed when the class changes teacher. Copied into the entries
# (`Relation.flags`): an entry that carries it grants its teacher nothing (`policy.teaches`).
HANDING_OVER = "handingOver"
# Not a node or an edge: a write whose copies are still to be finished (`keys.todo`), kept
# while its node holds a claim; `finisher.py` completes the copies of old ones.
TODO_TYPE = "todo"
# Not a node or an edge: the change stream's lease (`keys.stream_lease`, `events/lease.py`).
LEASE_TYPE = "lease"
LAYOUT_TYPE = "layout"  # the marker of a location migration (`keys.location_migration`)
# Not a node or an edge: a shard of a counter of a catalog or a place (`keys.counter_shard`
# of `keys.catalog_counter`, `keys.location_counter`), its number in `count`, moved by the
# writes that move what it counts; a list's total is the sum of its counter's shards.
COUNTER_TYPE = "counter"
COUNT = "count"
# On a counter: how many writes have moved it. `graph-api migrate` backfills a count only
# while this is what it read before its scan (no write moved the counter since).
MOVES = "moves"
CATALOG_KINDS = (Kind.TEACHER, Kind.CLASS, Kind.SPORT)


def node_item(kind: Kind, id_: str, **attributes: Any) -> Item:
    item: Item = {**keys.node(kind, id_).as_item(), TYPE: kind.lower(), "id": id_, "version": 1}
    # Students are not listed in a catalog: one partition of every student would be the
    # hot key that schema/table.md warns about. Teachers, classes and sports are small.
    if kind is not Kind.STUDENT:
        item.update(keys.node_catalog(kind, id_).as_item())
    item.update(attributes)
    item.update(search_attributes(kind, id_, item))
    return item


# A node's search key (GSI2, `keys.name_key`) is written with the field it is searched by
# (`keys.SEARCHED`: a student's or teacher's name, a class's subject), in the same write.
SEARCH_KEYS = (keys.GSI2PK, keys.GSI2SK)


def search_attributes(kind: Kind, id_: str, fields: Mapping[str, Any]) -> dict[str, str]:
    """The GSI2 key of node `id_` when `fields` (the item, or a write's changes) set the
    field it is searched by; else nothing."""
    field = keys.SEARCHED.get(kind)
    if field is None or field not in fields:
        return {}
    return keys.name_key(kind, id_, fields[field]).as_item()


# Counters of a node's relations (`edgeCount`, `classCount`, `studentCount`) move in the same
# transaction as the relations. Deletes and renames condition on them, which fences out a
# relation written between our read of a node's relations and our write.


def student(id_: str, name: str, email: str, home: Place | None = None) -> Item:
    item = node_item(Kind.STUDENT, id_, name=name, email=email, edgeCount=0)
    item.update({ENROLMENT.field: {}, MEMBERSHIP.field: {}})  # maps must exist to SET into
    if home is not None:
        item.update(home_attributes(id_, home))
    return item


def email_guard(student_item: Item) -> Item:
    return {
        **keys.email_guard(student_item["email"]).as_item(),
        TYPE: "email",
        "studentId": student_item["id"],
    }


def teacher(id_: str, name: str) -> Item:
    item = node_item(Kind.TEACHER, id_, name=name, classCount=0)
    item[TEACHING.field] = {}
    return item


def school_class(id_: str, subject: str, teacher_item: Item) -> Item:
    return node_item(
        Kind.CLASS,
        id_,
        subject=subject,
        teacherId=teacher_item["id"],
        teacherName=teacher_item["name"],  # copy: Class.teacher { name } without a read
    )  # its studentCount: in its roster counter's shards (`roster_shards`)


def sport(id_: str, name: str, coach: str | None) -> Item:
    # its studentCount: in its roster shards (`roster_shards`), as a class's
    return node_item(Kind.SPORT, id_, name=name, coach=coach)


@dataclass(frozen=True)
class Place:
    """A home address: place names as the user typed them (keys normalize them)."""

    country: str
    state: str
    city: str
    street: str | None = None


HOME = "home"  # the student item's map of its address
LOCATION_KEYS = (keys.GSI1PK, keys.GSI1SK)  # on a student item only while it has a home


def home_attributes(student_id: str, place: Place) -> dict[str, Any]:
    """A student's home: the address map and, as GSI1 keys, its place in the hierarchy, so
    `studentsByLocation` reads whole students (their classes and sports too) in one Query."""
    location = keys.home_location(student_id, place.country, place.state, place.city)
    home = {"country": place.country, "state": place.state, "city": place.city}
    return {HOME: {**home, "street": place.street}, **location.as_item()}


@dataclass(frozen=True)
class Relation:
    """A bounded relation carried on its owner's item as a map `field` keyed by target id
    (complex-attribute pattern), whose entries copy the target's `entry` fields.

    Relations with a `roster` also have an edge item per pair, stored in the target's
    partition (the class roster, a sport's members) and inverted through GSI1; `roster` says
    edge attribute -> owner attribute, the copies a roster shows. A teacher's classes need
    no edge item: the class names its teacher.
    """

    name: str
    owner: Kind
    target: Kind
    field: str  # the owner item's map attribute
    entry: tuple[str, ...]  # target fields copied into the owner's map entry
    roster: Mapping[str, str] | None
    owner_count: str  # the owner's counter of such relations
    target_count: str | None  # the target's, if it keeps one
    limit: int  # at most this many entries in one owner's map
    flags: tuple[str, ...] = ()  # target fields copied into the entry only while it has them
    # The target's count in shards (`keys.roster_shards`), which also carry the fields an
    # entry copies (`writes/roster_shards.py`): a link writes no target item.
    sharded: bool = False

    def roster_fields(self) -> tuple[str, ...]:
        """The owner's fields its edge items copy."""
        return tuple(self.roster.values()) if self.roster is not None else ()

    def entry_of(self, target_item: Mapping[str, Any]) -> dict[str, Any]:
        entry = {attr: target_item[attr] for attr in self.entry}
        entry.update({flag: target_item[flag] for flag in self.flags if flag in target_item})
        return entry

    def copied_from(self, target_item: Mapping[str, Any]) -> dict[str, Any]:
        """The target fields an entry copies, as conditions see them: each field's value,
        None for a flag the target does not have."""
        return {**{f: target_item.get(f) for f in self.flags}, **self.entry_of(target_item)}

    def entries(self, owner_item: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """target id -> entry, for every target the owner item carries."""
        return owner_item.get(self.field) or {}

    def path(self, target_id: str, *attr: str) -> tuple[str, ...]:
        """A document path into the owner's map: the entry, or one of its attributes."""
        return (self.field, target_id, *attr)

    def edge_item(self, owner_item: Item, target_item: Item) -> Item:
        assert self.roster is not None, f"{self.name} has no edge items"
        key, inverse = keys.edge(self.owner, owner_item["id"], self.target, target_item["id"])
        item: Item = {**key.as_item(), **inverse.as_item(), TYPE: self.name}
        item[f"{self.owner.lower()}Id"] = owner_item["id"]
        item[f"{self.target.lower()}Id"] = target_item["id"]
        item.update({attr: owner_item[src] for attr, src in self.roster.items()})
        return item

    def owner_view(self, edge: Item) -> tuple[str, dict[str, Any]]:
        """The owner node as the edge item knows it: (id, known attributes)."""
        assert self.roster is not None
        return edge[f"{self.owner.lower()}Id"], {
            src: edge[attr] for attr, src in self.roster.items()
        }

    def attach(self, owner_item: Item, target_item: Item) -> Item | None:
        """Link two items in memory (seeding, demo data): the owner's entry and counts; the
        edge item, if the relation has one."""
        owner_item.setdefault(self.field, {})[target_item["id"]] = self.entry_of(target_item)
        owner_item[self.owner_count] = owner_item.get(self.owner_count, 0) + 1
        if self.target_count and not self.sharded:  # a sharded count: `roster_shards`
            target_item[self.target_count] = target_item.get(self.target_count, 0) + 1
        return self.edge_item(owner_item, target_item) if self.roster is not None else None


ENROLMENT = Relation(
    "enrolment",
    Kind.STUDENT,
    Kind.CLASS,
    field="classes",
    entry=("subject", "teacherId", "teacherName"),
    roster={"studentName": "name"},
    owner_count="edgeCount",
    target_count="studentCount",
    limit=100,
    flags=(HANDING_OVER,),
    sharded=True,
)
MEMBERSHIP = Relation(
    "membership",
    Kind.STUDENT,
    Kind.SPORT,
    field="sports",
    entry=("name",),
    roster={"studentName": "name"},
    owner_count="edgeCount",
    target_count="studentCount",
    limit=50,
    sharded=True,
)
# A class has one teacher (its `teacherId`): no edge item, no count on the class.
TEACHING = Relation(
    "teaching",
    Kind.TEACHER,
    Kind.CLASS,
    field="classes",
    entry=("subject",),
    roster=None,
    owner_count="classCount",
    target_count=None,
    limit=200,
)
RELATIONS = (ENROLMENT, MEMBERSHIP, TEACHING)
EDGE_TYPES = tuple(r for r in RELATIONS if r.roster is not None)  # relations with edge items


def todo(kind: Kind, id_: str, token: str, at: int) -> Item:
    """The to-do of node `id_`'s copies, for the claim `token`, written at `at` (epoch s)."""
    key = keys.todo(kind, id_)
    return {
        **key.as_item(),
        TYPE: TODO_TYPE,
        "kind": str(kind),
        "id": id_,
        "token": token,
        "at": at,
    }


# -- Counters of catalogs and places -----------------------------------------------------


def counter(key: keys.Key, count: int) -> Item:
    return {**key.as_item(), TYPE: COUNTER_TYPE, COUNT: count}


# The relation whose count each kind keeps in roster shards: a class's enrolments, a sport's
# memberships (`keys.roster_shards`, `writes/roster_shards.py`).
SHARDED = {Kind.CLASS: ENROLMENT, Kind.SPORT: MEMBERSHIP}


def stamped(kind: Kind, target_item: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a sharded roster's shards copy from their class (sport): those its
    entries copy, flags included while it has them (`writes/roster_shards.py`)."""
    return SHARDED[kind].entry_of(target_item)


def stamp_fields(kind: Kind) -> tuple[str, ...]:
    """Every field a roster shard of `kind` may copy (flags too)."""
    relation = SHARDED[kind]
    return (*relation.entry, *relation.flags)


def roster_shard(key: keys.Key, kind: Kind, target_item: Mapping[str, Any], count: int) -> Item:
    """A roster shard: its part of the count, and its class's (sport's) copies."""
    return {**counter(key, count), **stamped(kind, target_item)}


def in_sharded_layout(relation: Relation, target_item: Mapping[str, Any]) -> bool:
    """Whether the target counts its relations in shards: a sharded relation's target
    without a count of its own (the layout before keeps it until `graph-api migrate`)."""
    return relation.sharded and relation.target_count not in target_item


def roster_shards(all_items: Iterable[Mapping[str, Any]]) -> list[Item]:
    """The roster shards of these items' classes and sports, counting these items' edges:
    what seeding writes beside the nodes (each shard stamped with its node's fields)."""
    tally: Counter[keys.Key] = Counter()
    targets: list[tuple[Kind, Mapping[str, Any]]] = []
    by_type = {relation.name: (kind, relation) for kind, relation in SHARDED.items()}
    for item in all_items:
        if (edge := by_type.get(item.get(TYPE, ""))) is not None:
            kind, relation = edge
            owner_id = item[f"{relation.owner.lower()}Id"]
            tally[keys.roster_shard(kind, item[f"{kind.lower()}Id"], owner_id)] += 1
        for kind, relation in SHARDED.items():
            if item.get(TYPE) == kind.lower() and in_sharded_layout(relation, item):
                targets.append((kind, item))
    return [
        roster_shard(key, kind, node, tally[key])
        for kind, node in targets
        for key in keys.roster_shards(kind, node["id"])
    ]


def place_counters(home: Any) -> tuple[keys.Key, ...] | None:
    """The counters a home moves (its country's, state's and city's), from a student's home
    map or an old home item (both name its places); None for one too damaged to name them."""
    try:
        return keys.home_counters(home["country"], home["state"], home["city"])
    except (KeyError, TypeError, AttributeError, BadUserInput):
        return None


def counted_by(item: Mapping[str, Any], *, damaged_ok: bool = False) -> tuple[keys.Key, ...]:
    """The counters a node counts toward: a teacher's, class's or sport's catalog; a
    student's country, state and city while it has a home. Nothing else counts. A home
    too damaged to say is CONFLICT: a write cannot move its counters (check reports it);
    with `damaged_ok` (check, migrate), it counts toward none."""
    type_ = item.get(TYPE)
    if type_ == Kind.STUDENT.lower():
        if HOME not in item:
            return ()
        found = place_counters(item[HOME])
        if found is None and damaged_ok:
            return ()
        if found is None:
            raise Conflict(
                f"student {item.get('id')}'s home is damaged; run graph-api check",
                id=item.get("id"),
            )
        return found
    for kind in CATALOG_KINDS:
        if type_ == kind.lower():
            return (keys.catalog_counter(kind),)
    return ()


def shards_moved(item: Mapping[str, Any], *, damaged_ok: bool = False) -> tuple[keys.Key, ...]:
    """The counter shards node `item` counts in: each of `counted_by`'s counters at the
    shard its id picks (`keys.counter_shard`), so its create and its delete meet there."""
    id_ = str(item.get("id"))
    return tuple(keys.counter_shard(c, id_) for c in counted_by(item, damaged_ok=damaged_ok))


def old_home_shards(home_item: Mapping[str, Any]) -> tuple[keys.Key, ...]:
    """The counter shards an old layout's home item counts its student in (none if damaged)."""
    id_ = str(home_item.get("studentId"))
    return tuple(keys.counter_shard(c, id_) for c in place_counters(home_item) or ())


def counters(all_items: Iterable[Mapping[str, Any]]) -> dict[keys.Key, int]:
    """What every counter shard must hold for these items (the walked counts): a shard
    once a node counts in it."""
    tally: Counter[keys.Key] = Counter()
    for item in all_items:
        tally.update(shards_moved(item))
    return dict(tally)


def totals(by_item: Mapping[keys.Key, int]) -> dict[keys.Key, int]:
    """Counts of counter items (shards, or a counter's single item of the layout before
    shards) summed by the counter they belong to (`keys.counter_of`): each list's total."""
    summed: Counter[keys.Key] = Counter()
    for key, count in by_item.items():
        summed[keys.counter_of(key)] += count
    return dict(summed)


def drifted(
    walked: Mapping[keys.Key, int], held: Mapping[keys.Key, int]
) -> list[tuple[keys.Key, int, int]]:
    """(counter, count held, count walked) for each counter whose total (`totals`) is not
    what walking its list counts (a counter missing from either holds 0), in key order."""
    return [
        (key, held.get(key, 0), walked.get(key, 0))
        for key in sorted(walked.keys() | held.keys())
        if held.get(key, 0) != walked.get(key, 0)
    ]
