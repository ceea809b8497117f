"""Who may run an operation, and who may read personal data.

With auth configured, mutations (and, if asked, reads) need a valid bearer token; a refused
operation is not executed, so nothing is written. Personal fields (a student's email and
street: `policy.READS`) are served to the callers the policy names, decided on the student
item the field is resolved from, unless the server is set to make them public
(GRAPH_API_PUBLIC_PERSONAL_DATA); to anyone else they are null with a coded error, and the
rest of the answer stands."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api.errors import ApiError, Forbidden, Unauthenticated, Unavailable
from graph_api.graph.auth import policy
from graph_api.graph.auth.policy import Owner, Role
from graph_api.graph.engine.context import Context, Info
from graph_api.graph.types.nodes import NodeBase, then
from graph_api.model.items import ENROLMENT

if TYPE_CHECKING:
    from graph_api.graph.auth.tokens import Principal

# What the rules of `policy.READS` look at on a student item, beside its id: its classes'
# `teacherId`s. Every field READS names reads it too (`field_attributes`), so it comes in the
# same request as the field.
RULE_ATTRIBUTES = (ENROLMENT.field,)


class RequireAuth(SchemaExtension):
    def on_execute(self) -> Iterator[None]:
        execution = self.execution_context
        context = execution.context
        refused = refusal(context, execution.operation_type)
        if refused is not None:
            error, message = refused
            if execution.operation_type == OperationType.SUBSCRIPTION:
                # Strawberry subscribes whatever result this hook sets: raised, the
                # error ends the operation before anything is subscribed.
                raise error(message)
            execution.result = ExecutionResult(
                data=None, errors=[GraphQLError(message, extensions={"code": error.code})]
            )
        yield


def refusal(context: object, operation_type: OperationType) -> tuple[type[ApiError], str] | None:
    """Why this request may not run an operation of this type (the error and its message),
    or None if it may."""
    if not isinstance(context, Context):
        return None
    # No sign-in configured (nor the embedded backend's dev tokens): open.
    if Role.OPEN in context.auth.caller.roles:
        return None
    writes = operation_type == OperationType.MUTATION
    if not (writes or context.services.settings.auth_reads) or context.auth.principal is not None:
        return None
    reason = context.auth.problem or "no token was sent"
    what = "mutations need" if writes else "this API needs"
    # A JWKS that does not answer is ours to fix, not the client's token.
    error = Unavailable if context.auth.unavailable else Unauthenticated
    return error, f"{what} 'Authorization: Bearer <JWT>': {reason}{dev_hint(context)}"


# Where the embedded demo's tokens come from, for a caller it refuses without one.
DEV_HINT = (
    "; this demo server signs dev tokens: pick a role in GraphiQL, or run"
    " `graph-api token --role admin` (or teacher, student, guardian)"
)


def dev_hint(context: Context) -> str:
    return DEV_HINT if context.services.auth.dev else ""


def personal(
    info: Info,
    field: str,
    student: NodeBase,
    value: Callable[[Mapping[str, Any]], Any],
    attributes: tuple[str, ...] = (),
) -> Any:
    """The personal `field` ("Student.email", "Home.street") of `student`: `value` of what is
    known of it (its `attributes`, and what the rule looks at: RULE_ATTRIBUTES), if the
    caller may read it (`policy.may_read`, decided on that item). Plain when they are known,
    else an awaitable of the request's one batched read of the item. A caller the policy
    grants nothing is refused before anything is read. A refusal is raised: a field error at
    its path whose message names the field and the student's id, never a value."""
    context = info.context
    if context.services.settings.public_personal_data:
        return then(student.attributes_of(attributes), value)
    caller = context.auth.caller
    owners = _owners(caller, field)
    if not owners:
        raise _refusal(context, field, student.id)
    if Owner.ANY in owners:
        return then(student.attributes_of(attributes), value)

    def decide(known: Mapping[str, Any]) -> Any:
        node = {name: known.get(name) for name in RULE_ATTRIBUTES}
        if not policy.may_read(caller, field, {**node, "id": student.id}):
            raise _refusal(context, field, student.id)
        return value(known)

    return then(student.attributes_of((*attributes, *RULE_ATTRIBUTES)), decide)


def _owners(caller: Principal, field: str) -> frozenset[Owner]:
    """`policy.grant` of the field's entry; fails closed (nothing) on any error."""
    try:
        return policy.grant(caller, policy.READS[field])
    except Exception:
        return frozenset()


def _refusal(context: Context, field: str, student_id: str) -> ApiError:
    """Why the caller may not read `field`: FORBIDDEN signed in (or with no sign-in to
    offer), UNAUTHENTICATED without a valid token, UNAVAILABLE when the token could not be
    checked."""
    auth = context.auth
    if auth.principal is not None:
        return Forbidden(
            f"{field} of student {student_id} is personal data this caller may not read"
        )
    # Open on a server that takes no token at all; the embedded demo's open mode
    # (GRAPH_API_OPEN_WRITES) takes dev tokens: told where they come from, below.
    if Role.OPEN in auth.caller.roles and not context.services.auth.dev:
        return Forbidden(
            f"{field} is personal data, which this server shows only to signed-in readers,"
            " and it has no sign-in configured"
        )
    if auth.unavailable:
        return Unavailable(f"{field} needs a checked token: {auth.problem}")
    reason = auth.problem or "no token was sent"
    return Unauthenticated(
        f"{field} is personal data: send 'Authorization: Bearer <JWT>' to read it ({reason})"
        + dev_hint(context)
    )
