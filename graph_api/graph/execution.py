"""graphql-core's executor with two short paths through Strawberry's per-field wrappers.

graphql-core runs the same steps for every field: a resolve info, argument collection, the
resolver (Strawberry's wrapper around ours), two awaitable tests and one call per type
wrapper to complete the value. Q1 of `make bench` resolves 813 fields, and those steps were
most of its execution time.

- A *plain* field (no resolver function: Strawberry reads the attribute with `getattr`; no
  arguments; a scalar, an enum, an object or a list of objects) whose value is known (not an
  awaitable, not null) is read and completed here: a leaf through its type's
  `coerce_output_value`, an object or each object of a list by executing its sub-selection.
- A field with a resolver function whose arguments are all built-in scalars (or lists of
  them, each call given its own copy) gets it called as Strawberry's wrapper would (the
  source as `self`, `root` or `parent`, Strawberry's `Info`, the arguments by their Python
  names) without the wrapper's generic argument conversion, which for such arguments
  returns what it is given. A resolver marked `prepared_by` (`graph.prepared`) is prepared
  once for the field, then called per parent.

An object's fields run as steps planned once per selection set (`graph.plans`: an
operation's plan is kept for its next requests when what graphql-core collects cannot
differ between them), by a function written for that selection set (`graph.runners`) and
bound to each request: a plain leaf whose value is its own serialization (a `str` for
String) is kept as read, with no call at all, and a plain object calls its own selection
set's function. Whether a value is awaitable, and whether
it is of its field's object type, are answered once per class where only the class can
decide (`graph.awaitables`, `graph.known`). Several awaitable fields of an object are
gathered as graphql-core gathers them; one alone is awaited in place. An object field whose
value is awaitable is completed the same way once awaited.

Anything else (an extension with a `resolve` hook, field extensions or permissions,
exception handlers, input objects, enums or nested lists as arguments, subscriptions, an
abort signal, an awaitable leaf, null, an error, a value of the wrong type) takes
graphql-core's and Strawberry's own path, with any value already read, so errors, null
propagation and paths are graphql-core's. `tests/test_execution.py` runs documents through
both and compares.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, TypeGuard

from graphql import (
    GraphQLBoolean,
    GraphQLField,
    GraphQLID,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLResolveInfoHelpers,
    GraphQLString,
    Undefined,
    is_leaf_type,
    is_non_null_type,
)
from graphql.execution.executor import to_nodes
from graphql.execution.values import get_argument_values
from graphql.pyutils import Path, gather_with_cancel
from strawberry import ID as strawberry_ID
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types.base import StrawberryList, StrawberryOptional
from strawberry.types.field import StrawberryField

from graph_api.graph import early, plans, runners
from graph_api.graph.awaitables import is_awaitable
from graph_api.graph.known import KnownObjects, known_objects
from graph_api.graph.prepared import PREPARE

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
        plan = _completion(field.type, definition.python_name)
    _plans[id(field)] = (field, plan)
    return plan


def _completion(type_: GraphQLOutputType, attribute: str = "") -> _Plain | None:
    """How a value of `type_` completes here: a leaf, an object or a list of objects that
    Strawberry's `is_type_of` checks by value; None when only graphql-core's path can."""
    of_type = _nullable(type_)
    if is_leaf_type(of_type):
        return _Plain(attribute, of_type.coerce_output_value, None, None)
    if _checked_by_value(of_type):
        return _Plain(attribute, None, of_type, None)
    if isinstance(of_type, GraphQLList):
        item = of_type.of_type
        if _checked_by_value(_nullable(item)):
            return _Plain(attribute, None, _nullable(item), item)
    return None


def _nullable(type_: Any) -> Any:
    return type_.of_type if isinstance(type_, GraphQLNonNull) else type_


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


class Direct(NamedTuple):
    """How to call a resolver function without Strawberry's generic wrapper."""

    field: StrawberryField
    function: Callable[..., Any]  # the resolver's function (what StrawberryResolver calls)
    arguments: tuple[tuple[str, str], ...]  # (GraphQL name, Python name)
    self_source: bool  # a method: the source is `self`
    source_names: tuple[str, ...]  # `root` / `parent` parameters, given the source
    info_name: str | None  # the parameter that takes Strawberry's Info
    # A method marked `prepared_by`: its `prepare` (graph/prepared.py), else None.
    prepare: Callable[..., Callable[[Any], Any]] | None
    # Arguments that are lists of such scalars: each call gets its own copy, as Strawberry
    # gives it (graphql-core hands every request that omits one the same default list).
    lists: tuple[str, ...]


