"""The executor's reference: the same schema on graphql-core's own executor."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph_api.graph.engine.context import Services
    from graph_api.graph.schema import GraphSchema


def ours_and_reference(services: Services) -> tuple[GraphSchema, GraphSchema]:
    """The API's schema (its own executor), and the same types and extensions on
    graphql-core's executor alone: what the executor's answers are compared with."""
    from graph_api.graph.engine import execution
    from graph_api.graph.schema import GraphSchema, build_schema

    ours = build_schema(services.settings)
    assert ours.execution_context_class is execution.ExecutionContext
    reference = GraphSchema(
        query=ours.query,
        mutation=ours.mutation,
        subscription=ours.subscription,
        extensions=ours.extensions,
    )
    reference.settings = ours.settings
    assert reference.execution_context_class is not execution.ExecutionContext
    return ours, reference
