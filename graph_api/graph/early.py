"""A query's root fields started as the request arrives, before Strawberry's steps.

Before a query's first resolver runs, Strawberry takes the request through its extensions
(the parser and validation caches, the limits, the cost, the caller's token) and
graphql-core coerces the variables and collects the root's fields: Q1 of `make bench` sent
its BatchGetItem 0.8 ms after `GraphSchema.execute` began, with caches cold as serving
leaves them, and DynamoDB waited for all of it. For an operation that has run before,
`start` calls its root fields' resolvers first, lets their reads leave
(`store.ledger.sent`), and only then hands the request to Strawberry, whose steps run while
DynamoDB answers. Execution takes each started resolver's task in place of calling it
(`ExecutionContext._call`).

What starts is what execution would call, with the same arguments, and only when it
would run:
- the plan is learned from a request of the same text and operation name that reached
  execution (`learn`): so the document passed every check that depends on it alone
  (parsing, validation, depth, aliases, tokens, introspection);
- only a query (never a mutation or a subscription), and only root fields that execution
  calls directly (`runners.direct_call`: a resolver with built-in scalar arguments);
- what depends on the request is checked again, by the functions the extensions use: the
  variables (already in their coerced form, `cost.as_given`, and `limits.variable_errors`),
  the cost (`cost.operation_cost`) and the caller (`access.refusal`).

A resolver's reads go through the request's loaders, which read each key once: should
execution call a resolver again (its document parsed anew, so its field is another node),
the call finds its reads done and sends nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    GraphQLField,
    GraphQLObjectType,
    GraphQLResolveInfo,
    GraphQLSchema,
    OperationDefinitionNode,
    VariableDefinitionNode,
)
from graphql.execution.values import VariableValues, get_argument_values
from graphql.language import OperationType as AstOperation
from graphql.pyutils import Path
from strawberry.types import Info
from strawberry.types.graphql import OperationType

from graph_api.graph import plans, runners
from graph_api.graph.access import refusal
from graph_api.graph.awaitables import is_awaitable
from graph_api.graph.context import Context
from graph_api.graph.cost import as_given, operation_cost
from graph_api.graph.document import KeptBy
from graph_api.graph.limits import variable_errors
from graph_api.store.ledger import sent

if TYPE_CHECKING:
    from graph_api.graph.execution import Direct, ExecutionContext
    from graph_api.graph.schema import GraphSchema


@dataclass(frozen=True, slots=True)
class _Root:
    """A root field execution calls directly: what its call is made of."""

    key: str  # the response key
    field_def: GraphQLField
    nodes: list[FieldNode]  # its field nodes (the resolve info's `field_nodes`)
    direct: Direct


@dataclass(frozen=True, slots=True)
class _Plan:
    """An operation's root fields to start, and what their resolve info shares."""

    schema: GraphQLSchema
    root_type: GraphQLObjectType
    operation: OperationDefinitionNode
    fragments: dict[str, FragmentDefinitionNode]
    definitions: tuple[VariableDefinitionNode, ...]
    roots: tuple[_Root, ...]
    document: DocumentNode  # the operation and the fragments alone: what prices it


_plans: KeptBy[_Plan] = KeptBy()  # by schema, with the text and operation name as its key


def learn(ex: ExecutionContext, plan: plans.Plan) -> None:
    """Keep the root fields of the request's operation to start on its next requests: a
    query's, collected alike for every request (`plans.collected_alike`)."""
    context = ex.context_value
    if not isinstance(context, Context) or context.document_key is None:
        return
    operation = ex.operation
    if operation.operation is not AstOperation.QUERY or not plans.collected_alike(
        operation, ex.fragment_definitions
    ):
        return
    schema = ex._strawberry
    if _plans.get((schema,), context.document_key) is not None:
        return
    roots = tuple(
        _Root(step.name, step.field_def, [d.node for d in step.field_details_list], step.direct)
        for step, kind, call in zip(plan.steps, plan.kinds, plan.calls, strict=True)
        if kind == runners.DIRECT and call is runners.direct_call
    )
    if not roots:
        return
    fragments = dict(ex.fragment_definitions)
    document = DocumentNode(definitions=(operation, *fragments.values()))
    definitions = tuple(operation.variable_definitions or ())
    found = _Plan(ex.schema, plan.parent_type, operation, fragments, definitions, roots, document)
    _plans.put((schema,), found, context.document_key)


async def start(
    schema: GraphSchema,
    query: str | None,
    operation_name: str | None,
    variables: dict[str, Any] | None,
    context: Any,
    root_value: Any,
    allowed: Iterable[OperationType] | None,
) -> None:
    """Start the operation's root fields, if it has run before and would run now, and
    return once their reads have left."""
    if (
        not isinstance(context, Context)
        or type(query) is not str
        or not (operation_name is None or type(operation_name) is str)
        or not (variables is None or type(variables) is dict)
        or context.loaders.naive
    ):
        return  # what is not an operation's text, name and variables: Strawberry refuses it
    context.document_key = (query, operation_name)
    plan = _plans.get((schema,), context.document_key)
    if plan is None or (allowed is not None and OperationType.QUERY not in allowed):
        return
    given = variables or {}
    values = as_given(plan.schema, plan.definitions, given)
    if (
        values is None
        or variable_errors(given)
        or refusal(context, OperationType.QUERY) is not None
        or operation_cost(plan.schema, plan.document, operation_name, given).requested
        > schema.settings.max_cost
    ):
        return
    variable_values = VariableValues({}, values)
    for root in plan.roots:
        try:
            task = asyncio.ensure_future(_call(plan, root, variable_values, context, root_value))
        except Exception:  # execution calls it again, and reports it
            continue
        task.add_done_callback(_retrieve)
        context.started[id(root.nodes[0])] = task
    await sent(context.ledger, 1 if context.started else 0)  # the first read has left


def _call(
    plan: _Plan, root: _Root, variable_values: VariableValues, context: Context, root_value: Any
) -> Any:
    """The root field's resolver called as `ExecutionContext._call` calls it."""
    direct = root.direct
    arguments = get_argument_values(root.field_def, root.nodes[0], variable_values)
    kwargs = {py: arguments[name] for name, py in direct.arguments if name in arguments}
    for name in direct.lists:
        if kwargs.get(name) is not None:
            kwargs[name] = list(kwargs[name])
    for name in direct.source_names:
        kwargs[name] = root_value
    if direct.info_name is not None:
        info = GraphQLResolveInfo(
            root.nodes[0].name.value,
            root.nodes,
            root.field_def.type,
            plan.root_type,
            Path(None, root.key, plan.root_type.name),
            plan.schema,
            plan.fragments,
            root_value,
            plan.operation,
            variable_values,
            context,
            is_awaitable,
            None,
            None,  # type: ignore[arg-type]  # async_helpers: our resolvers use none
        )
        kwargs[direct.info_name] = Info(_raw_info=info, _field=direct.field)
    function = direct.function
    return function(root_value, **kwargs) if direct.self_source else function(**kwargs)


def _retrieve(task: asyncio.Future[Any]) -> None:
    # Execution awaits the task and reports its error; a task it never took (the request
    # ended first) is not logged as "exception never retrieved".
    if not task.cancelled():
        task.exception()