def _direct(field: GraphQLField, strawberry_schema: Any) -> Direct | None:
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
        and callable(resolver.wrapped_func)
        # Strawberry's own wrapper (a subscription's `resolve` returns the event instead)
        and getattr(field.resolve, "__name__", "") in _STRAWBERRY_WRAPPERS
        and not definition.extensions  # permissions, field extensions
        and not strawberry_schema.exception_handlers
        and all(
            _as_coerced(argument.type) or _as_coerced_list(argument.type)
            for argument in definition.arguments
        )
    ):
        names = strawberry_schema.config.name_converter
        self_source = resolver.self_parameter is not None
        source_names = tuple(
            p.name for p in (resolver.root_parameter, resolver.parent_parameter) if p
        )
        prepare = getattr(resolver.wrapped_func, PREPARE, None)
        plan = Direct(
            definition,
            resolver.wrapped_func,
            tuple((names.from_argument(a), a.python_name) for a in definition.arguments),
            self_source,
            source_names,
            resolver.info_parameter.name if resolver.info_parameter else None,
            prepare if self_source and not source_names else None,
            tuple(a.python_name for a in definition.arguments if _as_coerced_list(a.type)),
        )
    _directs[id(field)] = (field, plan)
    return plan


def _as_coerced(type_: Any) -> bool:
    if type(type_) is StrawberryOptional:  # not its subclass Maybe, which wraps in Some()
        type_ = type_.of_type
    return type_ in _AS_COERCED


def _as_coerced_list(type_: Any) -> bool:
    """A list of such scalars (`ids: [ID!]!`): Strawberry hands over a copy of it."""
    if type(type_) is StrawberryOptional:
        type_ = type_.of_type
    return type(type_) is StrawberryList and _as_coerced(type_.of_type)


_directs: dict[int, tuple[GraphQLField, Direct | None]] = {}
_STRAWBERRY_WRAPPERS = ("_resolver", "_async_resolver")  # GraphQLCoreConverter.from_resolver


class _Step:
    """One field of a selection set, as `execute_fields` runs it."""

    __slots__ = (
        "attribute",
        "completion",
        "direct",
        "field_def",
        "field_details_list",
        "itself",
        "name",
    )

    def __init__(
        self,
        name: str,
        field_details_list: Any,
        field_def: GraphQLField | None,
        plain: _Plain | None,
        itself: type | None,
        direct: Direct | None,
    ) -> None:
        self.name = name  # the response key
        self.field_details_list = field_details_list
        self.field_def = field_def  # None: not a field of the type, left out of the answer
        # What a plain field reads; None: a direct call (`direct`), else `execute_field`.
        self.attribute = plain.attribute if plain and field_def else None
        # A plain leaf whose values of this exact type are their own serialization (a `str`
        # for String and ID, a `bool` for Boolean): read and kept as they are.
        self.itself = itself
        self.direct = direct  # a resolver called directly (`_call`), when not plain
        # How its value completes here: the plain read's, or for a direct call its type's.
        self.completion = plain or (_completion(field_def.type) if direct and field_def else None)


# Built-in scalars whose `coerce_output_value` returns a value of this exact type unchanged.
_SERIALIZED_AS_ITSELF = ((GraphQLString, str), (GraphQLID, str), (GraphQLBoolean, bool))

# A Path made as its NamedTuple's `__new__` does, without that function's call.
_path = tuple.__new__


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
        awaitables = [value for value in values if is_awaitable(value)]
        if awaitables:
            future = asyncio.gather(*awaitables, return_exceptions=True)
            _settling.add(future)  # a pending future nothing refers to may be collected
            future.add_done_callback(_settling.discard)


