"""A mutation's gate: whether the caller may run it on the nodes its arguments name, decided
on the token and the arguments, before any read (the policy is `graph/auth/policy.py`'s data).

What cannot be decided on the arguments, "a class the caller teaches", comes back from
`authorize_guarded` as a `Guard` the writer puts in its own transaction as a condition on
the class item, and checks on the item it read: a refusal is FORBIDDEN and writes nothing,
and a class handed to another teacher between the read and the write makes the transaction
fail and the write read again (and refuse). `authorize`, for the writers that apply no
guard, refuses a caller whose only grant is such a condition: no guard can be dropped.
"""

from __future__ import annotations

from graph_api.errors import Forbidden
from graph_api.graph.auth import policy
from graph_api.graph.auth.policy import Owner
from graph_api.graph.auth.tokens import Principal
from graph_api.graph.engine.context import Info
from graph_api.writes.guards import Guard


def _refused(mutation: str, why: str) -> Forbidden:
    # Names the rule, never an argument's value: a message may not echo what the caller sent
    # (an email) or hold anything the caller may not read. An argument's rule
    # ("updateStudent.email") names the argument as the error's field.
    argument = mutation.partition(".")[2]
    return Forbidden(f"{mutation}: {why}", **({"field": argument} if argument else {}))


def authorize(
    info: Info,
    mutation: str,
    *,
    student: str | None = None,
    teacher: str | None = None,
) -> None:
    """Raise FORBIDDEN unless the caller may run `mutation` (its GraphQL name, or
    "mutation.argument" for an argument's own rule) as it is.

    `student` / `teacher`: the id the mutation writes as that kind of node, for `Owner.SELF`
    (the caller's own). A caller whose only grant is `Owner.TEACHES` is refused: this
    mutation's writer applies no guard, so the condition would go unchecked (fail closed);
    a writer that applies one calls `authorize_guarded`. Fails closed: an error inside a
    rule is a refusal."""
    if _decide(info, mutation, student, teacher) is not None:
        raise _refused(mutation, "allowed only on a class the caller teaches: not checked here")


def authorize_guarded(
    info: Info,
    mutation: str,
    *,
    student: str | None = None,
    teacher: str | None = None,
) -> Guard | None:
    """`authorize`, for a mutation whose writer applies a `Guard`: the guard it must apply
    for `Owner.TEACHES` (the class must be the caller's when the write commits), or None
    when the caller may without one."""
    return _decide(info, mutation, student, teacher)


def _decide(info: Info, mutation: str, student: str | None, teacher: str | None) -> Guard | None:
    caller = info.context.auth.caller
    try:
        owners = policy.may_write(caller, mutation)
        if Owner.ANY in owners:
            return None
        if Owner.SELF in owners and _is_self(caller, student, teacher):
            return None
        if Owner.TEACHES in owners and caller.teacher_id is not None:
            return Guard(taught_by=caller.teacher_id)
    except Exception as error:  # a rule that breaks refuses; it never lets a write through
        raise _refused(mutation, "the policy could not decide; refused") from error
    if not owners:
        raise _refused(mutation, "this caller's roles may not run it")
    if Owner.TEACHES in owners:
        raise _refused(mutation, "a teacher token names no teacher (its teacher claim)")
    raise _refused(mutation, "allowed only on the caller's own node")


def _is_self(caller: Principal, student: str | None, teacher: str | None) -> bool:
    if student is not None:
        return caller.student_id is not None and student == caller.student_id
    if teacher is not None:
        return caller.teacher_id is not None and teacher == caller.teacher_id
    return False


def class_teacher(mutation: str, guard: Guard | None, teacher_id: str | None) -> None:
    """A teacher's class write may name no other teacher than themselves: handing a class
    over (or creating one for someone else) is staff's."""
    if guard is not None and teacher_id is not None and teacher_id != guard.taught_by:
        raise _refused(mutation, "a teacher may not give a class to another teacher")
