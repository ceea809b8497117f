"""graphql-core's executor, running each selection set of plain fields from a plan.

graphql-core runs the same steps for every field: a path, a resolve info, Strawberry's
resolver wrapper, completion through the return type's checks (one call per type
wrapper), and for an object the collection of its selection. Q1 of `make bench` resolves
813 fields, and those steps are most of its CPU.

Here `execute_fields` (the executor's method for the fields of one object) runs a *plan*:
the grouped field set as data, one step per response key, worked out once for each
(parent type, grouped field set): the 30 students of a list run one plan 30 times. An
operation keeps its plans from request to request on its operation plan (`graph/engine/plan/`:
one for each value of the variables that can change its grouped field sets, `@skip` and
`@include`'s among them), by the identity of its field nodes (Strawberry's parser cache
hands out the same document for the same text); one whose fragments declare variables of
their own works them out once a request. A step says how its field is read and completed:

- A *plain* field (Strawberry reads it with `getattr`: no resolver, arguments or field
  extensions) is read here, and a plain value completed here: a leaf by its type's
  `coerce_output_value` (as `complete_leaf_value`; a value of the type a built-in scalar
  returns unchanged is taken as it is), an object or each object of a list by the plan of
  its selection (as `complete_object_value`, after Strawberry's own `is_type_of`). Any
  other value (an awaitable, null, an error, a value its type refuses) completes through
  graphql-core's own `complete_value`.
- A resolver whose arguments are all built-in scalars or lists of them (a student's
  `classes(first:, ...)`, once per student; `students(ids:)`) is called as Strawberry's
  wrapper calls it (the source as `self`, `root` or `parent`, Strawberry's `Info`, the
  arguments by their Python names), without the wrapper's generic argument conversion,
  which returns such values as given (a list as a copy, made here each call too). Its
  arguments are coerced once a request for the step (scalars: no call can change them), or
  once for good when they read no variable.
- Any other field takes graphql-core's `execute_field`.

No plan runs when an extension wraps resolvers (a `resolve` hook) or for incremental
delivery: graphql-core's own `execute_fields` does. Errors go through graphql-core's
`handle_field_error`, so paths and null propagation are its own. It plugs in through
graphql-core's `execution_context_class` (Strawberry's `Schema(execution_context_class=)`);
no code is generated. `tests/graph/engine/test_execution.py` runs documents through it and
through the library's executor alone and compares.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from inspect import isawaitable
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
from graphql.execution.collect_fields import FieldDetailsList, GroupedFieldSet
from graphql.execution.values import get_argument_values
from graphql.pyutils import Path, gather_with_cancel
from strawberry.types.field import StrawberryField

from graph_api.graph.engine.document import reads_variables
from graph_api.internals.graphql_core import UNCHANGED, make_path, wraps_resolvers
from graph_api.internals.strawberry import (
    CAST_ATTRIBUTE,
    StrawberryExecutor,
    field_definition,
    read_attribute,
    resolver_call,
    strawberry_info,
    strawberry_is_type_of,
)


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
    attribute = read_attribute(field)
    if attribute is not None and not field.args:
        how = completion(field.type)
        found = (attribute, how) if how is not None else None
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
    lists: tuple[str, ...] = ()  # arguments that are lists of scalars: each call a copy


_PLAIN = frozenset({str, int, float, bool})  # never awaitable, never an error
# What `_run` and `_complete` produce or read that is never awaitable: no check needed.
_SETTLED = frozenset({dict, list, str, int, float, bool, type(None)})
_path = make_path  # `Path(prev, key, typename)`, made cheaper

_directs: dict[int, tuple[GraphQLField, Direct | None]] = {}


def direct(field: GraphQLField) -> Direct | None:
    """How to call the field's resolver directly; None when Strawberry's wrapper must:
    field extensions, an argument that is neither a built-in scalar nor a list of them, a
    subscription's (its events resolve to themselves) or an async generator."""
    known = _directs.get(id(field))
    if known is not None:
        return known[1]
    found: Direct | None = None
    definition = field_definition(field)
    call = resolver_call(definition) if definition is not None else None
    arguments = call.arguments if call is not None else None
    if (
        definition is not None
        and call is not None
        and arguments is not None
        and len(arguments) == len(field.args)
        and all(name in field.args for name, _, _ in arguments)
    ):
        found = Direct(
            definition,
            call.function,
            tuple((name, python) for name, python, _ in arguments),
            call.self_source,
            call.source_names,
            call.info_name,
            tuple(python for _, python, listed in arguments if listed),
        )
    _directs[id(field)] = (field, found)
    return found