_settling: set[asyncio.Future[Any]] = set()


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
        self.is_awaitable = is_awaitable
        # graphql-core's helpers are this context's bound methods, and it holds them: a
        # reference cycle, so every object of the request waited for the garbage collector
        # (`build_response`). `gather_async_work` needs no context; `track` holds it weakly.
        self.async_helpers = GraphQLResolveInfoHelpers(
            gather=_gather_values, track=_Track(weakref.ref(self))
        )
        # Arguments of direct calls (`_call`), by field node: built-in scalars only.
        self._arguments: dict[tuple[int, int, int], dict[str, Any]] = {}
        # The function of each selection set (`graph.runners`): graphql-core collects a
        # selection set once per type and field nodes, so its identity stands for them (the
        # set kept alive).
        self._runs: dict[int, tuple[Any, runners.Run]] = {}
        # Root fields started as the request arrived, by their first field node's id: each
        # call of one takes its task (`graph.early`).
        started = getattr(self.context_value, "started", None)
        self._started: dict[int, Any] | None = started or None

    def execute_fields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Path | None,
        grouped_field_set: Any,
        position_context: Any,
    ) -> Any:
        """graphql-core's `execute_fields`, by the function written for the selection set
        (`graph.runners`): a plain leaf read and kept in place, a plain object completed by
        its own selection's function; any other field through `execute_field`."""
        if position_context is not None or not self._plain:  # @defer: graphql-core's own
            return super().execute_fields(
                parent_type, source_value, path, grouped_field_set, position_context
            )
        known = self._runs.get(id(grouped_field_set))
        if known is not None:
            return known[1](source_value, path)
        if path is None:  # the operation's root: its plan may be kept from an earlier request
            plan = plans.root_plan(self.schema, self.operation, parent_type)
            if plan is None:
                plan = self._plan_of(parent_type, grouped_field_set)
                plans.keep_root_plan(self.schema, self.operation, self.fragment_definitions, plan)
            early.learn(self, plan)
        else:
            plan = self._plan_of(parent_type, grouped_field_set)
        return self._bind(plan)(source_value, path)

    def _plan_of(self, parent_type: GraphQLObjectType, grouped_field_set: Any) -> plans.Plan:
        """The selection set's plan, and those of the object fields under it."""
        steps = self._plan_steps(parent_type, grouped_field_set)
        kept, kinds, calls, children = [], [], [], []
        for step in steps:
            if step.field_def is None:
                continue  # not a field of the type, left out of the answer
            call = None
            child = None
            if step.attribute is not None and step.itself:
                kind = runners.ITSELF  # completed, when it must be, by `_complete_step`
            elif step.attribute is not None:
                kind = runners.READ
                child = self._child_of(step)
            elif step.direct is not None:
                kind = runners.DIRECT
                child = self._child_of(step)
                prepared = step.direct.prepare is not None and step.completion is not None
                call = runners.prepared_call if prepared else runners.direct_call
            else:
                kind = runners.FIELD
            kept.append(step)
            kinds.append(kind)
            calls.append(call)
            children.append(child)
        return plans.Plan(
            parent_type,
            grouped_field_set,
            tuple(kept),
            tuple(kinds),
            tuple(calls),
            tuple(children),
            runners.factory_of(kept, kinds),
        )

    def _child_of(self, step: _Step) -> tuple[plans.Plan, KnownObjects] | None:
        """The plan of the selection under a plain object or list of objects, and the
        objects it admits; None when the step's value completes by `_complete_step`."""
        completion = step.completion
        object_type = completion.object_type if completion else None
        if object_type is None:
            return None
        selection, new_defer_usages, _ = self.collect_subfields(
            object_type, step.field_details_list
        )
        if new_defer_usages:  # @defer below: graphql-core's own
            return None
        return self._plan_of(object_type, selection), known_objects(object_type)

    def _bind(self, plan: plans.Plan) -> runners.Run:
        """The plan's function for this request, and those of the object fields under it."""
        known = self._runs.get(id(plan.grouped))
        if known is not None:
            return known[1]
        parent_type = plan.parent_type
        functions: list[Any] = []
        for step, kind, call, child in zip(
            plan.steps, plan.kinds, plan.calls, plan.children, strict=True
        ):
            if kind in (runners.ITSELF, runners.FIELD):
                functions.append(None)
                continue
            if child is None:
                complete = runners.generic(self, step, parent_type)
            else:
                complete = runners.objects(self, step, parent_type, self._bind(child[0]), child[1])
            functions.append(complete if call is None else call(self, step, parent_type, complete))
        run = plan.factory(self, parent_type, plan.steps, functions)
        self._runs[id(plan.grouped)] = (plan.grouped, run)
        return run

    def build_response(self, data: Any) -> Any:
        """graphql-core's response, once the operation's fields are done. The selection
        functions are dropped here: they hold this context's methods and it holds them.

        No reference cycle is left, so the request's objects are freed as it ends. Left to
        the garbage collector they cost Q1 0.4 ms of CPU a request (2.7 -> 2.3 ms through
        the ASGI app): a young-generation collection every ~90 requests walked them all."""
        self._runs.clear()
        self._arguments.clear()
        return super().build_response(data)

    @staticmethod
    def _settled(container: Any, pending: list[Any]) -> Any:
        """`container` (an object's fields, a list's items) once its awaitable values at
        `pending` (keys, indexes) are awaited, as graphql-core's `gather_with_cancel` does;
        one alone is awaited in place, without a task of its own."""

        async def settled() -> Any:
            if len(pending) == 1:
                key = pending[0]
                container[key] = await container[key]
                return container
            values = await gather_with_cancel(*(container[key] for key in pending))
            for key, value in zip(pending, values, strict=True):
                container[key] = value
            return container

        return settled()

    def _complete_step(
        self,
        step: _Step,
        parent_type: GraphQLObjectType,
        field_path: Path,
        value: Any,
        info: Any = None,
    ) -> Any:
        """A step's value completed where the selection functions' short paths do not apply
        (`graph.runners`): here when it is known (`_complete_read`), else by graphql-core."""
        completion = step.completion
        field_def = step.field_def
        assert field_def is not None
        if completion is None:  # a direct call of a type only graphql-core completes
            try:
                return self._complete_resolved(
                    field_def.type, step.field_details_list, info, field_path, value
                )
            except Exception as raw_error:
                self._field_error(raw_error, step, field_path)
                return None
        return self._complete_read(
            completion, field_def, parent_type, step.field_details_list, field_path, value, info
        )

    def _field_error(self, raw_error: Exception, step: _Step, path: Path) -> None:
        """graphql-core's handling of a field's error: recorded for a nullable field (its
        value is then null), raised to the parent for a non-null one."""
        assert step.field_def is not None
        self.handle_field_error(raw_error, step.field_def.type, step.field_details_list, path)

    def _plan_steps(self, parent_type: GraphQLObjectType, grouped_field_set: Any) -> list[_Step]:
        steps = []
        for name, field_details_list in grouped_field_set.items():
            node = field_details_list[0].node
            field_def = self.schema.get_field(parent_type, node.name.value)
            plain = None if field_def is None or node.arguments else _plan(field_def)
            itself = None
            if plain is not None and plain.serialize is not None:
                assert field_def is not None
                leaf = _nullable(field_def.type)
                itself = next((t for scalar, t in _SERIALIZED_AS_ITSELF if leaf is scalar), None)
            direct = _direct(field_def, self._strawberry) if field_def and not plain else None
            steps.append(_Step(name, field_details_list, field_def, plain, itself, direct))
        return steps

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
        if not self._plain or position_context is not None:  # @defer: graphql-core's own
            return super().execute_field(
                parent_type, source, field_details_list, path, position_context
            )
        plan = None if first.arguments else _plan(field_def)
        direct = None if plan else _direct(field_def, self._strawberry)
        if plan is None and direct is None:
            return super().execute_field(
                parent_type, source, field_details_list, path, position_context
            )
        if plan is not None:
            try:
                result = getattr(source, plan.attribute)
            except Exception as raw_error:
                self.handle_field_error(raw_error, field_def.type, field_details_list, path)
                return None
            return self._complete_read(
                plan, field_def, parent_type, field_details_list, path, result
            )
        # A mutation's root field (executed serially): a step of its own, called as the
        # selection functions call a resolver.
        step = _Step(str(path.key), field_details_list, field_def, None, None, direct)
        complete = runners.generic(self, step, parent_type)
        return runners.direct_call(self, step, parent_type, complete)(source, path)

    def _complete_read(
        self,
        plan: _Plain,
        field_def: GraphQLField,
        parent_type: GraphQLObjectType,
        field_details_list: Any,
        path: Path,
        result: Any,
        info: Any = None,
    ) -> Any:
        """A field's value (read from its source, or a direct call's `info` given)
        completed: here when it is known, else by graphql-core."""
        return_type = field_def.type
        try:
            if result is None:
                if not is_non_null_type(return_type):
                    return None
            elif not self.is_awaitable(result):
                try:
                    completed = self._complete_plain(plan, field_details_list, path, result)
                except _Slow:
                    pass
                else:
                    if self.is_awaitable(completed):
                        return self._await_completed(
                            completed, return_type, field_details_list, path
                        )
                    return completed
            if info is None:
                info = self.build_resolve_info(
                    field_def, to_nodes(field_details_list), parent_type, path
                )
            return self._complete_resolved(return_type, field_details_list, info, path, result)
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, field_details_list, path)
            return None

    def _complete_resolved(
        self,
        return_type: GraphQLOutputType,
        field_details_list: Any,
        info: Any,
        path: Path,
        result: Any,
    ) -> Any:
        """graphql-core's completion of a resolved value (`execute_field`'s second half);
        an error raises, for the caller to handle."""
        if self.is_awaitable(result):
            return self.complete_awaitable_value(
                return_type, field_details_list, info, path, result, None
            )
        completed = self.complete_value(return_type, field_details_list, info, path, result, None)
        if self.is_awaitable(completed):
            return self._await_completed(completed, return_type, field_details_list, path)
        return completed

    def _call(
        self,
        direct: Direct,
        field_def: GraphQLField,
        node: Any,
        field_details_list: Any,
        source: Any,
        info: Any,
    ) -> Any:
        """The resolver function called as Strawberry's wrapper calls it: the source as
        `self`, `root` or `parent`, Strawberry's Info, the arguments by their Python names;
        a root field started as the request arrived gives its task instead."""
        if self._started is not None:
            started = self._started.pop(id(node), None)
            if started is not None:
                return started
        kwargs = self._kwargs(direct, field_def, node, field_details_list)
        for name in direct.source_names:
            kwargs[name] = source
        if direct.info_name is not None:
            kwargs[direct.info_name] = self._info_class(_raw_info=info, _field=direct.field)
        function = direct.function
        return function(source, **kwargs) if direct.self_source else function(**kwargs)

    def _prepare(
        self, step: _Step, parent_type: GraphQLObjectType, path: Path
    ) -> Callable[[Any], Any]:
        """A `prepared_by` resolver's `prepare`, called as `_call` calls the resolver (with
        the resolve info of the call at `path`), without a source: what to call with each."""
        direct, field_def = step.direct, step.field_def
        assert direct is not None and direct.prepare is not None and field_def is not None
        details = step.field_details_list
        kwargs = self._kwargs(direct, field_def, details[0].node, details)
        if direct.info_name is not None:
            info = self.build_resolve_info(field_def, to_nodes(details), parent_type, path)
            kwargs[direct.info_name] = self._info_class(_raw_info=info, _field=direct.field)
        return direct.prepare(**kwargs)

    def _kwargs(
        self, direct: Direct, field_def: GraphQLField, node: Any, field_details_list: Any
    ) -> dict[str, Any]:
        """A direct call's arguments by their Python names, its lists its own copies."""
        kwargs = dict(self._arguments_of(direct, field_def, node, field_details_list))
        for name in direct.lists:
            if kwargs.get(name) is not None:
                kwargs[name] = list(kwargs[name])
        return kwargs

    def _arguments_of(
        self, direct: Direct, field_def: GraphQLField, node: Any, field_details_list: Any
    ) -> dict[str, Any]:
        """A direct call's arguments by their Python names. The same field of the document
        under 30 parents has the same arguments (the variables are fixed for the operation):
        they are worked out once."""
        fragment_values = field_details_list[0].fragment_variable_values
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
        return arguments

    def _complete_plain(
        self, plan: _Plain, field_details_list: Any, path: Path, result: Any
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
        known = known_objects(object_type)
        if plan.item_type is None:
            if not known(result):
                raise _Slow
            return self._execute_object(object_type, field_details_list, path, result)
        items = result if isinstance(result, list) else None
        if items is None or not all(map(known, items)):
            raise _Slow
        return self._complete_objects(
            lambda item, item_path: self._execute_object(
                object_type, field_details_list, item_path, item
            ),
            plan.item_type,
            field_details_list,
            path,
            items,
        )

    def _complete_objects(
        self,
        run: Callable[[Any, Path], Any],
        item_type: GraphQLOutputType,
        field_details_list: Any,
        path: Path,
        items: list[Any],
    ) -> Any:
        """A list of known objects, each completed by `run(item, its path)` as graphql-core's
        `complete_list_item_value` completes it."""
        completed: list[Any] = []
        pending: list[int] = []
        try:
            for index, item in enumerate(items):
                item_path = _path(Path, (path, index, None))  # path.add_key
                try:
                    value = run(item, item_path)
                except Exception as raw_error:  # raises again when the item is non-null
                    self.handle_field_error(raw_error, item_type, field_details_list, item_path)
                    value = None
                if type(value) is not dict and is_awaitable(value):
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
        return self._settled(completed, pending)

    def _execute_object(
        self, object_type: GraphQLObjectType, field_details_list: Any, path: Path, source: Any
    ) -> Any:
        """`collect_and_execute_subfields` outside @defer: the object's selection set run by
        `execute_fields`."""
        grouped_field_set, new_defer_usages, _ = self.collect_subfields(
            object_type, field_details_list
        )
        if new_defer_usages:
            return self.execute_collected_subfields(
                object_type, source, path, grouped_field_set, new_defer_usages, None
            )
        return self.execute_fields(object_type, source, path, grouped_field_set, None)

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
