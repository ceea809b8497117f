"""graphql-core's executor with two short paths through Strawberry's per-field wrappers.

graphql-core runs the same steps for every field: a resolve info, argument collection, the
resolver (Strawberry's wrapper around ours), two awaitable tests and one call per type
wrapper to complete the value. Q1 of `make bench` resolves 813 fields, and those steps were
most of its execution time.

- A *plain* field (no resolver function: Strawberry reads the attribute with `getattr`; no
  arguments; a scalar, an enum, an object or a list of objects) whose value is known (not an
  awaitable, not null) is read and completed here: a leaf through its type's
  `coerce_output_value`, an object or each object of a list by executing its sub-selection.
- A field with a resolver function whose arguments are all built-in scalars gets it called
  as Strawberry's wrapper would (the source as `self`, `root` or `parent`, Strawberry's
  `Info`, the arguments by their Python names) without the wrapper's generic argument
  conversion, which for such arguments returns what it is given.

Anything else (an extension with a `resolve` hook, field extensions or permissions,
exception handlers, input objects, enums or lists as arguments, subscriptions, an
awaitable, null, an error, a value of the wrong type) takes graphql-core's and Strawberry's
own path, with any value already read, so errors, null propagation and paths are
graphql-core's. `tests/test_execution.py` runs documents through both and compares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeGuard

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
from graphql.execution.values import get_argument_values
from graphql.pyutils import Path, gather_with_cancel
from strawberry import ID as strawberry_ID
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types.base import StrawberryOptional
from strawberry.types.field import StrawberryField

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
        elif _checked_by_value(of_type):
            plan = _Plain(attribute, None, of_type, None)
        elif isinstance(of_type, GraphQLList):
            item = of_type.of_type
            inner = item.of_type if isinstance(item, GraphQLNonNull) else item
            if _checked_by_value(inner):
                plan = _Plain(attribute, None, inner, item)
    _plans[id(field)] = (field, plan)
    return plan


def _checked_by_value(type_: Any) -> TypeGuard[GraphQLObjectType]:
    """An object type whose `is_type_of` is Strawberry's own, which reads the value alone
    (never the info, never raising): the short path calls it with no info. A type that
    declares its own `is_type_of` keeps graphql-core's path."""
    if not isinstance(type_, GraphQLObjectType):
        return False
    definition = type_.extensions.get(_DEFINITION)
    return definition is not None and getattr(definition, "is_type_of", None) is None


# Argument types Strawberry hands over exactly as graphql-core coerced them.
_AS_COERCED: tuple[Any, ...] = (str, int, float, bool, strawberry_ID)


class _Direct(NamedTuple):
    """How to call a resolver function without Strawberry's generic wrapper."""

    field: StrawberryField
    arguments: tuple[tuple[str, str], ...]  # (GraphQL name, Python name)
    self_source: bool  # a method: the source is `self`
    source_names: tuple[str, ...]  # `root` / `parent` parameters, given the source
    info_name: str | None  # the parameter that takes Strawberry's Info


def _direct(field: GraphQLField, strawberry_schema: Any) -> _Direct | None:
    """How `field`'s resolver function is called, when Strawberry's wrapper would only
    convert its arguments to themselves; None otherwise."""
    known = _directs.get(id(field))
    if known is not None:
        return known[1]
    plan = None
    definition = field.extensions.get(_DEFINITION)
    resolver = definition.base_resolver if isinstance(definition, StrawberryField) else None
    if (
        isinstance(definition, StrawberryField)
        and resolver is not None
        # Strawberry's own wrapper (a subscription's `resolve` returns the event instead)
        and getattr(field.resolve, "__name__", "") in _STRAWBERRY_WRAPPERS
        and not definition.extensions  # permissions, field extensions
        and not strawberry_schema.exception_handlers
        and all(_as_coerced(argument.type) for argument in definition.arguments)
    ):
        names = strawberry_schema.config.name_converter
        plan = _Direct(
            definition,
            tuple((names.from_argument(a), a.python_name) for a in definition.arguments),
            resolver.self_parameter is not None,
            tuple(p.name for p in (resolver.root_parameter, resolver.parent_parameter) if p),
            resolver.info_parameter.name if resolver.info_parameter else None,
        )
    _directs[id(field)] = (field, plan)
    return plan


def _as_coerced(type_: Any) -> bool:
    if type(type_) is StrawberryOptional:  # not its subclass Maybe, which wraps in Some()
        type_ = type_.of_type
    return type_ in _AS_COERCED


_directs: dict[int, tuple[GraphQLField, _Direct | None]] = {}
_STRAWBERRY_WRAPPERS = ("_resolver", "_async_resolver")  # GraphQLCoreConverter.from_resolver


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
        self._strawberry = self.schema._strawberry_schema  # type: ignore[attr-defined]
        self._info_class = self._strawberry.config.info_class
        # Arguments of direct calls (`_call`), by field node: built-in scalars only.
        self._arguments: dict[tuple[int, int, int], dict[str, Any]] = {}

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
        if not self._plain:
            return super().execute_field(
                parent_type, source, field_details_list, path, position_context
            )
        plan = None if first.arguments else _plan(field_def)
        direct = None if plan else _direct(field_def, self._strawberry)
        if plan is None and direct is None:
            return super().execute_field(
                parent_type, source, field_details_list, path, position_context
            )
        return_type = field_def.type
        try:
            if plan is not None:
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
            if direct is not None:
                result = self._call(direct, field_def, first, field_details_list, source, info)
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

    def _call(
        self,
        direct: _Direct,
        field_def: GraphQLField,
        node: Any,
        field_details_list: Any,
        source: Any,
        info: Any,
    ) -> Any:
        """The resolver function called as Strawberry's wrapper calls it: the source as
        `self`, `root` or `parent`, Strawberry's Info, the arguments by their Python names."""
        fragment_values = field_details_list[0].fragment_variable_values
        # The same field of the document under 30 parents has the same arguments: the
        # variables are fixed for the operation, so they are worked out once.
        key = (id(node), id(field_def), id(fragment_values))
        arguments = self._arguments.get(key)
        if arguments is None:
            values = (
                get_argument_values(
                    field_def, node, self.variable_values, fragment_values, self.hide_suggestions
                )
                if field_def.args or node.arguments
                else {}
            )
            arguments = {py: values[name] for name, py in direct.arguments if name in values}
            self._arguments[key] = arguments
        kwargs = dict(arguments)
        for name in direct.source_names:
            kwargs[name] = source
        if direct.info_name is not None:
            kwargs[direct.info_name] = self._info_class(_raw_info=info, _field=direct.field)
        resolver = direct.field.base_resolver
        assert resolver is not None
        return resolver(source, **kwargs) if direct.self_source else resolver(**kwargs)

    def _complete_plain(
        self, plan: _Plain, field_details_list: Any, path: Path, result: Any, position: Any
    ) -> Any:
        """`result` completed as graphql-core would, or `_Slow` before doing anything."""
        if isinstance(result, Exception) or result is Undefined:
            raise _Slow  # graphql-core raises the one and nulls the other
        if plan.serialize is not None:
            value = plan.serialize(result)
            if value is None or value is Undefined:
                raise _Slow
            return value
        object_type = plan.object_type
        assert object_type is not None
        # Strawberry's own (`_checked_by_value`): it reads only the value.
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
            or item is Undefined
            or isinstance(item, Exception)
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
