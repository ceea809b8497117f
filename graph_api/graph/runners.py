"""A selection set's fields run by a Python function written for it.

`ExecutionContext.execute_fields` plans each selection set of a request once (its `_Step`s).
Looping over those steps for every object still costs a dozen lookups a field, and every
object a chain of calls to complete it and to look its plan up again. Here the loop is
written out as source, one block per field, and compiled: a leaf is an attribute read and a
type test, an object field calls its selection set's own function directly. The source
depends only on the kinds of the steps, their response names and the attributes they read,
so it is compiled once per shape of selection set and shared by every request
(`_factories`); each request binds its own steps and closures to it.

Everything that is not the known case (an error, an awaitable, null, a value of another
type) goes to `ExecutionContext`'s methods for the step, which end in graphql-core's own
completion: what is generated here only ever runs the cases they would run the same way.
"""

from __future__ import annotations

import keyword
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from graphql import GraphQLObjectType, Undefined
from graphql.execution.executor import to_nodes
from graphql.pyutils import Path

from graph_api.graph.awaitables import COMPLETED, is_awaitable
from graph_api.graph.known import KnownObjects

if TYPE_CHECKING:
    from graph_api.graph.execution import ExecutionContext, _Step

# What a step's function is: `(value, path, info)` -> the completed value for a plain read
# or a completion; `(source, path)` -> the field's value for a direct resolver call.
Complete = Callable[[Any, Path, Any], Any]
Run = Callable[[Any, Path | None], Any]

# What a field of each step kind does, as source (`{i}`: its index, `{name}`: the response
# key's literal, `{read}`: the attribute read from `source`). Only names enter the source:
# a response key is a GraphQL name (`[_A-Za-z][_0-9A-Za-z]*`, the parser enforces it) written
# as a string literal, an attribute a Python name of our own types.

# A plain field's read: an error nulls the field (or raises, for a non-null one).
_TRY_READ = """
        try:
            v = {read}
        except Exception as error:
            field_error(error, s{i}, new(Path, (path, {name}, T)))
            v = None
        else:"""

_ITSELF = (
    _TRY_READ
    + """
            if type(v) is not x{i}:
                v = complete_step(s{i}, parent_type, new(Path, (path, {name}, T)), v)
                if type(v) not in COMPLETED and is_awaitable(v):
                    pending.append({name})
        results[{name}] = v"""
)

_READ = (
    _TRY_READ
    + """
            v = f{i}(v, new(Path, (path, {name}, T)), None)
        results[{name}] = v
        if type(v) not in COMPLETED and is_awaitable(v):
            pending.append({name})"""
)

_DIRECT = """
        v = results[{name}] = f{i}(source, new(Path, (path, {name}, T)))
        if type(v) not in COMPLETED and is_awaitable(v):
            pending.append({name})"""

_FIELD = """
        v = execute_field(
            parent_type, source, s{i}.field_details_list, new(Path, (path, {name}, T)), None
        )
        if v is not Undefined:
            results[{name}] = v
            if type(v) not in COMPLETED and is_awaitable(v):
                pending.append({name})"""

_MAKE = """
def make(ex, parent_type, steps, functions):
    T = parent_type.name
    field_error = ex._field_error
    complete_step = ex._complete_step
    execute_field = ex.execute_field
    settle = ex.settle_in_background
    settled = ex._settled
{bind}
    def run(source, path):
        results = {{}}
        pending = []
        try:{body}
        except Exception:
            if pending:  # as graphql-core: what other fields started must settle
                settle([results[name] for name in pending])
            raise
        if not pending:
            return results
        return settled(results, pending)

    return run
"""

# The kinds of step (what `ExecutionContext` tells `factory_of`).
ITSELF, READ, DIRECT, FIELD = "itself", "read", "direct", "field"
_TEMPLATES = {ITSELF: _ITSELF, READ: _READ, DIRECT: _DIRECT, FIELD: _FIELD}

Factory = Callable[["ExecutionContext", GraphQLObjectType, Sequence[Any], Sequence[Any]], Run]

# A selection set's shape: each step's kind, response name and attribute read.
Shape = tuple[tuple[str, str, str | None], ...]

# By shape: each compiled once. Bounded, as the documents are.
_factories: dict[Shape, Factory] = {}
MAX_FACTORIES = 1024


def factory_of(steps: Sequence[_Step], kinds: Sequence[str]) -> Factory:
    """The factory of the function that runs `steps` over a source object (`execute_fields`
    for them): `factory(ex, parent_type, steps, functions)`, compiled once a shape."""
    shape = tuple(zip(kinds, (s.name for s in steps), (s.attribute for s in steps), strict=True))
    factory = _factories.get(shape)
    if factory is None:
        namespace: dict[str, Any] = {}
        source = _source(shape)
        exec(compile(source, f"<selection {len(_factories)}>", "exec"), _GLOBALS, namespace)
        factory = namespace["make"]
        if len(_factories) >= MAX_FACTORIES:
            _factories.clear()
        _factories[shape] = factory
    return factory


def _source(shape: Shape) -> str:
    bind = []
    body = []
    for i, (kind, name, attribute) in enumerate(shape):
        bind.append(f"    s{i} = steps[{i}]\n    f{i} = functions[{i}]")
        if kind == ITSELF:
            bind.append(f"    x{i} = s{i}.itself")
        read = _read(attribute) if kind in (ITSELF, READ) else ""
        block = _TEMPLATES[kind].format(i=i, name=repr(name), read=read)
        body.append(textwrap.indent(block, "    "))  # inside `run`'s `try`
    return _MAKE.format(bind="\n".join(bind), body="".join(body) or "\n            pass")


