"""Item shapes: what a node, a home or an edge item holds, and which fields edges copy.

Keys come from `graph_api.keys`; this module decides the attributes. The copy tables
(`EdgeType.owner_copies` / `target_copies`) are the single statement of the denormalization:
item builders use them, readers use them to see an edge as the node at either end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graph_api import keys
from graph_api.keys import Kind
from graph_api.store.codec import Item

TYPE = "type"


def node_item(kind: Kind, id_: str, **attributes: Any) -> Item:
    item: Item = {**keys.node(kind, id_).as_item(), TYPE: kind.lower(), "id": id_, "version": 1}
    # Students are not listed in a catalog: one partition of every student would be the
    # hot key that schema/table.md warns about. Teachers, classes and sports are small.
    if kind is not Kind.STUDENT:
        item.update(keys.node_catalog(kind, id_).as_item())
    item.update(attributes)
    return item


# Counters of owned edges (`edgeCount`, `classCount`, `studentCount`) move in the same
# transaction as the edges. Deletes and renames condition on them, which fences out an edge
# written between our read of a node's edges and our write.


def student(id_: str, name: str, email: str) -> Item:
    return node_item(Kind.STUDENT, id_, name=name, email=email, edgeCount=0)


def email_guard(student_item: Item) -> Item:
    return {
        **keys.email_guard(student_item["email"]).as_item(),
        TYPE: "email",
        "studentId": student_item["id"],
    }


def teacher(id_: str, name: str) -> Item:
    return node_item(Kind.TEACHER, id_, name=name, classCount=0)


def school_class(id_: str, subject: str, teacher_item: Item) -> Item:
    return node_item(
        Kind.CLASS,
        id_,
        subject=subject,
        teacherId=teacher_item["id"],
        teacherName=teacher_item["name"],  # copy: Class.teacher { name } without a read
        studentCount=0,
    )


def sport(id_: str, name: str, coach: str | None) -> Item:
    return node_item(Kind.SPORT, id_, name=name, coach=coach, studentCount=0)


def home(student_item: Item, country: str, state: str, city: str, street: str | None) -> Item:
    sid = student_item["id"]
    return {
        **keys.home(sid).as_item(),
        **keys.home_location(sid, country, state, city).as_item(),
        TYPE: "home",
        "studentId": sid,
        "studentName": student_item["name"],  # copy: location lists show names
        "country": country,
        "state": state,
        "city": city,
        "street": street,
    }


@dataclass(frozen=True)
class EdgeType:
    """A relation stored in its owner's partition and inverted through GSI1.

    The copy maps say edge attribute -> node attribute, for each end.
    """

    name: str
    owner: Kind
    target: Kind
    owner_copies: Mapping[str, str]
    target_copies: Mapping[str, str]
    owner_count: str  # the owner's counter of such edges
    target_count: str | None  # the target's, if it keeps one

    def item(self, owner_item: Item, target_item: Item) -> Item:
        key, inverse = keys.edge(self.owner, owner_item["id"], self.target, target_item["id"])
        item: Item = {**key.as_item(), **inverse.as_item(), TYPE: self.name}
        item[f"{self.owner.lower()}Id"] = owner_item["id"]
        item[f"{self.target.lower()}Id"] = target_item["id"]
        item.update({attr: owner_item[src] for attr, src in self.owner_copies.items()})
        item.update({attr: target_item[src] for attr, src in self.target_copies.items()})
        return item

    def owner_view(self, edge: Item) -> tuple[str, dict[str, Any]]:
        """The owner node as far as the edge knows it: (id, known attributes)."""
        return edge[f"{self.owner.lower()}Id"], {
            src: edge[attr] for attr, src in self.owner_copies.items()
        }

    def target_view(self, edge: Item) -> tuple[str, dict[str, Any]]:
        return edge[f"{self.target.lower()}Id"], {
            src: edge[attr] for attr, src in self.target_copies.items()
        }


_CLASS_COPIES = {"subject": "subject", "teacherId": "teacherId", "teacherName": "teacherName"}

ENROLMENT = EdgeType(
    "enrolment",
    Kind.STUDENT,
    Kind.CLASS,
    {"studentName": "name"},
    _CLASS_COPIES,
    owner_count="edgeCount",
    target_count="studentCount",
)
MEMBERSHIP = EdgeType(
    "membership",
    Kind.STUDENT,
    Kind.SPORT,
    {"studentName": "name"},
    {"sportName": "name"},
    owner_count="edgeCount",
    target_count="studentCount",
)
# A class has one teacher (its `teacherId`), so it keeps no count of teaching edges.
TEACHING = EdgeType(
    "teaching",
    Kind.TEACHER,
    Kind.CLASS,
    {},
    _CLASS_COPIES,
    owner_count="classCount",
    target_count=None,
)
EDGE_TYPES = (ENROLMENT, MEMBERSHIP, TEACHING)


def home_view(item: Item) -> tuple[str, dict[str, Any]]:
    """The student a home item belongs to, as far as the home knows it."""
    return item["studentId"], {"name": item["studentName"]}
