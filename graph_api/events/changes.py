"""What crosses the event pipeline: item changes read from the stream, and events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from graph_api.store.codec import Item, decode

ChangeKind = Literal["INSERT", "MODIFY", "REMOVE"]


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where a record sits in the stream: its shard and DynamoDB's sequence number (digits,
    increasing within a shard). Subscribers drop an event at or before the last position
    they saw of its shard, so a stream reader that takes over and reads a record again
    never delivers it twice."""

    shard: str
    sequence: int

    def as_json(self) -> list[Any]:
        return [self.shard, str(self.sequence)]

    @classmethod
    def from_json(cls, value: list[Any]) -> Position:
        return cls(str(value[0]), int(value[1]))


@dataclass(frozen=True, slots=True)
class Change:
    """One item written, as a stream record (NEW_AND_OLD_IMAGES) tells it."""

    position: Position
    kind: ChangeKind
    keys: Item
    old: Item | None  # the item before (None on INSERT)
    new: Item | None  # the item after (None on REMOVE)

    @classmethod
    def from_record(cls, shard: str, record: dict[str, Any]) -> Change:
        """A change from a DynamoDB Streams `GetRecords` record (wire form, typed values)."""
        body = record["dynamodb"]
        old, new = body.get("OldImage"), body.get("NewImage")
        return cls(
            Position(shard, int(body["SequenceNumber"])),
            record["eventName"],
            decode(body["Keys"]),
            decode(old) if old is not None else None,
            decode(new) if new is not None else None,
        )


@dataclass(frozen=True, slots=True)
class Event:
    """Something a subscriber hears: a node created, updated or deleted (`topic`
    `Student:stu-1`, ...), or a student joining or leaving a roster (`Roster:cls-1`)."""

    topic: str
    kind: str  # CREATED, UPDATED, DELETED; JOINED, LEFT
    node_id: str  # the node the topic names
    student_id: str | None  # the student who joined or left (roster and membership events)
    position: Position

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "kind": self.kind,
            "node": self.node_id,
            "student": self.student_id,
            "at": self.position.as_json(),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Event:
        return cls(
            value["topic"],
            value["kind"],
            value["node"],
            value.get("student"),
            Position.from_json(value["at"]),
        )