def _read(attribute: str | None) -> str:
    assert attribute is not None
    if attribute.isidentifier() and not keyword.iskeyword(attribute):
        return f"source.{attribute}"
    return f"getattr(source, {attribute!r})"


# What the generated source refers to besides its factory's arguments.
_GLOBALS: dict[str, Any] = {
    "Path": Path,
    "new": tuple.__new__,  # a Path made without its NamedTuple's `__new__` call
    "COMPLETED": COMPLETED,
    "is_awaitable": is_awaitable,
    "Undefined": Undefined,
}


def generic(ex: ExecutionContext, step: _Step, parent_type: GraphQLObjectType) -> Complete:
    """A value completed by `_complete_step`, with every case it knows."""
    complete_step = ex._complete_step

    def complete(value: Any, path: Path, info: Any) -> Any:
        return complete_step(step, parent_type, path, value, info)

    return complete


def objects(
    ex: ExecutionContext,
    step: _Step,
    parent_type: GraphQLObjectType,
    run: Run,
    known: KnownObjects,
) -> Complete:
    """An object, or each object of a list, that `known` admits, completed by its selection's
    `run` (a list through `_complete_objects`); an awaitable, once awaited, the same way;
    anything else by `_complete_step`."""
    completion = step.completion
    assert completion is not None and step.field_def is not None
    item_type: Any = completion.item_type  # a list's item type (its errors name it)
    many = item_type is not None
    done = list if many else dict  # the completed value when nothing was left to await
    complete_step = ex._complete_step
    complete_objects = ex._complete_objects
    field_error = ex._field_error
    await_completed = ex._await_completed
    return_type = step.field_def.type
    details = step.field_details_list
    types = known.types  # the classes whose objects it admits: most objects are told here
    admits = known.admits
    # graphql-core races an awaited value with the abort signal: then its path awaits it.
    awaits = ex.abort_signal is None

    # Three functions, none of which refers back to another: a closure that did would be a
    # reference cycle left to the garbage collector, for every step of every request.
    def finish(value: Any, path: Path) -> Any:
        """A value `known` admits, completed by its selection's function."""
        try:
            result = (
                complete_objects(run, item_type, details, path, value) if many else run(value, path)
            )
        except Exception as error:
            field_error(error, step, path)
            return None
        if type(result) is done:
            return result
        return await_completed(result, return_type, details, path)  # an item's error nulls it

    async def resolved(awaitable: Any, path: Path, info: Any) -> Any:
        """graphql-core's `complete_awaitable_value`, by `finish` when it can."""
        try:
            value = await awaitable
        except Exception as error:
            field_error(error, step, path)
            return None
        admitted = (
            type(value) is list and all(type(i) in types or admits(i) for i in value)
            if many
            else type(value) in types or admits(value)
        )
        completed = (
            finish(value, path) if admitted else complete_step(step, parent_type, path, value, info)
        )
        if type(completed) in COMPLETED or not is_awaitable(completed):
            return completed
        return await completed

    def complete(value: Any, path: Path, info: Any) -> Any:
        if many:
            if type(value) is not list:
                if awaits and is_awaitable(value):
                    return resolved(value, path, info)
                return complete_step(step, parent_type, path, value, info)
            for item in value:
                if type(item) not in types and not admits(item):
                    return complete_step(step, parent_type, path, value, info)
        elif type(value) not in types and not admits(value):
            if awaits and is_awaitable(value):
                return resolved(value, path, info)
            return complete_step(step, parent_type, path, value, info)
        return finish(value, path)

    return complete


def direct_call(
    ex: ExecutionContext, step: _Step, parent_type: GraphQLObjectType, complete: Complete
) -> Run:
    """The step's resolver called directly (`ExecutionContext._call`), with the resolve info
    built once a call, its value given to `complete`."""
    field_def = step.field_def
    direct = step.direct
    assert field_def is not None and direct is not None
    details = step.field_details_list
    nodes = to_nodes(details)
    node = details[0].node
    build_resolve_info = ex.build_resolve_info
    call = ex._call
    field_error = ex._field_error

    def run(source: Any, path: Path | None) -> Any:
        assert path is not None
        try:
            info = build_resolve_info(field_def, nodes, parent_type, path)
            result = call(direct, field_def, node, details, source, info)
        except Exception as error:
            field_error(error, step, path)
            return None
        return complete(result, path, info)

    return run


_UNPREPARED = object()  # `prepare` raised: each call takes the resolver's own path
_NOT_YET = object()  # `prepare` not called yet


def prepared_call(
    ex: ExecutionContext, step: _Step, parent_type: GraphQLObjectType, complete: Complete
) -> Run:
    """A `prepared_by` resolver (graph/prepared.py): its `prepare` called once, with the first
    call's resolve info (`ExecutionContext._prepare`), and what it returns called with each
    source, its value given to `complete`. Should `prepare` raise, every call takes
    `direct_call`'s path, where the resolver raises the same error at that call's path."""
    prepare = ex._prepare
    field_error = ex._field_error
    unprepared = direct_call(ex, step, parent_type, complete)
    each: Any = _NOT_YET

    def run(source: Any, path: Path | None) -> Any:
        nonlocal each
        assert path is not None
        if each is _NOT_YET:
            try:
                each = prepare(step, parent_type, path)
            except Exception:
                each = _UNPREPARED
        if each is _UNPREPARED:
            return unprepared(source, path)
        try:
            result = each(source)
        except Exception as error:
            field_error(error, step, path)
            return None
        return complete(result, path, None)

    return run
