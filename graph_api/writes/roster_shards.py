"""A class's roster count in shards, each shard stamped with the fields enrolments copy, so
that an enrolment writes no class item and still copies what the class holds. A sport's
the same (its memberships copy its name): below, "class" stands for both.

An enrolment copies its class's subject, teacher id and name and handover mark into the
student's entry (`items.ENROLMENT`), and a rename must reach every copy. The layout:

- A class's `studentCount` is the sum of `keys.ROSTER_SHARDS` counter items
  (`keys.roster_shards`); the enrolment of student `s` moves the shard `s` picks
  (`keys.roster_shard`), with `ADD`, as catalogs' shards move. A class of the layout before
  keeps its count on its item (`items.in_sharded_layout`) until `graph-api migrate` moves it
  into shards; readers sum both, and its writes condition on still having it.
- Every shard holds a copy of the class's copied fields (`items.stamped`), made with the
  class and written again by every write that changes one of them on the class, in that
  write's transaction (`stamps`): the class's own update (propagation's head), a
  handover's mark and its undoing, a teacher's rename of its classes.
- A link conditions its shard, not the class, on existing (a deleted class's shards go
  with it) and on holding the values it copied and the caller's guard (`join`).

Why every copy stays exact. A link L and a write W of a class's copied fields both write
L's shard, so they are ordered there. W first: L's condition fails (its shard holds W's
values) and L reads the class again, copying W's values. L first: L's edge is in the class's
partition before W commits. A followed W reads the roster after its head committed
(strongly consistent), so it sees L's edge and copies over its entry; a held W read the
roster before, but conditions each shard's stamp on the count it saw (`stamps(counts=)`),
so an L between its read and its commit moved a count and W plans again. The shards and
the class change in one transaction, always, so they never disagree (`graph-api check`
verifies): a followed rename of a teacher of many classes renames each class with its
shards' stamps, the head holding as many whole classes as fit and the chunks the others
(`propagation.write`; a stamp and its class's rename are both conditioned on the class
being still the teacher's, so they are dropped together). A class renamed in one
transaction and stamped in a later one (as this once was) refused every link in between:
the link read the new name, the shard held the old one, and it read again until it gave
up. A link that copied the old name from a class not yet renamed committed before that
class's transaction; the rename reads the rosters after its last class, so it is copied
over. A class's delete conditions each shard on the count it read and deletes it, so a
link either moved a count first (the delete reads again: CONFLICT) or finds no shard
(NOT_FOUND).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graph_api.model import items, keys
from graph_api.model.items import Relation
from graph_api.model.keys import Key, Kind
from graph_api.store import transactions as tx
from graph_api.store.transactions import EXISTS, STALE, Action, Clause, Stale
from graph_api.writes.reads import Reads


def shards(kind: Kind, id_: str) -> list[Key]:
    """Every shard of a node's roster counter, in shard order."""
    return keys.roster_shards(kind, id_)


def shard_of(relation: Relation, target_id: str, owner_id: str) -> Key:
    """The shard the relation of `owner_id` with `target_id` moves: the same for its life."""
    return keys.roster_shard(relation.target, target_id, owner_id)


def made(kind: Kind, target_item: Mapping[str, Any]) -> list[Action]:
    """A new class's (sport's) shards, each counting 0 and stamped. Plain puts: the node's
    own put is conditioned on its absence, and a dead node's leftovers are overwritten."""
    keys_ = shards(kind, target_item["id"])
    return [tx.put(items.roster_shard(key, kind, target_item, 0)) for key in keys_]


def fence(count: int) -> Clause:
    """A shard still counts `count` (0: or it holds no count)."""
    return ("zero_or_missing", items.COUNT) if count == 0 else ("eq", items.COUNT, count)


def stamps(
    kind: Kind,
    class_id: str,
    assign: Mapping[str, Any],
    remove: Sequence[str] = (),
    counts: Sequence[int] | None = None,
    clauses: Sequence[Clause] = (),
) -> list[Action]:
    """What a write of `assign` / `remove` to class `class_id` writes on its shards, in its
    transaction: the copied fields among them (nothing when none is, and no `counts`).
    `counts`: each shard's count as the write's plan read it, which must still hold (a held
    rename's fence). `clauses`: conditions of their own (a followed teacher's rename sends
    the stamps apart from the classes). Else unconditioned: only a class known to have
    shards is stamped, by a transaction whose update of the class is conditioned on it."""
    stamped = items.stamp_fields(kind)
    fields = {f: v for f, v in assign.items() if f in stamped}
    dropped = [f for f in remove if f in stamped]
    if not fields and not dropped and counts is None:
        return []
    actions = []
    for n, key in enumerate(shards(kind, class_id)):
        held = [*clauses, fence(counts[n])] if counts is not None else list(clauses)
        if not fields and not dropped:
            actions.append(tx.check(key, *held, on_fail=STALE))
            continue
        actions.append(tx.update(key, *held, assign=fields, remove=dropped, on_fail=STALE))
    return actions


def join(
    relation: Relation, target_item: Mapping[str, Any], owner_id: str, guard: Sequence[Clause]
) -> Action:
    """A link's move of its shard: +1 if the shard exists and still holds what the link
    copied from the class (`guard`: the caller's conditions on the class, which the shard
    carries too). Else STALE: read the class again."""
    fresh: list[Clause] = [
        ("lacks", src) if value is None else ("eq", src, value)
        for src, value in relation.copied_from(target_item).items()
    ]
    key = shard_of(relation, target_item["id"], owner_id)
    add = {items.COUNT: 1, items.MOVES: 1}
    return tx.update(key, EXISTS, ("has", items.COUNT), *guard, *fresh, add=add, on_fail=STALE)


def leave(
    relation: Relation, target_id: str, owner_id: str, guard: Sequence[Clause] = ()
) -> Action:
    """An unlink's move of its shard: -1, if the shard is one of a sharded roster (it has a
    count) and meets `guard`; else STALE (the class is of the layout before, or the guard
    failed: read it to say which)."""
    key = shard_of(relation, target_id, owner_id)
    add = {items.COUNT: -1, items.MOVES: 1}
    return tx.update(key, ("has", items.COUNT), *guard, add=add, on_fail=STALE)


async def counts(reads: Reads, kind: Kind, node: Mapping[str, Any]) -> list[int] | None:
    """Each shard's count of a sharded class, read strongly consistent (None: a node whose
    count is on its item). A shard missing: the class was deleted since it was read."""
    relation = items.SHARDED.get(kind)
    if relation is None or not items.in_sharded_layout(relation, node):
        return None
    wanted = shards(kind, node["id"])
    found = await reads.table.get_many(wanted, consistent=True)
    if len(found) != len(wanted):
        raise Stale()
    return [int(found[k].get(items.COUNT, 0)) for k in wanted]


async def student_count(reads: Reads, kind: Kind, node: Mapping[str, Any]) -> int:
    """A class's or a sport's count of students, wherever its layout keeps it."""
    per_shard = await counts(reads, kind, node)
    return int(node.get("studentCount", 0)) + sum(per_shard or ())
