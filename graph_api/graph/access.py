"""Who may run an operation: with auth configured, mutations (and, if asked, reads) need a
valid bearer token. A refused operation is not executed, so nothing is written."""

from __future__ import annotations

from collections.abc import Iterator

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from graph_api.errors import Unauthenticated, Unavailable
from graph_api.graph.context import Context


class RequireAuth(SchemaExtension):
    def on_execute(self) -> Iterator[None]:
        execution = self.execution_context
        context = execution.context
        if isinstance(context, Context) and context.services.auth.enabled:
            writes = execution.operation_type == OperationType.MUTATION
            if (writes or context.services.settings.auth_reads) and context.auth.principal is None:
                reason = context.auth.problem or "no token was sent"
                what = "mutations need" if writes else "this API needs"
                # A JWKS that does not answer is ours to fix, not the client's token.
                code = Unavailable.code if context.auth.unavailable else Unauthenticated.code
                execution.result = ExecutionResult(
                    data=None,
                    errors=[
                        GraphQLError(
                            f"{what} 'Authorization: Bearer <JWT>': {reason}",
                            extensions={"code": code},
                        )
                    ],
                )
        yield
