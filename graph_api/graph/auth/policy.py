"""Who may read and write what: the policy, as data, and the one function that reads it.

In the spirit of Amplify's `allow.groups()/allow.owner()` and Hasura's permission tables:
each mutation and each protected field lists the roles that may, and under which owner
condition (`Owner`). A role missing from an entry may not; a role a token claims that is not
a `Role` grants nothing. Every field not in `READS` is public: anyone may read it, unless
`GRAPH_API_AUTH_READS=true` makes every read need a valid token.

Owner conditions are decided on data the request already holds, never by an extra read: a
student item carries its classes and each class's `teacherId`, so "the caller teaches this
student" is a look at the item being resolved; for a write, a condition the node must still
meet when the transaction commits is a `ConditionExpression` in that transaction
(`writes/`), so a class reassigned meanwhile refuses the old teacher's write.

No sequence of a caller's own allowed writes may widen what that caller reads: a write that
would make the caller an owner of someone else's personal data (an enrolment makes the class's
teacher the student's) is not that caller's to make. A teacher takes students out of their
classes but does not put them in: enrolling is staff's, or the student's own act.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from graph_api.model.items import HANDING_OVER

if TYPE_CHECKING:
    from graph_api.graph.auth.tokens import Principal


class Role(StrEnum):
    ADMIN = "admin"  # school staff
    TEACHER = "teacher"  # the teacher node in the token's teacher claim
    STUDENT = "student"  # the student node in the token's student claim
    GUARDIAN = "guardian"  # responsible for the students in the token's guardian claim
    # No valid token, on a server with sign-in configured or the embedded demo's dev tokens.
    ANONYMOUS = "anonymous"
    # No sign-in configured at all (a remote table without it; the embedded demo with
    # GRAPH_API_OPEN_WRITES=true): the API is open as it was before roles, and `serve`
    # warns about it on a remote table.
    OPEN = "open"


# Roles a token may claim; `anonymous` and `open` are what no token means.
CLAIMABLE = frozenset({Role.ADMIN, Role.TEACHER, Role.STUDENT, Role.GUARDIAN})


class Owner(StrEnum):
    ANY = "any"  # no condition
    SELF = "self"  # the node is the caller's own (a student's or a teacher's id)
    TEACHES = "teaches"  # a class the caller teaches; a student in a class the caller teaches
    GUARDS = "guards"  # a student in the guardian's claim


Grant = Mapping[Role, Owner]

PERSONAL: Grant = {
    Role.ADMIN: Owner.ANY,
    Role.TEACHER: Owner.TEACHES,
    Role.STUDENT: Owner.SELF,
    Role.GUARDIAN: Owner.GUARDS,
}

# Protected fields: everything else is public. `GRAPH_API_PUBLIC_PERSONAL_DATA=true` (the
# embedded backend's default, its school being generated) serves these to anyone.
READS: dict[str, Grant] = {
    "Student.email": PERSONAL,
    "Home.street": PERSONAL,
}

_STAFF: Grant = {Role.ADMIN: Owner.ANY}

# Mutations, by their GraphQL names, and arguments a mutation's grant does not cover, as
# "mutation.argument" (checked, before any read, only when the argument is sent). `Role.OPEN`
# may run every one (`may_write`); it reads protected fields only where they are public.
WRITES: dict[str, Grant] = {
    "createStudent": _STAFF,
    "updateStudent": {Role.ADMIN: Owner.ANY, Role.STUDENT: Owner.SELF},
    # Addresses are the school's to issue: were a student's own to change, "taken" would tell
    # any student whether an address is registered (ALREADY_EXISTS names no owner to staff).
    "updateStudent.email": _STAFF,
    "deleteStudent": _STAFF,
    "setHome": {Role.ADMIN: Owner.ANY, Role.STUDENT: Owner.SELF},
    "createTeacher": _STAFF,
    "updateTeacher": {Role.ADMIN: Owner.ANY, Role.TEACHER: Owner.SELF},
    "deleteTeacher": _STAFF,
    # SELF: the new class's `teacherId` is the caller.
    "createClass": {Role.ADMIN: Owner.ANY, Role.TEACHER: Owner.SELF},
    # TEACHES: the class's `teacherId` is the caller when the write commits; handing the
    # class to another teacher is staff's.
    "updateClass": {Role.ADMIN: Owner.ANY, Role.TEACHER: Owner.TEACHES},
    "deleteClass": _STAFF,
    "createSport": _STAFF,
    "updateSport": _STAFF,
    "deleteSport": _STAFF,
    # An enrolment makes the class's teacher read the student's personal fields: it is
    # staff's, or the student's own (SELF: the student is the caller), never the teacher's.
    "enrollStudent": {Role.ADMIN: Owner.ANY, Role.STUDENT: Owner.SELF},
    # Taking a student out only narrows what the class's teacher reads.
    "unenrollStudent": {
        Role.ADMIN: Owner.ANY,
        Role.TEACHER: Owner.TEACHES,
        Role.STUDENT: Owner.SELF,
    },
    # SELF: the student is the caller.
    "joinSport": {Role.ADMIN: Owner.ANY, Role.STUDENT: Owner.SELF},
    "leaveSport": {Role.ADMIN: Owner.ANY, Role.STUDENT: Owner.SELF},
}


@dataclass(frozen=True, slots=True)
class Budget:
    """A caller's token bucket of cost points (`graph/engine/budgets.py`): it holds at most
    `maximum` and refills at `restore_rate` points a second. A point is what the static
    cost counts (a node), and an operation is charged at most its bucket's maximum."""

    maximum: int
    restore_rate: int


