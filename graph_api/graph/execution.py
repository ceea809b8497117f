"""graphql-core's executor with a short path for fields that only read an attribute.

Most fields of a response are plain: no resolver function (Strawberry reads the attribute
with `getattr`), no arguments, and a scalar, an object or a list of objects for a type
(`edges`, `node`, `name`). graphql-core runs the same steps for each of them as for a
resolver with arguments: it builds a resolve info, collects argument values, calls
Strawberry's wrapper around `getattr`, tests the result for an awaitable twice and walks the
type's wrappers one call each to complete it. Q1 of `make bench` resolves 813 fields, most
of them plain, and those steps were most of its execution time.

For a plain field whose value is already known (not an awaitable, not null) this context
reads the attribute and completes it directly: a scalar or an enum through its `coerce_output_value`, an object
or each object of a list by executing its sub-selection. Anything else (a resolver,
arguments, an awaitable, null, an error, a value of the wrong type) takes graphql-core's
own path with the value already read, so errors, null propagation and paths are
graphql-core's; `tests/test_execution.py` compares both paths' answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from graphql import (
    GraphQLField,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    Undefined,
    is_leaf_type,
)
from graphql.execution.executor import to_nodes
from graphql.pyutils import Path, gather_with_cancel
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

# Strawberry marks the resolver it gives a field declared without one (`getattr`).
_DEFAULT_RESOLVER_MARK = "_is_default"
_DEFINITION = "strawberry-definition"  # GraphQLCoreConverter.DEFINITION_BACKREF


class _Plain(NamedTuple):
    """How a plain field reads and completes its value."""

    attribute: str  # the Python attribute it reads
    serialize: Callable[[Any], Any] | None  # a leaf: its `coerce_output_value`
    object_type: GraphQLObjectType | None  # an object, or the items of a list of objects
    item_type: GraphQLOutputType | None  # a list's item type (its errors name it)


# By the field's id (a GraphQLField is not hashable), the field kept so its id stays its own.
_plans: dict[int, tuple[GraphQLField, _Plain | None]] = {}


def _plan(field: GraphQLField) -> _Plain | None:
    """How `field` reads its value when it only reads an attribute; None otherwise."""
    known = _plans.get(id(field))
    if known is not None:
        return known[1]
    plan = None
    definition = field.extensions.get(_DEFINITION)
    if (
        getattr(field.resolve, _DEFAULT_RESOLVER_MARK, False)
        and definition is not None
        and definition.default_resolver is getattr  # Strawberry's default: we do the same
        and not field.args
    ):
        attribute = definition.python_name
        of_type = field.type.of_type if isinstance(field.type, GraphQLNonNull) else field.type
        if is_leaf_type(of_type):
            plan = _Plain(attribute, of_type.coerce_output_value, None, None)
        elif isinstance(of_type, GraphQLObjectType):
            plan = _Plain(attribute, None, of_type, None)
        elif isinstance(of_type, GraphQLList):
            item = of_type.of_type
            inner = item.of_type if isinstance(item, GraphQLNonNull) else item
            if isinstance(inner, GraphQLObjectType):
                plan = _Plain(attribute, None, inner, item)
    _plans[id(field)] = (field, plan)
    return plan


class _Slow(Exception):
    """The value needs graphql-core's own completion (raised before any work is done)."""


class ExecutionContext(StrawberryGraphQLCoreExecutionContext):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # An extension with a `resolve` hook wraps every resolver (graphql-core middleware):
        # then no field is plain. @stream would change how lists complete: not in our schema.
        manager = self.middleware_manager
        self._plain = (
            manager is None or manager._middleware_resolvers is None
        ) and self.schema.get_directive("stream") is None

    def execute_field(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: Any,
        path: Path,
        position_context: Any,
    ) -> Any:
        first = field_details_list[0].node
        field_def = self.schema.get_field(parent_type, first.name.value)
        if field_def is None:
            return Undefined
        plan = _plan(field_def) if self._plain and not first.arguments else None
        if plan is None:
            return super().execute_field(
                parent_type, source, field_details_list, path, position_context
            )
        return_type = field_def.type
        try:
            result = getattr(source, plan.attribute)
            if result is not None and not self.is_awaitable(result):
                try:
                    completed = self._complete_plain(
                        plan, field_details_list, path, result, position_context
                    )
                except _Slow:
                    pass
                else:
                    if self.is_awaitable(completed):
                        return self._await_completed(
                            completed, return_type, field_details_list, path
                        )
                    return completed
            info = self.build_resolve_info(
                field_def, to_nodes(field_details_list), parent_type, path
            )
            if self.is_awaitable(result):
                return self.complete_awaitable_value(
                    return_type, field_details_list, info, path, result, position_context
                )
            completed = self.complete_value(
                return_type, field_details_list, info, path, result, position_context
            )
            if self.is_awaitable(completed):
                return self._await_completed(completed, return_type, field_details_list, path)
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, field_details_list, path)
            return None
        return completed

    def _complete_plain(
        self, plan: _Plain, field_details_list: Any, path: Path, result: Any, position: Any
    ) -> Any:
        """`result` completed as graphql-core would, or `_Slow` before doing anything."""
        if plan.serialize is not None:
            value = plan.serialize(result)
            if value is None or value is Undefined:
                raise _Slow
            return value
        object_type = plan.object_type
        assert object_type is not None
        # Strawberry's is_type_of reads only the value, never the info.
        is_type_of: Callable[[Any, Any], Any] | None = object_type.is_type_of
        if plan.item_type is None:
            if is_type_of is not None and not is_type_of(result, None):
                raise _Slow
            return self.collect_and_execute_subfields(
                object_type, field_details_list, path, result, position
            )
        items = result if isinstance(result, list) else None
        if items is None or any(
            item is None
            or self.is_awaitable(item)
            or (is_type_of is not None and not is_type_of(item, None))
            for item in items
        ):
            raise _Slow
        return self._complete_objects(
            object_type, plan.item_type, field_details_list, path, items, position
        )

    def _complete_objects(
        self,
        object_type: GraphQLObjectType,
        item_type: GraphQLOutputType,
        field_details_list: Any,
        path: Path,
        items: list[Any],
        position: Any,
    ) -> Any:
        """A list of known objects, each completed as `complete_list_item_value` does."""
        completed: list[Any] = []
        pending: list[int] = []
        try:
            for index, item in enumerate(items):
                item_path = path.add_key(index, None)
                try:
                    value = self.collect_and_execute_subfields(
                        object_type, field_details_list, item_path, item, position
                    )
                except Exception as raw_error:  # raises again when the item is non-null
                    self.handle_field_error(raw_error, item_type, field_details_list, item_path)
                    value = None
                if self.is_awaitable(value):
                    value = self._await_completed(value, item_type, field_details_list, item_path)
                    pending.append(index)
                completed.append(value)
        except Exception:
            # As graphql-core does: what other items started must settle, they may fail too.
            if pending:
                self.settle_in_background([completed[index] for index in pending])
            raise
        if not pending:
            return completed

        async def gathered() -> list[Any]:
            values = await gather_with_cancel(*(completed[index] for index in pending))
            for index, value in zip(pending, values, strict=True):
                completed[index] = value
            return completed

        return gathered()

    async def _await_completed(
        self,
        completed: Any,
        return_type: GraphQLOutputType,
        field_details_list: Any,
        path: Path,
    ) -> Any:
        try:
            return await completed
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, field_details_list, path)
            return None
