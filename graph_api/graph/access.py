"""Who may run an operation, and who may read personal data.

With auth configured, mutations (and, if asked, reads) need a valid bearer token; a refused
operation is not executed, so nothing is written. Personal fields (a student's email and
street) are served only to a reader with a valid token, unless the server is set to make
them public (GRAPH_API_PUBLIC_PERSONAL_DATA); to anyone else they are null with a coded
error, and the rest of the answer stands."""

from __future__ import annotations

from collections.abc import Iterator

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api.errors import ApiError, Forbidden, Unauthenticated, Unavailable
from graph_api.graph.context import Context, Info


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
    if not isinstance(context, Context) or not context.services.auth.enabled:
        return None
    writes = operation_type == OperationType.MUTATION
    if not (writes or context.services.settings.auth_reads) or context.auth.principal is not None:
        return None
    reason = context.auth.problem or "no token was sent"
    what = "mutations need" if writes else "this API needs"
    # A JWKS that does not answer is ours to fix, not the client's token.
    error = Unavailable if context.auth.unavailable else Unauthenticated
    return error, f"{what} 'Authorization: Bearer <JWT>': {reason}"


def require_personal_data_reader(info: Info, field: str) -> None:
    """Raise unless this request may read the personal field `field` (e.g. Student.email)."""
    context = info.context
    if context.services.settings.public_personal_data or context.auth.principal is not None:
        return
    if not context.services.auth.enabled:
        raise Forbidden(
            f"{field} is personal data, which this server shows only to signed-in readers,"
            " and it has no sign-in configured"
        )
    if context.auth.unavailable:
        raise Unavailable(f"{field} needs a checked token: {context.auth.problem}")
    reason = context.auth.problem or "no token was sent"
    raise Unauthenticated(
        f"{field} is personal data: send 'Authorization: Bearer <JWT>' to read it ({reason})"
    )
