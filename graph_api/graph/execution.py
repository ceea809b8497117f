"""graphql-core's executor, with two short paths through Strawberry's per-field wrappers.

graphql-core runs the same steps for every field: a resolve info, Strawberry's resolver
wrapper, and completion through the return type's checks, one call per type wrapper. Q1 of
`make bench` resolves 813 fields, and those steps are most of its CPU.

- A *plain* field (Strawberry reads it with `getattr`: no resolver, arguments or field
  extensions) is read here, and a plain value completed here: a leaf by its type's
  `coerce_output_value` (as `complete_leaf_value`), an object or each object of a list by
  `collect_and_execute_subfields` (as `complete_object_value`, after Strawberry's own
  `is_type_of`). Any other value (an awaitable, null, an error, a value its type refuses)
  completes through graphql-core's own `complete_value`.
- A resolver whose arguments are all built-in scalars (a student's `classes(first:, ...)`,
  once per student) is called as Strawberry's wrapper calls it (the source as `self`,
  `root` or `parent`, Strawberry's `Info`, the arguments by their Python names), without
  the wrapper's generic argument conversion, which returns such values as given.

Everything else, and every field when an extension wraps resolvers (a `resolve` hook),
takes graphql-core's `execute_field`; errors go through its `handle_field_error`, so paths
and null propagation are its own. It plugs in through graphql-core's
`execution_context_class` (Strawberry's `Schema(execution_context_class=)`); no code is
generated. `tests/test_execution.py` runs documents through it and through the library's
executor alone and compares.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from inspect import isawaitable
from types import FunctionType
from typing import Any, NamedTuple

from graphql import (
    GraphQLField,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLResolveInfoHelpers,
    Undefined,
    get_nullable_type,
    is_leaf_type,
    is_list_type,
    is_object_type,
)
from graphql.execution.collect_fields import FieldDetailsList
from graphql.execution.middleware import get_middleware_resolvers
from graphql.execution.values import get_argument_values
from graphql.pyutils import Path, gather_with_cancel
from strawberry import ID
from strawberry.resolvers import is_default_resolver
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.types.base import StrawberryOptional
from strawberry.types.field import StrawberryField
from strawberry.utils.str_converters import to_camel_case

from graph_api.internals import strawberry_info

_DEFINITION = GraphQLCoreConverter.DEFINITION_BACKREF


class Completion(NamedTuple):
    """How a value of a field's type completes on the short path: a leaf's coercion, or an
    object type (alone, or as the items of a list: `item_type` is the list's item type)."""

    coerce: Callable[[Any], Any] | None
    object_type: GraphQLObjectType | None
    item_type: GraphQLOutputType | None


def completion(type_: GraphQLOutputType) -> Completion | None:
    """How a value of `type_` completes here; None: only graphql-core's path can."""
    nullable = get_nullable_type(type_)
    if is_leaf_type(nullable):
        return Completion(nullable.coerce_output_value, None, None)
    if is_object_type(nullable):
        return Completion(None, nullable, None)
    if is_list_type(nullable):
        item = get_nullable_type(nullable.of_type)
        if is_object_type(item):
            return Completion(None, item, nullable.of_type)
    return None


# What a plain field reads and how its value completes; None: not such a field.
Plain = tuple[str, Completion] | None
# By the field's id (a GraphQLField is not hashable), the field kept so its id stays its own.
_plains: dict[int, tuple[GraphQLField, Plain]] = {}
_completions: dict[int, tuple[GraphQLField, Completion | None]] = {}


def plain(field: GraphQLField) -> Plain:
    """The attribute a field reads and how its value completes, when Strawberry resolves it
    by `getattr` alone (no resolver, arguments or field extensions)."""
    known = _plains.get(id(field))
    if known is not None:
        return known[1]
    found: Plain = None
    definition = field.extensions.get(_DEFINITION)
    if (
        definition is not None
        and field.resolve is not None
        and is_default_resolver(field.resolve)
        and definition.base_resolver is None
        and definition.default_resolver is getattr
        and not definition.extensions
        and not field.args
    ):
        how = completion(field.type)
        found = (definition.python_name, how) if how is not None else None
    _plains[id(field)] = (field, found)
    return found


def completion_of(field: GraphQLField) -> Completion | None:
    """`completion(field.type)`, worked out once a field."""
    known = _completions.get(id(field))
    if known is None:
        known = _completions[id(field)] = (field, completion(field.type))
    return known[1]


class Direct(NamedTuple):
    """How a resolver is called directly: its function and the names of its parameters."""

    field: StrawberryField
    function: Callable[..., Any]
    arguments: tuple[tuple[str, str], ...]  # (GraphQL name, Python name)
    self_source: bool  # the source as the first positional argument
    source_names: tuple[str, ...]  # `root`, `parent`: the source by keyword
    info_name: str | None


_PLAIN = frozenset({str, int, float, bool})  # never awaitable, never an error
_directs: dict[int, tuple[GraphQLField, Direct | None]] = {}
_SCALARS = (int, str, float, bool, ID)


def direct(field: GraphQLField) -> Direct | None:
    """How to call the field's resolver directly; None when Strawberry's wrapper must: an
    async resolver, field extensions, or an argument that is not a built-in scalar."""
    known = _directs.get(id(field))
    if known is not None:
        return known[1]
    found: Direct | None = None
    definition: StrawberryField | None = field.extensions.get(_DEFINITION)
    resolver = definition.base_resolver if definition is not None else None
    if (
        definition is not None
        and resolver is not None
        and not resolver.is_async
        and not definition.extensions
        and isinstance(resolver.wrapped_func, FunctionType)  # not a static or class method
    ):
        names = []
        for argument in definition.arguments:
            type_ = argument.type
            if type(type_) is StrawberryOptional:  # not its subclass Maybe, which wraps
                type_ = type_.of_type
            name = argument.graphql_name or to_camel_case(argument.python_name)
            if type_ not in _SCALARS or name not in field.args:
                break
            names.append((name, argument.python_name))
        else:
            if len(names) == len(field.args):
                found = Direct(
                    definition,
                    resolver.wrapped_func,
                    tuple(names),
                    resolver.self_parameter is not None,
                    tuple(
                        p.name
                        for p in (resolver.root_parameter, resolver.parent_parameter)
                        if p is not None
                    ),
                    resolver.info_parameter.name if resolver.info_parameter else None,
                )
    _directs[id(field)] = (field, found)
    return found


def _gather_values(values: Sequence[Awaitable[Any]]) -> Awaitable[list[Any]]:
    """graphql-core's `gather_async_work`, which reads nothing of its context."""
    return gather_with_cancel(*values)


class _Track:
    """graphql-core's `track_async_work`, reaching its context through a weak reference.

    Once the context is gone (its response built and nothing else holding it), the
    awaitables are settled in the background as the context would have settled them.
    """

    __slots__ = ("_context",)

    def __init__(self, context: weakref.ref[ExecutionContext]) -> None:
        self._context = context

    def __call__(self, values: Sequence[Any]) -> None:
        context = self._context()
        if context is not None:
            context.track_async_work(values)
            return
        awaitables = [value for value in values if isawaitable(value)]
        if awaitables:
            future = asyncio.gather(*awaitables, return_exceptions=True)
            _settling.add(future)  # a pending future nothing refers to may be collected
            future.add_done_callback(_settling.discard)


_settling: set[asyncio.Future[Any]] = set()


class ExecutionContext(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's execution context, with the short paths when no middleware wraps a
    resolver (Strawberry passes a manager always; an extension's `resolve` hook is one)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        manager = self.middleware_manager
        self._short = manager is None or not any(get_middleware_resolvers(manager.middlewares))
        # graphql-core's helpers are this context's bound methods, and it holds them: a
        # reference cycle, so every object of the request (its context, loaders and items)
        # waited for the garbage collector (`tests/test_request_garbage.py`).
        # `gather_async_work` needs no context; `track` holds it weakly.
        self.async_helpers = GraphQLResolveInfoHelpers(
            gather=_gather_values, track=_Track(weakref.ref(self))
        )

    def execute_field(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: FieldDetailsList,
        path: Path,
        position_context: Any,
    ) -> Any:
        node = field_details_list[0].node
        field_def = self.schema.get_field(parent_type, node.name.value)
        if field_def is not None and self._short:
            read = plain(field_def)
            if read is not None and not node.arguments:
                try:
                    value = getattr(source, read[0])
                except Exception:  # graphql-core's path reads it again, and reports it
                    value = _SLOW
                done = self._complete(
                    read[1], field_def.type, field_details_list, path, value, position_context
                )
                if done is not _SLOW:
                    return done
                if value is not _SLOW:  # completed by graphql-core's steps, as read
                    return self._finish(
                        field_def, parent_type, field_details_list, path, value, position_context
                    )
            elif read is None:
                call = direct(field_def)
                if call is not None:
                    return self._call(
                        call,
                        field_def,
                        parent_type,
                        source,
                        field_details_list,
                        path,
                        position_context,
                    )
        return super().execute_field(
            parent_type, source, field_details_list, path, position_context
        )

    def _call(
        self,
        call: Direct,
        field_def: GraphQLField,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: FieldDetailsList,
        path: Path,
        position_context: Any,
    ) -> Any:
        """graphql-core's `execute_field`, with the resolver called directly."""
        first = field_details_list[0]
        return_type = field_def.type
        info = self.build_resolve_info(
            field_def, [d.node for d in field_details_list], parent_type, path
        )
        try:
            given = get_argument_values(
                field_def,
                first.node,
                self.variable_values,
                first.fragment_variable_values,
                self.hide_suggestions,
            )
            kwargs = {py: given[name] for name, py in call.arguments if name in given}
            for name in call.source_names:
                kwargs[name] = source
            if call.info_name is not None:
                kwargs[call.info_name] = strawberry_info(info, call.field)
            function = call.function
            result = function(source, **kwargs) if call.self_source else function(**kwargs)
            how = completion_of(field_def)
            if how is not None:
                done = self._complete(
                    how, return_type, field_details_list, path, result, position_context
                )
                if done is not _SLOW:
                    return done
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, field_details_list, path)
            return None
        return self._finish(
            field_def, parent_type, field_details_list, path, result, position_context, info
        )

    def _finish(
        self,
        field_def: GraphQLField,
        parent_type: GraphQLObjectType,
        field_details_list: FieldDetailsList,
        path: Path,
        result: Any,
        position_context: Any,
        info: Any = None,
    ) -> Any:
        """The rest of graphql-core's `execute_field` once its resolver returned `result`."""
        return_type = field_def.type
        if info is None:
            info = self.build_resolve_info(
                field_def, [d.node for d in field_details_list], parent_type, path
            )
        try:
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

    async def _await_completed(
        self,
        completed: Awaitable[Any],
        return_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        path: Path,
    ) -> Any:
        try:
            return await completed
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, field_details_list, path)
            return None

    def _complete(
        self,
        how: Completion,
        return_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        path: Path,
        value: Any,
        position_context: Any,
    ) -> Any:
        """The field's completed value as graphql-core's `complete_value` gives it, when it
        is a plain one: a leaf's plain value, an object or a list of objects that are not
        awaitable and are of the type (`is_type_of`); else `_SLOW`, with nothing done. An
        object's own fields run through `collect_and_execute_subfields`; errors go to
        `handle_field_error` at the same paths as graphql-core's."""
        if value is _SLOW:
            return _SLOW
        if how.coerce is not None:
            if type(value) in _PLAIN:
                try:
                    coerced = how.coerce(value)
                except Exception:  # graphql-core's path reports it, at this field
                    return _SLOW
                if coerced is not None and coerced is not Undefined:
                    return coerced
            return _SLOW
        object_type = how.object_type
        assert object_type is not None
        if any(details.node.directives for details in field_details_list):
            return _SLOW  # `@stream` on a list: graphql-core's own path
        execute = self.collect_and_execute_subfields
        item_type = how.item_type
        if item_type is None:
            if not self._admits(object_type, value):
                return _SLOW
            try:
                completed = execute(object_type, field_details_list, path, value, position_context)
            except Exception as raw_error:
                self.handle_field_error(raw_error, return_type, field_details_list, path)
                return None
            if self.is_awaitable(completed):
                return self._await_completed(completed, return_type, field_details_list, path)
            return completed
        if type(value) is not list or not all(self._admits(object_type, i) for i in value):
            return _SLOW
        results: list[Any] = []
        pending: list[int] = []
        try:
            for index, item in enumerate(value):
                item_path = path.add_key(index, None)
                try:
                    completed = execute(
                        object_type, field_details_list, item_path, item, position_context
                    )
                    if self.is_awaitable(completed):
                        completed = self._await_completed(
                            completed, item_type, field_details_list, item_path
                        )
                        pending.append(index)
                    results.append(completed)
                except Exception as raw_error:
                    self.handle_field_error(raw_error, item_type, field_details_list, item_path)
                    results.append(None)
        except Exception as raw_error:  # a non-null item failed: the list fails
            if pending:
                self.settle_in_background([results[index] for index in pending])
            self.handle_field_error(raw_error, return_type, field_details_list, path)
            return None
        if not pending:
            return results
        return self._await_completed(
            self._gathered(results, pending), return_type, field_details_list, path
        )

    def _admits(self, object_type: GraphQLObjectType, value: Any) -> bool:
        """Whether `value` completes as `object_type` without graphql-core's checks failing:
        a value, not awaitable, of the type by its `is_type_of` (Strawberry's reads no info)."""
        if value is None or isinstance(value, Exception) or self.is_awaitable(value):
            return False
        is_type_of = object_type.is_type_of
        if is_type_of is None:
            return True
        return _own_check(object_type) and is_type_of(value, None) is True  # type: ignore[arg-type]

    @staticmethod
    async def _gathered(results: list[Any], pending: list[int]) -> list[Any]:
        """The list once its pending items are done, as graphql-core gathers them."""
        if len(pending) == 1:
            results[pending[0]] = await results[pending[0]]
        else:
            done = await gather_with_cancel(*(results[index] for index in pending))
            for index, value in zip(pending, done, strict=True):
                results[index] = value
        return results


_owns: dict[int, tuple[GraphQLObjectType, bool]] = {}


def _own_check(object_type: GraphQLObjectType) -> bool:
    """Whether the type's `is_type_of` is Strawberry's, which reads no info: a type's own
    `is_type_of` may, and is left to graphql-core's path."""
    known = _owns.get(id(object_type))
    if known is None:
        definition = object_type.extensions.get(_DEFINITION)
        own = definition is not None and getattr(definition.origin, "is_type_of", None) is None
        known = _owns[id(object_type)] = (object_type, own)
    return known[1]


_SLOW: Any = object()  # the short path declines: graphql-core's own path takes the field
