"""Item changes -> events: what a change to the table means to a subscriber.

- A node item created or deleted is `CREATED` / `DELETED` on its topic (`Student:stu-1`).
- A node item whose own state changed (a field, an entry added to or removed from one of its
  maps) is `UPDATED`. Counters, the propagation claim and the version move with other
  changes and say nothing on their own: a class's `studentCount` moves with an enrolment
  edge, which is the event.
- An enrolment or membership edge item created or deleted is `JOINED` / `LEFT` on the
  class's (or sport's) topic, and an enrolment on the class's roster topic too.
- A change to copies only (a teacher's new name on its classes and on their students'
  entries, a student's new name on its edges) is `UPDATED` on the node that holds them, once
  per rename: a followed rename writes a student's entries one round at a time, and the
  change is announced by the round that leaves all the node's copies of that source equal.
  This needs no state, so a reader that takes over announces the same events.
- Anything else (email guards, the stream lease, to-dos) is no event.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from graph_api.events.changes import Change, Event, Position
from graph_api.model import items, keys
from graph_api.model.items import CLAIM, HANDING_OVER, RELATIONS
from graph_api.model.keys import Kind
from graph_api.store.codec import Item

CREATED, UPDATED, DELETED, JOINED, LEFT = "CREATED", "UPDATED", "DELETED", "JOINED", "LEFT"

_NODE_KINDS = {kind.value: kind for kind in Kind}
_EDGES = {relation.name: relation for relation in items.EDGE_TYPES}
# Attributes that never make an event by themselves: keys, counters, bookkeeping.
_QUIET = frozenset(
    {
        keys.PK,
        keys.SK,
        CLAIM,
        HANDING_OVER,  # a handover's first step: the event is its swap
        "version",
        *(r.owner_count for r in RELATIONS),
        *(r.target_count for r in RELATIONS if r.target_count),
    }
)
# A copied attribute whose source is the node its sibling attribute names (a class's or an
# entry's `teacherName` is its teacher's `name`); any other copy's source is the entry's node.
_SOURCED_BY = {"teacherName": "teacherId"}
Cell = tuple[str, str, Any]  # (source node, attribute, value)


def topic(kind: Kind | str, id_: str) -> str:
    """The topic of a node's events: `Student:stu-1`, `Class:cls-1`, ..."""
    return f"{Kind(kind).value.title()}:{id_}"


def roster_topic(class_id: str) -> str:
    """The topic of a class's enrolments (students joining or leaving)."""
    return f"Roster:{class_id}"


def derive(changes: Iterable[Change]) -> list[Event]:
    """The events of a batch of changes, in stream order."""
    return [event for change in changes for event in _events(change)]


def _events(change: Change) -> Iterator[Event]:
    pk, sk = str(change.keys.get(keys.PK, "")), str(change.keys.get(keys.SK, ""))
    image = change.new if change.new is not None else change.old
    if image is None:
        return
    if pk == sk and keys.kind_of(pk) in _NODE_KINDS:
        yield from _node_events(change, _NODE_KINDS[keys.kind_of(pk)], keys.id_of(pk))
    elif (relation := _EDGES.get(image.get(items.TYPE, ""))) is not None:
        yield from _edge_events(change, relation, image)


def _node_events(change: Change, kind: Kind, id_: str) -> Iterator[Event]:
    if change.kind == "INSERT":
        yield _event(topic(kind, id_), CREATED, id_, None, change.position)
    elif change.kind == "REMOVE":
        yield _event(topic(kind, id_), DELETED, id_, None, change.position)
    elif _announces(change.old or {}, change.new or {}, kind):
        yield _event(topic(kind, id_), UPDATED, id_, None, change.position)


def _edge_events(change: Change, relation: items.Relation, image: Item) -> Iterator[Event]:
    target_id = image[f"{relation.target.lower()}Id"]
    student_id = image[f"{relation.owner.lower()}Id"]
    at = change.position
    if change.kind == "MODIFY":  # only its copies can change: the student's name
        if _announces(change.old or {}, change.new or {}, None):
            yield _event(topic(relation.target, target_id), UPDATED, target_id, None, at)
        return
    kind = JOINED if change.kind == "INSERT" else LEFT
    yield _event(topic(relation.target, target_id), kind, target_id, student_id, at)
    if relation.target is Kind.CLASS:
        yield _event(roster_topic(target_id), kind, target_id, student_id, at)


def _event(topic_: str, kind: str, node: str, student: str | None, at: Position) -> Event:
    return Event(topic_, kind, node, student, at)


def _announces(old: Item, new: Item, kind: Kind | None) -> bool:
    """Whether a MODIFY is news: the node's own state changed, or a copy of one source
    reached its last copy on this item."""
    if _own_state(old, kind) != _own_state(new, kind):
        return True
    old_cells, new_cells = _cells(old, kind), _cells(new, kind)
    changed = {cell[:2] for place, cell in new_cells.items() if old_cells.get(place) != cell}
    if not changed:
        return False
    values: dict[tuple[str, str], set[Any]] = {}
    for source, attr, value in new_cells.values():
        values.setdefault((source, attr), set()).add(value)
    return all(len(values[pair]) == 1 for pair in changed)


def _maps(kind: Kind | None) -> dict[str, tuple[str, ...]]:
    """The owner's relation maps: field -> the entry attributes copied from elsewhere."""
    return {r.field: r.entry for r in RELATIONS if kind is not None and r.owner is kind}


def _own_state(item: Item, kind: Kind | None) -> dict[str, Any]:
    """The item without what never announces itself: quiet attributes, copies, and the
    copied values inside its maps (an entry's presence is state, its copies are not)."""
    maps = _maps(kind)
    state: dict[str, Any] = {}
    for name, value in item.items():
        if name in _QUIET or _is_copy(name, kind):
            continue
        state[name] = sorted(value) if name in maps and isinstance(value, dict) else value
    return state


def _is_copy(name: str, kind: Kind | None) -> bool:
    if kind is Kind.CLASS:
        return name in _SOURCED_BY
    if kind is None:  # an edge item: what its relation's roster copies
        return any(name in (r.roster or {}) for r in items.EDGE_TYPES)
    return False


def _cells(item: Item, kind: Kind | None) -> dict[tuple[str, ...], Cell]:
    """Every copied value the item holds, by where it sits, with the node it came from."""
    cells: dict[tuple[str, ...], Cell] = {}
    for field, attrs in _maps(kind).items():
        target = next(r.target for r in RELATIONS if r.owner is kind and r.field == field)
        for target_id, entry in (item.get(field) or {}).items():
            entry_source = topic(target, target_id)
            for attr in attrs:
                cell = (_source(entry, attr, entry_source), attr, _key(entry.get(attr)))
                cells[(field, target_id, attr)] = cell
    for name, value in item.items():
        if _is_copy(name, kind):
            cells[(name,)] = (_source(item, name, ""), name, _key(value))
    return cells


def _source(holder: Item, attr: str, default: str) -> str:
    sibling = _SOURCED_BY.get(attr)
    return f"{sibling}={holder.get(sibling)}" if sibling else default


def _key(value: Any) -> Any:
    """A copied value as a set member (copies are scalars; anything else by its text)."""
    return value if isinstance(value, str | int | bool | type(None)) else repr(value)