# Per role; a caller with several roles gets the largest. `GRAPH_API_RATE_LIMITS` overrides
# rows (`role=maximum/rate`) or turns the limits off. Anonymous callers hold one bucket per
# client address; the anonymous maximum is GRAPH_API_MAX_COST's default, so the costliest
# query runs from a full bucket, and a second one back to back waits for the refill.
BUDGETS: dict[Role, Budget] = {
    Role.ADMIN: Budget(1_000_000, 20_000),
    Role.TEACHER: Budget(200_000, 4_000),
    Role.STUDENT: Budget(200_000, 4_000),
    Role.GUARDIAN: Budget(200_000, 4_000),
    Role.ANONYMOUS: Budget(50_000, 1_000),
    # No sign-in configured (a development server): every client, by address, as staff.
    Role.OPEN: Budget(1_000_000, 20_000),
}


def grant(principal: Principal, entry: Grant) -> frozenset[Owner]:
    """The owner conditions under which `principal` may, by any of its roles: empty when it
    may not at all; containing `Owner.ANY` when it may unconditionally."""
    return frozenset(entry[role] for role in principal.roles if role in entry)


def may_write(principal: Principal, mutation: str) -> frozenset[Owner]:
    """`grant` for a mutation; a mutation the policy does not name is refused to all but
    `Role.OPEN` (a new mutation is closed until the table says who may)."""
    if Role.OPEN in principal.roles:
        return frozenset({Owner.ANY})
    return grant(principal, WRITES.get(mutation, {}))


def teaches(principal: Principal, node: Mapping[str, Any]) -> bool:
    """Whether the caller teaches this class item, or a class this student item carries."""
    teacher = principal.teacher_id
    if teacher is None:
        return False
    if "teacherId" in node:  # a class
        return bool(node["teacherId"] == teacher)
    classes = node.get("classes") or {}
    # An entry of a class being handed over (`HANDING_OVER`) grants no teacher: the old
    # one loses the student before the handover answers, the new one gains it as its
    # entry is rewritten.
    return any(
        entry.get("teacherId") == teacher and HANDING_OVER not in entry
        for entry in classes.values()
    )


def holds(owner: Owner, principal: Principal, node: Mapping[str, Any], kind: str) -> bool:
    """Whether `node` (an item as read, of the GraphQL type `kind`: "Student", "Teacher",
    "Class") meets `owner`. Ids are unique only within a type: SELF compares the caller's id
    of that type alone, so a teacher's id never opens a student who shares it."""
    node_id = node.get("id")
    if owner is Owner.ANY:
        return True
    if owner is Owner.SELF:
        own = {"Student": principal.student_id, "Teacher": principal.teacher_id}.get(kind)
        return node_id is not None and node_id == own
    if owner is Owner.TEACHES:
        return teaches(principal, node)
    if owner is Owner.GUARDS:
        return kind == "Student" and node_id is not None and node_id in principal.students
    return False


# The node a protected field is decided on, by the field's type: a home is its student's.
_NODE_OF = {"Home": "Student"}


def may_read(principal: Principal, field: str, node: Mapping[str, Any]) -> bool:
    """Whether `principal` may read the protected `field` ("Student.email") of `node`, the
    item it is resolved from (a `Home`'s is its student). Fails closed: a rule that cannot
    be decided on the item (an error, a missing attribute) refuses."""
    kind = field.partition(".")[0]
    kind = _NODE_OF.get(kind, kind)
    try:
        return any(holds(owner, principal, node, kind) for owner in grant(principal, READS[field]))
    except Exception:
        return False
