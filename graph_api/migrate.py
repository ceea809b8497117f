"""`graph-api migrate` (to come): rewriting a table of the old layout (before issue 12) into
the new one. First, the old layout it recognizes, which `graph-api check` reports too."""

from __future__ import annotations

from graph_api import items, keys
from graph_api.items import ENROLMENT, MEMBERSHIP
from graph_api.keys import PK
from graph_api.store.codec import Item

# -- The legacy layout: what migrate (and check, to point at migrate) must recognize --------
#
# Before issue 12 the table held, beside today's nodes and email guards:
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