_LEAF, _READ, _CALL, _GENERAL = range(4)  # the kinds of step (`Step`)

_NOTHING: frozenset[type] = frozenset()


class Step:
    """One response key of a plan: how its field is read (`kind`) and completed.

    `_LEAF`: a plain field of a leaf type, read and coerced in the plan's loop. `_READ`: a
    plain field of another type. `_CALL`: a resolver called directly (`direct`).
    `_GENERAL`: graphql-core's `execute_field`. How a value read or returned completes:
    `coerce` (a leaf: `unchanged` the types it returns as given), or `object_type` (an
    object; with `item_type`, a list of them) whose selection's plan is `sub`, worked out
    when first needed; neither: graphql-core's `complete_value`.
    """

    __slots__ = (
        "attribute",
        "call",
        "check",
        "coerce",
        "details",
        "field",
        "item_type",
        "kind",
        "kwargs",
        "name",
        "object_type",
        "passed",
        "sub",
        "unchanged",
        "varying",
    )

    def __init__(self, name: str, details: FieldDetailsList, field: GraphQLField | None) -> None:
        self.name = name
        self.details = details
        self.field = field
        self.kind = _GENERAL
        self.attribute = ""
        self.call: Direct | None = None
        self.coerce: Callable[[Any], Any] | None = None
        self.unchanged = _NOTHING
        self.object_type: GraphQLObjectType | None = None
        self.item_type: GraphQLOutputType | None = None
        self.check: Callable[[Any, Any], Any] | None = None  # the object type's is_type_of
        # Classes whose values passed every check of an object here (`_fits`): another value
        # of one passes them too, unless Strawberry's cast marks it.
        self.passed: set[type] = set()
        self.sub: Plan | None = None
        self.kwargs: dict[str, Any] | None = None  # a `_CALL`'s arguments, once coerced
        self.varying = False  # they are coerced once a request (the plan outlives it)

    def complete_as(self, how: Completion, directives: bool) -> None:
        coerce = how.coerce
        if coerce is not None:
            self.coerce = coerce
            self.unchanged = UNCHANGED.get(coerce, _NOTHING)
            return
        object_type = how.object_type
        # `@stream` on a list, and a type's own `is_type_of` (which may read the info):
        # graphql-core's own path.
        if object_type is not None and not directives and _own_check(object_type):
            self.object_type = object_type
            self.item_type = how.item_type
            self.check = object_type.is_type_of


Plan = tuple[Step, ...]


def _step(
    schema: Any, parent_type: GraphQLObjectType, name: str, details: FieldDetailsList, kept: bool
) -> Step:
    """The step of one response key of a grouped field set (`kept`: of a plan that serves
    request after request)."""
    node = details[0].node
    field_def = schema.get_field(parent_type, node.name.value)
    step = Step(name, details, field_def)
    step.varying = kept and any(reads_variables(a.value) for a in node.arguments or ())
    if field_def is None:
        return step  # graphql-core's `execute_field` leaves it out
    read = plain(field_def)
    how: Completion | None
    if read is not None:
        if node.arguments:
            return step  # validation refuses them; graphql-core says what it says
        step.kind = _LEAF if read[1].coerce is not None else _READ
        step.attribute, how = read
    else:
        call = direct(field_def)
        if call is None:
            return step
        step.kind = _CALL
        step.call = call
        how = completion_of(field_def)
    if how is not None:
        step.complete_as(how, any(d.node.directives for d in details))
    return step


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


