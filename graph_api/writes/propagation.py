"""Renames reach every denormalized copy (see the copy table in schema/table.md).

A node's write is a `NodeWrite` (the node's own update, with its guards), a few more head
actions, and `Copies`: units of copy updates, each unit in order (a teacher's classes'
own `teacherName` before the student entries that copy it from the classes). Copies are
edge items (a student's name on its rosters) and map entries on other nodes' items (a
class's subject in its students' `classes`). Everything goes in one transaction when it
fits. When it does not:

- the head commits first, claiming the node's copies with a token (`propagation`);
- the copies follow in chunks, each guarded by "the token is still ours": a later write of
  the node takes the claim over, and the older chunks stop instead of overwriting newer
  copies;
- the claim is released at the end, with the node's to-do (`todos.py`), which the head
  wrote with the claim. A write that fails once its head committed answers the node saved
  and its copies pending (`Table.unfinished`); the finisher (`finisher.py`), in any serving
  process or `graph-api finish`, completes them from what the node holds then, and so does
  sending the write again: fields that are sent are propagated even when unchanged.

A class handed to another teacher whose copies follow revokes first (`_revoke`): the class
is marked `HANDING_OVER` with the claim and the to-do, each student's entry is marked too
(a marked entry grants no teacher, `policy.teaches`), and only then does the head swap the
teacher; the entries then get the new teacher, unmarked. So the old teacher reads none of
the students once the handover is answered, whatever becomes of its chunks; one
interrupted before the swap answers UNAVAILABLE, and the finisher unmarks the class and its
entries (fail closed until then).

Every plan carries fences: conditions that the relation counts we saw are still the
counts, so a relation written between our read and our write makes us read again. A count
can hide a swap (one relation unlinked, another linked, which copied the old value): the
copy for the unlinked one then fails its condition (the edge item or the map entry must
still exist), in whichever chunk it is, and the write reads again. And every plan names
its `source`, the node's copied fields as the copies carry them: a class's `teacherName`
changes with its teacher, not with the class's version, so every transaction that writes
a class's copies checks that the class still holds the values written. A teacher's rename
writes only `teacherName` into its classes' entries, never the subject it happened to read.

Why a followed write leaves every copy exact, under any traffic (the invariant): each copy is
written by the rename or by the link that creates it, and each copies from an item its own
transaction conditions on. A link copies the class's (the sport's, the student's) fields with
the condition that they still hold what it read (`memberships.link`): one that commits after
the rename's head copies the new value; one that read before fails and reads again. A class's
link conditions its roster shard instead of the class, and every write here that changes a
class's copied fields stamps them on all its shards in the same transaction (`class_stamps`;
`roster_shards.py` has the argument), so the shard holds what the class holds. The head
commits the sources first (the node; for a teacher, every class's `teacherName`), and only
then are the holders of copies read, strongly consistent: every copy older than the head is
in what they return, and each update of one is conditioned on its entry or edge still being
there (gone: its relation went, or a newer link wrote the new value). Each chunk checks the
claim and the node's copied fields, so no chunk writes a value older than the node's. So a
rename never waits for the rosters to hold still, and a plan held still (one transaction)
is only tried while they do: a roster that moves while it is read makes the write follow.
More than 100 actions (a teacher of many classes or students): the first transaction holds
the node and as many of its classes as fit, each with its roster shards' stamps, the other
classes follow in chunks, each class again with its stamps (a link conditions the shards:
a class renamed before them would refuse links until they came), and the rosters are read
only once every class has the new name, so a link made in between, which copied the old
name from a class not yet renamed, is read and copied over.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from graph_api.errors import NotFound, Unavailable
from graph_api.model import items, keys
from graph_api.model.items import CLAIM, ENROLMENT, HANDING_OVER, MEMBERSHIP, TEACHING, Relation
from graph_api.model.keys import Key, Kind
from graph_api.store.codec import Item
from graph_api.store.retry import Failure
from graph_api.store.table import Table
from graph_api.store.transactions import (
    EXISTS,
    MAX_ACTIONS,
    STALE,
    Action,
    Clause,
    Path,
    Stale,
    new_token,
    transact,
    transact_each,
    update,
)
from graph_api.writes import roster_shards, todos
from graph_api.writes.reads import Reads, key_of

# Reads who holds copies now; the copy actions in rounds, applied one round after another.
# A round touches each item at most once; a followed copy whose condition fails is dropped,
# so it must carry one entry only (dropping a merged update would drop its other entries).
Targets = Callable[[], Awaitable[list[list[Action]]]]
UNFINISHED = "the update was saved but not all its copies: they are finished once DynamoDB answers"


@dataclass
class Copies:
    """The copies a node write brings along, planned two ways.

    Held still (`units`, `fences`): every copy, from reads whose counts the `fences` pin on
    the node, for one transaction with the write. Followed (`first`, `follow_fences`,
    `targets`): the updates of the nodes the copies are read from (a teacher's classes)
    commit with the write; `targets` then reads who holds copies, after that commit, so
    whoever links from then on copies the new values itself and the write never has to
    catch up with them.
    """

    units: list[list[Action]] = field(default_factory=list)
    fences: list[Clause] = field(default_factory=list)  # the relation counts the plan saw
    source: dict[str, Any] = field(default_factory=dict)  # node field -> value copied
    # Followed: the writes of the nodes the copies are read from, in groups that commit
    # whole (a class's rename with its roster shards' stamps, so the two never disagree);
    # as many as fit go with the head. A group's action whose condition fails is dropped
    # (the class left the teacher; a class of the layout before has no shards to stamp).
    first: list[list[Action]] = field(default_factory=list)
    # How many of `first`'s groups may go in the head, where every condition must hold (a
    # class of the layout before is renamed after it, with stamps dropped if it has none).
    in_head: int | None = None  # None: all
    follow_fences: list[Clause] = field(default_factory=list)
    targets: Targets | None = None
    held: bool = True  # False: planned only to be followed (they cannot fit one transaction)
    # A class's roster shards (`roster_shards.py`): each one's count as the held plan read
    # it (its fence, as `fences` pins a count on a node), None for a node without shards.
    shard_counts: list[int] | None = None

    def actions(self) -> list[Action]:
        return [action for unit in self.units for action in unit]

    def holds(self, skip: Collection[str] = ()) -> list[Clause]:
        """The node still has the values the copies carry (fields in `skip` excepted); a
        flag the copies do not carry (None) is still missing."""
        return [
            ("lacks", f) if value is None else ("eq", f, value)
            for f, value in sorted(self.source.items())
            if f not in skip
        ]


@dataclass(frozen=True)
class NodeWrite:
    """The update of the node whose fields are copied: guarded by what we read."""

    key: Key
    clauses: tuple[Clause, ...]
    assign: Mapping[str, Any]
    remove: tuple[str, ...] = ()

    @classmethod
    def versioned(
        cls,
        kind: Kind,
        node: Item,
        changes: Mapping[str, Any],
        copies: Copies,
        fences: Sequence[Clause],
        remove: tuple[str, ...] = (),
    ) -> NodeWrite:
        """`changes` and a version bump, if the node is still the version we read, its
        relations still number what the copies were planned from (`fences`), and the fields
        it does not change still hold what the copies copy. `remove`: attributes it drops
        (a class's `HANDING_OVER`, by the write that moves it)."""
        return cls(
            key_of(node),
            (
                ("eq", "version", node["version"]),
                *fences,
                *copies.holds(skip={*changes, *remove}),
            ),
            # A new name moves the node in the search index in the same write.
            {
                **changes,
                **items.search_attributes(kind, node["id"], changes),
                "version": node["version"] + 1,
            },
            remove,
        )

    def action(self, claim: str | None, copies: bool) -> Action:
        if claim is not None:
            assign = {CLAIM: claim, **self.assign}
            return update(self.key, *self.clauses, assign=assign, remove=self.remove, on_fail=STALE)
        # Applied whole. A write that copies takes over any older claim: it has just written
        # every copy from the node's state; one that copies nothing leaves a claim alone.
        remove = [*self.remove, CLAIM] if copies else list(self.remove)
        return update(self.key, *self.clauses, assign=self.assign, remove=remove, on_fail=STALE)


# The node fields that other items copy, by the kind of node they belong to.
COPIED: dict[Kind, frozenset[str]] = {
    Kind.STUDENT: frozenset(ENROLMENT.roster_fields()),  # onto its roster edges
    Kind.CLASS: frozenset(ENROLMENT.entry),  # into its students' entries (subject: teacher's)
    Kind.SPORT: frozenset(MEMBERSHIP.entry),  # into its members' entries
    Kind.TEACHER: frozenset({"name"}),  # into its classes' teacherName, and on from there
}


def copies_needed(kind: Kind, sent: Mapping[str, Any]) -> bool:
    return not COPIED[kind].isdisjoint(sent)


def _roster_copies(keys_: Sequence[Key], assign: Mapping[str, Any]) -> list[Action]:
    # Conditioned on `exists`: a copy never resurrects an edge deleted meanwhile. Held still,
    # a vanished edge means the edges changed since the plan (its count may hide one linked
    # in its place, which copied the old value): the write reads again. Followed, it is
    # simply skipped: an edge linked since the write copied the new value.
    return [update(key, EXISTS, assign=assign, on_fail=STALE) for key in keys_]


def _entry_copies(
    relation: Relation,
    owners: Mapping[str, Mapping[str, Mapping[str, Any]]],
    guard: Mapping[str, Any] | None = None,
    whole: bool = False,
) -> list[Action]:
    """One update per owner item (a transaction may touch an item once) setting fields of
    its entries: owner id -> target id -> field -> value. Each entry must still be there
    (else, like a vanished edge, the write reads again or skips it) and hold `guard`'s
    values. `whole`: the fields are the entry, replacing it (a flag it lost goes too)."""
    actions = []
    for owner_id, targets in sorted(owners.items()):
        clauses: list[Clause] = []
        assign: dict[Path, Any] = {}
        for target_id, fields in sorted(targets.items()):
            clauses.append(("has", relation.path(target_id)))
            clauses += [("eq", relation.path(target_id, f), v) for f, v in (guard or {}).items()]
            if whole:
                assign[relation.path(target_id)] = dict(fields)
            else:
                assign.update({relation.path(target_id, f): v for f, v in fields.items()})
        node = keys.node(relation.owner, owner_id)
        actions.append(update(node, *clauses, assign=assign, on_fail=STALE))
    return actions


async def copies_for(
    reads: Reads,
    kind: Kind,
    node: Mapping[str, Any],
    held: bool = True,
    room: int = MAX_ACTIONS - 1,
) -> Copies:
    """Every copy of `node`'s copied fields, set to `node`'s values (its state after the
    write): a write that claims the copies leaves none behind, whoever started them.
    `held=False` plans only the followed way, which reads no roster up front; `room`: the
    actions one transaction has for the copies (a teacher's classes' counts say if they fit)."""
    if kind is Kind.STUDENT:
        return _student_copies(reads, node)
    if kind is Kind.CLASS:
        return await _held_if_still(lambda h: _class_copies(reads, node, held=h), held)
    if kind is Kind.SPORT:
        return await _held_if_still(lambda h: _sport_copies(reads, node, h), held)
    return await _held_if_still(lambda h: _teacher_copies(reads, node, h, room), held)


async def _held_if_still(plan: Callable[[bool], Awaitable[Copies]], held: bool) -> Copies:
    """`plan(True)` when `held`, unless a roster it reads moves under it: then `plan(False)`.

    Holding every copy still is worth it only while nobody links: one transaction, every
    copy at once. A roster that disagrees with its count was read mid-way through someone
    else's enrolment; reading it again meets the next one (six clients enrolling starved a
    teacher's rename that way), so the write follows instead, which reads no roster up
    front and cannot be starved by links that copy the new value themselves."""
    if held:
        try:
            return await plan(True)
        except Stale:
            pass
    return await plan(False)


def _student_edges(student: Mapping[str, Any]) -> list[Key]:
    sid = student["id"]
    return [
        keys.edge(Kind.STUDENT, sid, relation.target, target_id)[0]
        for relation in (ENROLMENT, MEMBERSHIP)
        for target_id in relation.entries(student)
    ]


def _student_copies(reads: Reads, student: Mapping[str, Any]) -> Copies:
    """A student's name on the edge items of its rosters, found from its own maps."""
    assert ENROLMENT.roster is not None  # memberships copy the same
    assign = {attr: student[src] for attr, src in ENROLMENT.roster.items()}
    edges = _student_edges(student)

    async def targets() -> list[list[Action]]:  # the edges once the name is written
        try:
            now = await reads.node(Kind.STUDENT, student["id"])
        except NotFound:
            return []  # deleted meanwhile, with its edges: no copies left to write
        return [_roster_copies(_student_edges(now), assign)]

    return Copies(
        units=[_roster_copies(edges, assign)],
        fences=[("eq", ENROLMENT.owner_count, len(edges))],
        source={src: student[src] for src in ENROLMENT.roster.values()},
        targets=targets,
    )


async def _students_of(
    reads: Reads, kind: Kind, node: Mapping[str, Any], per_shard: Sequence[int] | None = None
) -> list[str]:
    """The students on a class's or a sport's roster, which must agree with its count (on
    its item, or `per_shard`: a class's roster shards' counts)."""
    students = await _roster(reads, kind, node["id"])
    if len(students) != node.get("studentCount", 0) + sum(per_shard or ()):
        raise Stale()  # an edge and its count always move together: we read mid-way
    return students


def layout_fence(kind: Kind, node: Mapping[str, Any]) -> list[Clause]:
    """For a write of a class that keeps its count on its item (and so writes no shard
    stamps): that it still does, so a `graph-api migrate` since our read (which stamped
    the shards from the class as it was) makes us read again."""
    relation = items.SHARDED.get(kind)
    if relation is not None and not items.in_sharded_layout(relation, node):
        return [("has", "studentCount")]
    return []


def class_stamps(
    kind: Kind,
    node: Mapping[str, Any],
    assign: Mapping[str, Any],
    remove: Sequence[str] = (),
    counts: Sequence[int] | None = None,
) -> list[Action]:
    """What a write of a sharded class or sport (as read: `node`) writes on its roster
    shards."""
    relation = items.SHARDED.get(kind)
    if relation is None or not items.in_sharded_layout(relation, node):
        return []
    return roster_shards.stamps(kind, node["id"], assign, remove, counts)


async def _roster(reads: Reads, kind: Kind, id_: str) -> list[str]:
    return [edge["studentId"] for edge in await reads.roster(kind, id_)]


T = TypeVar("T")

# A rename reads the rosters of all the teacher's classes a few at a time: all at once, a
# hundred Queries filled the DynamoDB client's thread pool, and every other request of the
# process (a reader's) queued behind them.
READS_AT_ONCE = 4


async def _few_at_a_time(calls: Iterable[Awaitable[T]]) -> list[T]:
    gate = asyncio.Semaphore(READS_AT_ONCE)

    async def gated(call: Awaitable[T]) -> T:
        async with gate:
            return await call

    return list(await asyncio.gather(*(gated(call) for call in calls)))


async def _class_copies(
    reads: Reads,
    klass: Mapping[str, Any],
    teaching: bool = True,
    copies_teacher: bool = False,
    held: bool = True,
    per_shard: Sequence[int] | None = None,
) -> Copies:
    """`teaching=False` when the caller writes the teacher's entry itself; `copies_teacher`
    when the write copies the teacher's name into the class: the teacher's entry is then
    guarded by that name, so the name is still the teacher's when the write commits.
    `per_shard`: the class's roster shards' counts, read by the caller (held only)."""
    cid = klass["id"]
    copied = ENROLMENT.entry_of(klass)  # with the class's HANDING_OVER mark, if it has one
    first: list[Action] = []
    taught = {f: klass[f] for f in TEACHING.entry}
    if teaching:
        named: list[Clause] = [("eq", "name", klass["teacherName"])] if copies_teacher else []
        first.append(
            update(
                keys.node(Kind.TEACHER, klass["teacherId"]),
                ("has", TEACHING.path(cid)),
                *named,
                assign={TEACHING.path(cid, f): v for f, v in taught.items()},
                on_fail=STALE,
            )
        )
    students = await _students_of(reads, Kind.CLASS, klass, per_shard) if held else []

    async def targets() -> list[list[Action]]:
        now = await _roster(reads, Kind.CLASS, cid)
        return [_entry_copies(ENROLMENT, {sid: {cid: copied} for sid in now}, whole=True)]

    entries = _entry_copies(ENROLMENT, {sid: {cid: copied} for sid in students}, whole=True)
    sharded = items.in_sharded_layout(ENROLMENT, klass)
    return Copies(
        units=[first + entries],
        # The count the roster was checked against: on the shards (their stamps carry it,
        # `write`), or on the class.
        fences=[] if sharded else [("eq", "studentCount", len(students))],
        source=ENROLMENT.copied_from(klass),
        first=[first] if first else [],
        targets=targets,
        held=held,
        shard_counts=list(per_shard) if held and sharded and per_shard is not None else None,
    )


async def _sport_copies(
    reads: Reads,
    sport: Mapping[str, Any],
    held: bool = True,
    per_shard: Sequence[int] | None = None,
) -> Copies:
    pid = sport["id"]
    copied = MEMBERSHIP.entry_of(sport)
    students = await _students_of(reads, Kind.SPORT, sport, per_shard) if held else []
    sharded = items.in_sharded_layout(MEMBERSHIP, sport)

    async def targets() -> list[list[Action]]:
        now = await _roster(reads, Kind.SPORT, pid)
        return [_entry_copies(MEMBERSHIP, {sid: {pid: copied} for sid in now})]

    return Copies(
        units=[_entry_copies(MEMBERSHIP, {sid: {pid: copied} for sid in students})],
        fences=[] if sharded else [("eq", "studentCount", len(students))],
        source=copied,
        targets=targets,
        held=held,
        shard_counts=list(per_shard) if held and sharded and per_shard is not None else None,
    )


async def _teacher_copies(
    reads: Reads, teacher: Mapping[str, Any], held: bool = True, room: int = MAX_ACTIONS - 1
) -> Copies:
    """The name on each of the teacher's classes, then in the entries of their students
    (one update per student, however many of the teacher's classes it is in)."""
    tid, name = teacher["id"], teacher["name"]
    class_ids = sorted(TEACHING.entries(teacher))
    # Every copy is guarded by "still this teacher's": a class moved away meanwhile keeps
    # the copies its move wrote. Only the name is copied: the subject is the class's to copy.
    ours: Clause = ("eq", "teacherId", tid)

    def own(class_id: str, *fences: Clause) -> Action:
        node = keys.node(Kind.CLASS, class_id)
        return update(node, ours, *fences, assign={"teacherName": name}, on_fail=STALE)

    def renaming(class_id: str) -> list[Action]:
        # Followed: a class's rename and its shards' stamps, in one transaction, so a link
        # never meets a class and shards that disagree (it would fail on the shard until the
        # stamps came). Each stamp is conditioned like the class (still the teacher's), and
        # on the shard having a count (a class of the layout before has none: dropped).
        assign = {"teacherName": name}
        clauses: list[Clause] = [ours, ("has", items.COUNT)]
        return [own(class_id), *roster_shards.stamps(Kind.CLASS, class_id, assign, clauses=clauses)]

    def entries(rosters: Mapping[str, Sequence[str]]) -> list[Action]:
        by_student: dict[str, dict[str, dict[str, Any]]] = {}
        for class_id, students in rosters.items():
            for sid in students:
                by_student.setdefault(sid, {})[class_id] = {"teacherName": name}
        return _entry_copies(ENROLMENT, by_student, {"teacherId": tid})

    found = await reads.nodes(Kind.CLASS, class_ids)
    # The classes in shards first: their renames may go with the head (its conditions must
    # all hold); the others' (a class of the layout before: no shards to stamp) follow it.
    sharded = sorted(k["id"] for k in found if items.in_sharded_layout(ENROLMENT, k))
    followed = [*sharded, *sorted(set(class_ids) - set(sharded))]
    classes = found if held else []
    per_shard = await _few_at_a_time(roster_shards.counts(reads, Kind.CLASS, k) for k in classes)
    counted = [
        k.get("studentCount", 0) + sum(c or ()) for k, c in zip(classes, per_shard, strict=True)
    ]
    stamps_needed = sum(len(c) for c in per_shard if c is not None)
    if len(classes) + sum(counted) + stamps_needed > room:
        classes, per_shard = [], []  # their counts bound the copies from above: follow them
        held = False
    rosters = await _few_at_a_time(
        _students_of(reads, Kind.CLASS, k, c) for k, c in zip(classes, per_shard, strict=True)
    )
    renamed: list[Action] = []
    for k, students, shard_counts in zip(classes, rosters, per_shard, strict=True):
        if shard_counts is None:
            renamed.append(own(k["id"], ("eq", "studentCount", len(students))))
        else:  # the shards' counts as read fence the roster, and carry the new name
            renamed.append(own(k["id"]))
            renamed += roster_shards.stamps(
                Kind.CLASS, k["id"], {"teacherName": name}, counts=shard_counts
            )

    async def targets() -> list[list[Action]]:
        # Round k holds each student's k-th entry: a student in two of the teacher's classes
        # gets two updates, in two transactions, so a class it left meanwhile drops that
        # entry's copy only; there are as many rounds as the most of its classes one student is in.
        now = await _few_at_a_time(_roster(reads, Kind.CLASS, c) for c in class_ids)
        rounds: list[dict[str, list[str]]] = []
        taken: Counter[str] = Counter()
        for class_id, roster in zip(class_ids, now, strict=True):
            for sid in roster:
                if taken[sid] == len(rounds):
                    rounds.append({})
                rounds[taken[sid]].setdefault(class_id, []).append(sid)
                taken[sid] += 1
        return [entries(by_class) for by_class in rounds]

    count: Clause = ("eq", TEACHING.owner_count, len(class_ids))
    return Copies(
        # The classes first: links from then on copy the new name from them.
        units=[renamed, entries({k["id"]: r for k, r in zip(classes, rosters, strict=True)})],
        fences=[count],
        source={"name": name},
        first=[renaming(class_id) for class_id in followed],
        in_head=len(sharded),
        follow_fences=[count],
        targets=targets,
        held=held,
    )


async def plan(
    reads: Reads,
    kind: Kind,
    node: Item,
    changes: Mapping[str, Any],
    *,
    moving: bool = False,
    room: int = MAX_ACTIONS - 1,
) -> Copies:
    """The copies a write of `changes` to `node` must bring along: none if it sends no
    copied field; else every copy of the node's state after the write. `moving`: a class
    changing teacher, whose write moves the teachers' entries itself (and drops the class's
    `HANDING_OVER` mark). `room`: the actions one transaction has left for copies; a class
    or a sport whose count of students says they cannot fit is planned only to be followed,
    so its roster is read once, not twice."""
    if not copies_needed(kind, changes):
        return Copies()
    state = {**node, **changes}
    # A class still marked by a handover that was never made (its to-do not finished yet):
    # a write that rewrites every entry drops the mark with them, as the finisher would.
    if moving or _unmarks(kind, node):
        state.pop(HANDING_OVER, None)
    if kind is Kind.CLASS:
        teaching = not moving
        per_shard = await roster_shards.counts(reads, kind, state)
        count = state.get("studentCount", 0) + sum(per_shard or ())
        return await _held_if_still(
            lambda held: _class_copies(
                reads,
                state,
                teaching=teaching,
                copies_teacher="teacherName" in changes,
                held=held,
                per_shard=per_shard,
            ),
            count + teaching + len(per_shard or ()) <= room,
        )
    if kind is Kind.SPORT:
        per_shard = await roster_shards.counts(reads, kind, state)
        count = state.get("studentCount", 0) + sum(per_shard or ())
        return await _held_if_still(
            lambda held: _sport_copies(reads, state, held, per_shard),
            count + len(per_shard or ()) <= room,
        )
    return await copies_for(reads, kind, state, room=room)


async def update_node(
    reads: Reads,
    kind: Kind,
    node: Item,
    changes: Mapping[str, Any],
    head: Sequence[Action] = (),
    *,
    moving: bool = False,
    guard: Sequence[Clause] = (),
) -> None:
    """Write `changes` to `node` (as read; the caller has checked `expectedVersion`), with
    `head` and every copy the changes need: how each `update*` mutation writes. `guard`:
    conditions the node must meet when the write commits (else Stale: read again).
    `moving`: a class handed to another teacher (`changes["teacherId"]`)."""
    room = MAX_ACTIONS - 1 - len(head)  # besides the node's own write and the head
    copies = await plan(reads, kind, node, changes, moving=moving, room=room)
    await write(reads.table, kind, node, changes, head, copies, guard, moving=moving)


def _unmarks(kind: Kind, node: Mapping[str, Any]) -> bool:
    """Whether a write of `node` that copies must drop a handover's mark (`plan`)."""
    return kind is Kind.CLASS and HANDING_OVER in node


async def write(
    table: Table,
    kind: Kind,
    node: Item,
    changes: Mapping[str, Any],
    head: Sequence[Action],
    copies: Copies,
    guard: Sequence[Clause] = (),
    *,
    moving: bool = False,
) -> None:
    """Apply a node write and its copies: atomically when they fit one transaction and what
    they were planned from holds still; else followed.

    Followed, the write claims its copies with a token and commits with the nodes they are
    read from, and the node's to-do; the copies then follow in chunks, read after that
    commit, each chunk checking the claim. A copy whose target left meanwhile (an
    unenrolled student) is dropped, not a reason to start over: the write never races the
    traffic it renames under. When the node's copied fields change under the chunks (a
    class's teacher renamed), the copies are planned again from the node and continue under
    a new claim (the node's own write has committed: it is not redone). When DynamoDB stops
    answering once the node is saved, the node is named in `table.unfinished` and the write
    returns: its to-do is finished later (`finisher.py`). A class `moving` to another
    teacher revokes its old teacher's copies first (`_revoke`).
    """
    rest = copies.actions()
    copying = bool(rest) or copies.targets is not None
    remove = (HANDING_OVER,) if moving or (copying and _unmarks(kind, node)) else ()
    guard = [*guard, *layout_fence(kind, node)]
    held = copies.held
    if held:
        fences = [*guard, *copies.fences]
        write_ = NodeWrite.versioned(kind, node, changes, copies, fences, remove)
        # A class's roster shards take its copied fields (and fence their counts).
        stamps = class_stamps(kind, node, write_.assign, remove, copies.shard_counts)
        held = 1 + len(head) + len(stamps) + len(rest) <= MAX_ACTIONS
    if held:
        try:
            await transact(table, [write_.action(None, bool(rest)), *head, *stamps, *rest])
            return
        except Stale:
            if copies.targets is None:
                raise
            # What the plan read moved (an enrolment in the renamed class): follow instead.
            # If the node itself moved, the followed write's own guards say so.
    assert copies.targets is not None
    fences = [*guard, *copies.follow_fences]
    if moving:
        token = await _revoke(table, node, changes["teacherId"], guard)
        fences.append(("eq", CLAIM, token))  # no other write came between
    else:
        token = new_token()
    write_ = NodeWrite.versioned(kind, node, changes, copies, fences, remove)
    start = [write_.action(token, True), todos.put_todo(kind, node["id"], token), *head]
    start += class_stamps(kind, node, write_.assign, remove)  # with the class, or not at all
    groups = list(copies.first)
    in_head = len(groups) if copies.in_head is None else copies.in_head
    while in_head and len(start) + len(groups[0]) <= MAX_ACTIONS:
        start += groups.pop(0)  # whole groups only: a class with its stamps, or not yet
        in_head -= 1
    await transact(table, start)  # Stale: the caller reads again
    try:
        await _follow(table, kind, node["id"], token, copies, groups)
    except Unavailable:
        table.unfinished.append(f"{kind.lower()} {node['id']}")


async def _revoke(table: Table, klass: Item, teacher_id: str, guard: Sequence[Clause]) -> str:
    """Before a class whose copies follow changes teacher: mark it `HANDING_OVER` (claimed,
    with its to-do), then mark every student's entry, which then grants no teacher. Returns
    the claim's token; Stale when another write of the class came between (read again)."""
    token = new_token()
    key = key_of(klass)
    mark = update(
        key,
        ("eq", "version", klass["version"]),
        *guard,
        assign={CLAIM: token, HANDING_OVER: teacher_id},
        on_fail=STALE,
    )
    stamps = class_stamps(Kind.CLASS, klass, {HANDING_OVER: teacher_id})
    await transact(table, [mark, todos.put_todo(Kind.CLASS, klass["id"], token), *stamps])
    marked = {**klass, HANDING_OVER: teacher_id}
    copies = await _class_copies(Reads(table), marked, teaching=False, held=False)
    assert copies.targets is not None
    rounds = await copies.targets()
    guard = [("eq", CLAIM, token), *copies.holds()]
    if not await _each_round(table, key, guard, rounds, token, label="r"):
        raise Stale()
    return token


async def _each_round(
    table: Table,
    key: Key,
    guard: Sequence[Clause],
    rounds: list[list[Action]],
    token: str,
    done: Action | None = None,
    label: str = "c",
) -> bool:
    """Apply the rounds in order while the guard holds. `done`: the node's to-do's delete,
    which the last transaction sends as it releases the claim (a round-trip fewer than
    releasing it on its own). `label` tells this claim's rounds from its other ones."""
    rounds = [actions for actions in rounds if actions] or [[]]
    for n, actions in enumerate(rounds):
        last = done is not None and n == len(rounds) - 1
        release = [CLAIM] if last else []
        if last and done is not None:
            actions = [*actions, done]  # in the last chunk, with the release
        if not await transact_each(table, key, guard, actions, token, f"{label}{n}", release):
            return False
    return True


async def _each_group(
    table: Table, key: Key, guard: Sequence[Clause], groups: list[list[Action]], token: str
) -> bool:
    """Apply the groups while the guard holds, as many whole groups a transaction as fit (a
    group is never split across two); False when the guard fails."""
    chunks: list[list[Action]] = []
    for group in groups:
        if not chunks or len(chunks[-1]) + len(group) > MAX_ACTIONS - 1:  # the guard's check
            chunks.append([])
        chunks[-1] += group
    for n, chunk in enumerate(chunks):
        if not await transact_each(table, key, guard, chunk, token, f"f{n}"):
            return False
    return True


async def _follow(
    table: Table,
    kind: Kind,
    id_: str,
    token: str,
    copies: Copies,
    pending_first: list[list[Action]],
) -> None:
    """Apply the rest of a claimed write's copies: `pending_first`'s groups, then its
    targets."""
    key = keys.node(kind, id_)
    while True:
        assert copies.targets is not None
        guard = [("eq", CLAIM, token), *copies.holds()]
        if await _each_group(table, key, guard, pending_first, token) and (
            await _each_round(
                table, key, guard, await copies.targets(), token, todos.done(kind, id_)
            )
        ):
            return  # every copy written, and the claim released with the last of them
        # The guard failed: a later write took the claim over (its copies win), or a copied
        # field changed under ours (a class's teacher was renamed): plan again.
        taken = await take_over(table, kind, id_, token)
        if taken is None:
            return
        token, copies = taken
        pending_first = copies.first


async def take_over(
    table: Table, kind: Kind, id_: str, claim: str | None
) -> tuple[str, Copies] | None:
    """Claim a node's copies from the holder of `claim` (None: from no one), planned again
    from what the node holds now; None when another write took them over meanwhile (its
    copies win) or the node is gone. A class marked `HANDING_OVER` that was not handed over
    is unmarked, and so are its entries: the handover answered UNAVAILABLE."""
    reads = Reads(table)
    cost = 0
    while True:
        try:
            node = await reads.node(kind, id_)
        except NotFound:
            return None  # deleted, with its copies
        if node.get(CLAIM) != claim:
            if claim is not None and CLAIM not in node:
                # A write that fit one transaction took the claim over and wrote every copy:
                # our to-do has nothing left to do.
                await todos.drop_if_idle(table, kind, id_, claim)
            return None
        state = {k: v for k, v in node.items() if k != HANDING_OVER}
        copies = await copies_for(reads, kind, state, held=False)
        token = new_token()
        held: Clause = ("lacks", CLAIM) if claim is None else ("eq", CLAIM, claim)
        unmark = [HANDING_OVER] if HANDING_OVER in node else []
        take = update(
            keys.node(kind, id_),
            held,
            *copies.follow_fences,
            *copies.holds(skip={HANDING_OVER}),
            *layout_fence(kind, node),
            assign={CLAIM: token},
            remove=unmark,
            on_fail=STALE,
        )
        stamps = class_stamps(kind, node, {}, unmark)
        try:
            await transact(table, [take, todos.put_todo(kind, id_, token), *stamps])
        except Stale:
            # On the request's retries: the write's own "read again" loop shares the count.
            cost = await table.retries.pause(Failure.CONTENTION, UNFINISHED)
            continue
        table.retries.recovered(cost)
        return token, copies


async def finish(table: Table, kind: Kind, id_: str, claim: str | None) -> bool:
    """Complete the copies of a node whose write left them claimed by `claim` (the
    finisher's job): True when they are written, False when another write holds them."""
    taken = await take_over(table, kind, id_, claim)
    if taken is None:
        return False
    token, copies = taken
    await _follow(table, kind, id_, token, copies, copies.first)
    return True