class ExecutionContext(StrawberryExecutor):
    """Strawberry's execution context, running plans when no middleware wraps a resolver
    (Strawberry passes a manager always; an extension's `resolve` hook is one)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        manager = self.middleware_manager
        self._short = not wraps_resolvers(manager)
        # By parent type and grouped field set (graphql-core's, kept alive beside its plan
        # so that its id stays its own): this request's plans.
        self._plans: dict[tuple[GraphQLObjectType, int], tuple[GroupedFieldSet, Plan]] = {}
        # The operation's steps from request to request, kept on its plan (`graph/engine/plan/`:
        # one a set of the variables that change grouped field sets); and its `_CALL`
        # steps' arguments that read variables, this request's.
        plan = getattr(self.context_value, "plan", None)
        self._kept: dict[tuple[Any, ...], Plan] | None = plan.steps if plan is not None else None
        self._arguments: dict[Step, dict[str, Any]] = {}
        # graphql-core's helpers are this context's bound methods, and it holds them: a
        # reference cycle, so every object of the request (its context, loaders and items)
        # waited for the garbage collector (`tests/graph/engine/test_request_garbage.py`).
        # `gather_async_work` needs no context; `track` holds it weakly.
        self.async_helpers = GraphQLResolveInfoHelpers(
            gather=_gather_values, track=_Track(weakref.ref(self))
        )

    def execute_fields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Path | None,
        grouped_field_set: GroupedFieldSet,
        position_context: Any,
    ) -> Any:
        if not self._short or position_context is not None:
            return super().execute_fields(
                parent_type, source_value, path, grouped_field_set, position_context
            )
        return self._run(
            parent_type, self._plan(parent_type, grouped_field_set), source_value, path
        )

    def _plan(self, parent_type: GraphQLObjectType, grouped_field_set: GroupedFieldSet) -> Plan:
        key = (parent_type, id(grouped_field_set))
        known = self._plans.get(key)
        if known is not None:
            return known[1]
        kept = self._kept
        plan: Plan | None = None
        if kept is not None:
            # The field nodes, in order, are the set's: their names group them, and the
            # plan's steps hold them, so that their ids stay their own.
            nodes = (parent_type, *(id(d.node) for ds in grouped_field_set.values() for d in ds))
            plan = kept.get(nodes)
        if plan is None:
            schema = self.schema
            plan = tuple(
                _step(schema, parent_type, name, details, kept is not None)
                for name, details in grouped_field_set.items()
            )
            if kept is not None:
                kept[nodes] = plan
        self._plans[key] = (grouped_field_set, plan)
        return plan

    def _sub_plan(self, step: Step, object_type: GraphQLObjectType) -> Plan | None:
        """The plan of the step's selection on its object type (None: graphql-core's
        `collect_and_execute_subfields`, which `@defer` needs)."""
        grouped_field_set, new_defer_usages, _ = self.collect_subfields(object_type, step.details)
        if new_defer_usages:
            return None
        step.sub = self._plan(object_type, grouped_field_set)
        return step.sub

    def _run(
        self, parent_type: GraphQLObjectType, plan: Plan, source: Any, path: Path | None
    ) -> Any:
        """graphql-core's `execute_fields`, each field as its step says."""
        results: dict[str, Any] = {}
        pending: list[str] | None = None  # made for the first awaitable: most sets have none
        is_awaitable = self.is_awaitable
        type_name = parent_type.name
        try:
            for step in plan:
                kind = step.kind
                if kind == _LEAF:
                    try:
                        value = getattr(source, step.attribute)
                    except Exception:  # graphql-core's path reads it again, and reports it
                        value = _SLOW
                    else:
                        value_type = type(value)
                        if value_type in step.unchanged:
                            results[step.name] = value
                            continue
                        if value_type in _PLAIN:
                            try:
                                coerced = step.coerce(value)  # type: ignore[misc]
                            except Exception:  # graphql-core's path reports it, here
                                coerced = None
                            if coerced is not None and coerced is not Undefined:
                                results[step.name] = coerced
                                continue
                    result = self._read(
                        step, parent_type, source, _path(path, step.name, type_name), value
                    )
                elif kind == _READ:
                    field_path = _path(path, step.name, type_name)
                    try:
                        value = getattr(source, step.attribute)
                    except Exception:  # graphql-core's path reads it again, and reports it
                        result = self.execute_field(
                            parent_type, source, step.details, field_path, None
                        )
                    else:
                        sub = step.sub
                        if (
                            sub is not None
                            and step.item_type is None
                            and type(value) in step.passed
                            and getattr(value, _CAST, None) is None
                        ):  # `_complete`'s common case, an object of a class that passed
                            result = self._object(step, sub, value, field_path)
                        else:
                            result = self._complete(step, field_path, value)
                            if result is _SLOW:  # completed by graphql-core's steps, as read
                                result = self._finish(step, parent_type, field_path, value)
                elif kind == _CALL:
                    result = self._call(
                        step, parent_type, source, _path(path, step.name, type_name)
                    )
                else:
                    result = self.execute_field(
                        parent_type, source, step.details, _path(path, step.name, type_name), None
                    )
                    if result is Undefined:
                        continue
                results[step.name] = result
                if type(result) not in _SETTLED and is_awaitable(result):
                    if pending is None:
                        pending = [step.name]
                    else:
                        pending.append(step.name)
        except Exception:
            if pending:  # as graphql-core's: the other fields' awaitables may fail too
                self.settle_in_background([results[name] for name in pending])
            raise
        if pending is None:
            return results
        return _fields_gathered(results, pending)

    def _read(
        self, step: Step, parent_type: GraphQLObjectType, source: Any, path: Path, value: Any
    ) -> Any:
        """A plain field's completed value, `value` its attribute as read (`_SLOW`: its
        reading raised)."""
        if value is _SLOW:  # graphql-core's path reads it again, and reports it
            return self.execute_field(parent_type, source, step.details, path, None)
        done = self._complete(step, path, value)
        if done is not _SLOW:
            return done
        return self._finish(step, parent_type, path, value)  # completed as read

    def _call(self, step: Step, parent_type: GraphQLObjectType, source: Any, path: Path) -> Any:
        """graphql-core's `execute_field`, with the resolver called directly."""
        call = step.call
        assert call is not None
        field_def = step.field
        assert field_def is not None
        details = step.details
        info = self.build_resolve_info(field_def, [d.node for d in details], parent_type, path)
        try:
            kwargs = self._arguments.get(step) if step.varying else step.kwargs
            if kwargs is None:
                first = details[0]
                given = get_argument_values(
                    field_def,
                    first.node,
                    self.variable_values,
                    first.fragment_variable_values,
                    self.hide_suggestions,
                )
                kwargs = {py: given[name] for name, py in call.arguments if name in given}
                if step.varying:
                    self._arguments[step] = kwargs
                else:
                    step.kwargs = kwargs
            if call.source_names or call.info_name is not None or call.lists:
                kwargs = kwargs.copy()
                for name in call.lists:  # as Strawberry's: the call may change its list
                    listed = kwargs.get(name)
                    if listed is not None:
                        kwargs[name] = list(listed)
                for name in call.source_names:
                    kwargs[name] = source
                if call.info_name is not None:
                    kwargs[call.info_name] = strawberry_info(info, call.field)
            function = call.function
            result = function(source, **kwargs) if call.self_source else function(**kwargs)
            done = self._complete(step, path, result)
            if done is not _SLOW:
                return done
        except Exception as raw_error:
            self.handle_field_error(raw_error, field_def.type, details, path)
            return None
        return self._finish(step, parent_type, path, result, info)

    def _finish(
        self,
        step: Step,
        parent_type: GraphQLObjectType,
        path: Path,
        result: Any,
        info: Any = None,
    ) -> Any:
        """The rest of graphql-core's `execute_field` once its resolver returned `result`."""
        field_def = step.field
        assert field_def is not None
        return_type = field_def.type
        details = step.details
        if info is None:
            info = self.build_resolve_info(field_def, [d.node for d in details], parent_type, path)
        try:
            if self.is_awaitable(result):
                return self._later(step, path, result, info)
            completed = self.complete_value(return_type, details, info, path, result, None)
            if self.is_awaitable(completed):
                return self._await_completed(completed, return_type, details, path)
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, details, path)
            return None
        return completed

    async def _later(self, step: Step, path: Path, result: Awaitable[Any], info: Any) -> Any:
        """graphql-core's `complete_awaitable_value`, the value completed as the step says
        once awaited."""
        return_type = step.field.type  # type: ignore[union-attr]
        details = step.details
        try:
            resolved = await self.with_abort_signal(result)
            completed = self._complete(step, path, resolved)
            if completed is _SLOW:
                completed = self.complete_value(return_type, details, info, path, resolved, None)
            if self.is_awaitable(completed):
                completed = await completed
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, details, path)
            completed = None
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

    def _object(self, step: Step, plan: Plan, value: Any, path: Path) -> Any:
        """An object that passed `_complete`'s checks, completed by its selection's plan."""
        try:
            completed = self._run(step.object_type, plan, value, path)  # type: ignore[arg-type]
        except Exception as raw_error:
            self.handle_field_error(raw_error, _type_of(step), step.details, path)
            return None
        return self._settled(step, completed, path)

    def _settled(self, step: Step, completed: Any, path: Path) -> Any:
        """An object's completed fields, awaited first when one of them was awaitable."""
        if type(completed) is not dict and self.is_awaitable(completed):
            return self._await_completed(completed, _type_of(step), step.details, path)
        return completed

    def _complete(self, step: Step, path: Path, value: Any) -> Any:
        """The field's completed value as graphql-core's `complete_value` gives it, when it
        is a plain one: a leaf's plain value, an object or a list of objects that are not
        awaitable and are of the type (`is_type_of`); else `_SLOW`, with nothing done. An
        object's own fields run through its plan; errors go to `handle_field_error` at the
        same paths as graphql-core's."""
        coerce = step.coerce
        if coerce is not None:
            value_type = type(value)
            if value_type in step.unchanged:
                return value
            if value_type in _PLAIN:
                try:
                    coerced = coerce(value)
                except Exception:  # graphql-core's path reports it, at this field
                    return _SLOW
                if coerced is not None and coerced is not Undefined:
                    return coerced
            return _SLOW
        object_type = step.object_type
        if object_type is None:
            return _SLOW
        # What graphql-core's completion checks of an object, with Strawberry's is_type_of
        # (which reads no info): each one that fails leaves the value to graphql-core.
        item_type = step.item_type
        passed = step.passed
        if item_type is None:
            if not (type(value) in passed and getattr(value, _CAST, None) is None) and not _fits(
                step, value, step.check, self.is_awaitable
            ):
                return _SLOW
            plan = step.sub or self._sub_plan(step, object_type)
            if plan is not None:
                return self._object(step, plan, value, path)
            try:
                completed = self.collect_and_execute_subfields(
                    object_type, step.details, path, value, None
                )
            except Exception as raw_error:
                self.handle_field_error(raw_error, _type_of(step), step.details, path)
                return None
            return self._settled(step, completed, path)
        check = step.check
        is_awaitable = self.is_awaitable
        return_type = step.field.type  # type: ignore[union-attr]
        details = step.details
        if type(value) is not list:
            return _SLOW
        for item in value:
            if not (type(item) in passed and getattr(item, _CAST, None) is None) and not _fits(
                step, item, check, is_awaitable
            ):
                return _SLOW
        plan = step.sub or self._sub_plan(step, object_type)
        results: list[Any] = []
        pending: list[int] = []
        try:
            for index, item in enumerate(value):
                item_path = _path(path, index, None)
                try:
                    if plan is None:
                        completed = self.collect_and_execute_subfields(
                            object_type, details, item_path, item, None
                        )
                    else:
                        completed = self._run(object_type, plan, item, item_path)
                    if type(completed) is not dict and is_awaitable(completed):
                        completed = self._await_completed(completed, item_type, details, item_path)
                        pending.append(index)
                    results.append(completed)
                except Exception as raw_error:
                    self.handle_field_error(raw_error, item_type, details, item_path)
                    results.append(None)
        except Exception as raw_error:  # a non-null item failed: the list fails
            if pending:
                self.settle_in_background([results[index] for index in pending])
            self.handle_field_error(raw_error, return_type, details, path)
            return None
        if not pending:
            return results
        return self._await_completed(_items_gathered(results, pending), return_type, details, path)


def _type_of(step: Step) -> GraphQLOutputType:
    """The return type of a step's field (a step that completes here has its field)."""
    assert step.field is not None
    return step.field.type


async def _fields_gathered(results: dict[str, Any], pending: list[str]) -> dict[str, Any]:
    """The fields once their pending values are done, as graphql-core's `execute_fields`
    gathers them."""
    if len(pending) == 1:
        results[pending[0]] = await results[pending[0]]
    else:
        done = await gather_with_cancel(*(results[name] for name in pending))
        results.update(zip(pending, done, strict=True))
    return results


async def _items_gathered(results: list[Any], pending: list[int]) -> list[Any]:
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
        known = _owns[id(object_type)] = (object_type, strawberry_is_type_of(object_type))
    return known[1]


def _fits(
    step: Step, value: Any, check: Callable[[Any, Any], Any] | None, is_awaitable: Any
) -> bool:
    """What graphql-core's completion checks of an object (not null, not an error, not
    awaitable) and Strawberry's `is_type_of` (which reads no info), all passed. The value's
    class is then remembered on the step when those answers depend on the class alone
    (`_by_class`) and no cast marks the value: the next value of it is told by one look."""
    if (
        value is None
        or isinstance(value, Exception)
        or is_awaitable(value)
        or (check is not None and check(value, None) is not True)
    ):
        return False
    cls = type(value)
    if _by_class(cls) and getattr(value, _CAST, None) is None:
        step.passed.add(cls)
    return True


_CAST = CAST_ATTRIBUTE  # `strawberry.cast` marks a value with it: is_type_of reads it
_classes: dict[type, bool] = {}


def _by_class(cls: type) -> bool:
    """Whether the checks `_fits` makes answer the same for every value of `cls` that no cast
    marks: no class of its MRO (but `object`) defines attribute lookup, `__class__` or
    `__await__`, which those checks read (`hasattr`, `isinstance`)."""
    known = _classes.get(cls)
    if known is None:
        known = _classes[cls] = not any(
            name in base.__dict__
            for base in cls.__mro__
            if base is not object
            for name in ("__getattr__", "__getattribute__", "__class__", "__await__")
        )
    return known


_SLOW: Any = object()  # the short path declines: graphql-core's own path takes the field
