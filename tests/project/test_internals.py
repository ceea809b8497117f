"""Pins each private or undocumented attribute of a library that `graph_api.internals` lists:
an upgrade that renames, removes or changes one fails here, not in a request.

Each test names the row of the table in `graph_api/internals/__init__.py` it pins; the
tables of methods get one case per method. The last tests take an attribute away and show
that its pin then fails."""

from __future__ import annotations

import ast
import asyncio
import inspect
import pathlib
import re
from collections.abc import AsyncGenerator, Callable
from datetime import timedelta
from typing import Any

import pytest
import strawberry
from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLInt,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLResolveInfo,
    GraphQLSchema,
    GraphQLString,
    MiddlewareManager,
    NameNode,
    OperationDefinitionNode,
    build_schema,
    parse,
    specified_rules,
)
from graphql.execution.collect_fields import FieldDetails
from graphql.execution.executor import Executor
from graphql.pyutils import Path
from starlette.responses import Response
from starlette.testclient import TestClient
from strawberry.asgi import GraphQL
from strawberry.extensions import DisableIntrospection, ParserCache
from strawberry.http import GraphQLRequestData
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.subscriptions import GRAPHQL_SSE_PROTOCOL, GRAPHQL_WS_PROTOCOL
from strawberry.types import Info
from strawberry.types.graphql import OperationType

from graph_api import internals
from graph_api.internals import graphql_core
from graph_api.internals import strawberry as sb
from graph_api.internals.starlette import header_fields

# -- graphql-core (rows 1-14) ----------------------------------------------------------------

SDL = """
type Query { hello: String, n: Int!, boom: String, obj: Obj }
type Obj { a: String, b: Int }
"""


def _boom(*_: Any) -> str:
    raise ValueError("boom")


ROOT = {"hello": "hi", "n": 5, "boom": _boom, "obj": {"a": "x", "b": 2}}


def _executor(document: str = "{ hello obj { a b } }") -> Any:
    built = sb.StrawberryExecutor.build(build_schema(SDL), parse(document), ROOT)
    assert not isinstance(built, list), built
    return built


def _details(executor: Any, name: str) -> Any:
    """The field details of the root field `name` of the executor's operation."""
    selections = executor.operation.selection_set.selections
    node = next(s for s in selections if isinstance(s, FieldNode) and s.name.value == name)
    return [FieldDetails(node, None)]


def _root_details(executor: Any) -> Any:
    """The operation's selection set as one field's, to collect the root fields by."""
    node = FieldNode(name=NameNode(value="root"), selection_set=executor.operation.selection_set)
    return [FieldDetails(node, None)]


@pytest.mark.parametrize("name", sorted(graphql_core.EXECUTOR_METHODS))
def test_executor_method_signature(name: str) -> None:
    """Rows 1-10: each `Executor` method graph/engine/execution.py overrides or calls, still on the
    class Strawberry runs, with the parameters it is called with."""
    method = getattr(sb.StrawberryExecutor, name)
    parameters = tuple(inspect.signature(method).parameters)
    assert parameters == ("self", *graphql_core.EXECUTOR_METHODS[name])


def test_executor_methods_behave_as_relied_on() -> None:
    """Rows 1-10: one behaviour of each method, as graph/engine/execution.py relies on it."""
    executor = _executor()
    schema = executor.schema
    query = schema.query_type
    root = executor.collect_subfields(query, _root_details(executor))
    grouped = root.grouped_field_set  # collect_subfields: fields by response key
    assert list(grouped) == ["hello", "obj"] and root.new_defer_usages == []
    # execute_fields: the completed fields of a grouped field set, by response key.
    assert executor.execute_fields(query, ROOT, None, grouped, None) == {
        "hello": "hi",
        "obj": {"a": "x", "b": 2},
    }
    # execute_field: one field, resolved and completed.
    path = Path(None, "hello", "Query")
    assert executor.execute_field(query, ROOT, grouped["hello"], path, None) == "hi"
    # build_resolve_info: the info a resolver gets, with the executor's async helpers.
    info = executor.build_resolve_info(
        query.fields["hello"], [grouped["hello"][0].node], query, path
    )
    assert (info.field_name, info.path, info.parent_type) == ("hello", path, query)
    assert info.async_helpers is executor.async_helpers
    # complete_value: a leaf coerced by its type.
    assert executor.complete_value(GraphQLInt, grouped["hello"], info, path, 7, None) == 7
    # collect_and_execute_subfields: an object's selection, executed.
    obj = schema.get_type("Obj")
    obj_path = Path(None, "obj", "Query")
    assert executor.collect_and_execute_subfields(
        obj, grouped["obj"], obj_path, {"a": "y", "b": 3}, None
    ) == {"a": "y", "b": 3}
    # handle_field_error: a nullable field's error is collected at its path; a non-null
    # field's error is raised, for its parent to take.
    executor.handle_field_error(ValueError("no"), GraphQLString, grouped["hello"], path)
    (error,) = executor.collected_errors.errors
    assert error.message == "no" and error.path == ["hello"]
    with pytest.raises(GraphQLError):
        executor.handle_field_error(ValueError("no"), GraphQLNonNull(GraphQLInt), [], path)

    async def later() -> str:
        return "done"

    async def background() -> list[str]:
        settled: list[str] = []

        async def note(what: str) -> None:
            settled.append(what)

        # with_abort_signal: the awaitable's value (no abort signal here).
        assert await executor.with_abort_signal(later()) == "done"
        # settle_in_background, track_async_work: their awaitables run to the end.
        executor.settle_in_background([note("settled")])
        executor.track_async_work([1, note("tracked")])
        await asyncio.gather(*executor.background_futures)
        return settled

    assert sorted(asyncio.run(background())) == ["settled", "tracked"]


def test_wraps_resolvers() -> None:
    """Row 11: a manager with a resolver-wrapping middleware wraps; none, or one without
    a `resolve`, does not."""

    class Wrapping:
        def resolve(self, next_: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            return next_(*args, **kwargs)

    assert graphql_core.wraps_resolvers(MiddlewareManager(Wrapping()))
    assert not graphql_core.wraps_resolvers(MiddlewareManager(object()))
    assert not graphql_core.wraps_resolvers(None)


def test_unchanged_are_the_builtin_scalars_coercions() -> None:
    """Row 12: the functions are the built-in scalars' output coercions, and each returns a
    value of its types unchanged."""
    from graphql import GraphQLBoolean, GraphQLID

    coercions = {GraphQLString.serialize, GraphQLID.serialize, GraphQLBoolean.serialize}
    assert set(graphql_core.UNCHANGED) == coercions
    for coerce, types in graphql_core.UNCHANGED.items():
        for value in (True, "x"):
            if type(value) in types:
                assert coerce(value) is value


def test_make_path_is_a_path() -> None:
    """Row 13: a path made by `make_path` is the one `Path` makes."""
    made = graphql_core.make_path(graphql_core.make_path(None, "a", "Query"), 0, None)
    assert made == Path(Path(None, "a", "Query"), 0, None)
    assert (made.prev, made.key, made.typename) == (Path(None, "a", "Query"), 0, None)
    assert made.as_list() == ["a", 0] and type(made) is Path


def test_validation_aborted_error() -> None:
    """Row 14: graphql-core's validation raises it when it gives up."""
    from graphql import validate

    schema = build_schema(SDL)
    errors = validate(schema, parse("{ a b c }"), max_errors=1)
    assert isinstance(errors[-1], graphql_core.ValidationAbortedError)


# -- Strawberry (rows 15-65) -----------------------------------------------------------------


def test_strawberry_info_is_the_info_strawberry_gives_a_resolver() -> None:
    """Row 16."""
    seen: list[Info] = []  # type: ignore[type-arg]

    @strawberry.type
    class Query:
        @strawberry.field
        def hello(self, info: Info, name: str = "x") -> str:  # type: ignore[type-arg]
            seen.append(info)
            built = sb.strawberry_info(info._raw_info, info._field)
            assert type(built) is type(info)
            assert (built.field_name, built.path, built.selected_fields) == (
                info.field_name,
                info.path,
                info.selected_fields,
            )
            assert built.python_name == info.python_name == "hello"
            return name

    result = asyncio.run(strawberry.Schema(query=Query).execute('{ hello(name: "y") }'))
    assert result.errors is None and result.data == {"hello": "y"}
    assert len(seen) == 1


def test_raw_info_is_graphql_cores_resolve_info_of_the_field() -> None:
    """Row 15."""
    seen: list[GraphQLResolveInfo] = []

    @strawberry.type
    class Query:
        @strawberry.field
        def hello(self, info: Info) -> str:  # type: ignore[type-arg]
            seen.append(sb.raw_info(info))
            return "hi"

    result = asyncio.run(strawberry.Schema(query=Query).execute("{ a: hello }"))
    assert result.errors is None
    (raw,) = seen
    assert raw.parent_type.name == "Query" and raw.path.key == "a"
    assert (raw.field_name, [n.alias.value for n in raw.field_nodes if n.alias]) == ("hello", ["a"])


def test_graphql_schema_is_the_schema_strawberry_built() -> None:
    """Row 17."""

    @strawberry.type
    class Query:
        hello: str = "hi"

    built = sb.graphql_schema(strawberry.Schema(query=Query))
    assert isinstance(built, GraphQLSchema)
    assert internals.graphql_schema is sb.graphql_schema  # the package's old name for it
    assert built.query_type is not None and "hello" in built.query_type.fields


@strawberry.input
class Where:
    name: str = ""


@strawberry.type
class Item:
    name: str = "n"

    @strawberry.field
    def shout(self, times: int, words: list[str] | None = None, with_case: bool = False) -> str:
        return self.name * times

    @strawberry.field
    def by_root(self, root: Item, info: Info, first_one: int | None = None) -> str:  # type: ignore[type-arg]
        return root.name

    @strawberry.field
    def later(self, where: Where | None = None) -> str:  # an argument of an input type
        return "x"


@strawberry.type
class Cast:
    name: str = "c"

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return True


@strawberry.type
class ItemQuery:
    item: Item = strawberry.field(default_factory=Item)
    cast: Cast = strawberry.field(default_factory=Cast)


ITEMS = strawberry.Schema(query=ItemQuery)


def _field(type_name: str, name: str) -> Any:
    return sb.graphql_schema(ITEMS).get_type(type_name).fields[name]  # type: ignore[union-attr]


def test_strawberry_executor_is_the_default() -> None:
    """Row 18: the class Strawberry executes with, which graph/engine/execution.py subclasses."""
    seen: list[type] = []

    class Recording(sb.StrawberryExecutor):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            seen.append(type(self))

    schema = strawberry.Schema(query=ItemQuery, execution_context_class=Recording)
    result = asyncio.run(schema.execute("{ item { name } }", root_value=ItemQuery()))
    assert result.data == {"item": {"name": "n"}}
    assert seen == [Recording]
    assert strawberry.Schema(query=ItemQuery).execution_context_class is sb.StrawberryExecutor


def test_field_definition() -> None:
    """Row 19: the key under which a graphql-core field holds Strawberry's field."""
    assert GraphQLCoreConverter.DEFINITION_BACKREF == sb._DEFINITION
    definition = sb.field_definition(_field("Item", "name"))
    assert definition is not None and definition.python_name == "name"


def test_read_attribute() -> None:
    """Row 20: a field Strawberry reads by `getattr`, and one it calls a resolver for."""
    assert sb.read_attribute(_field("Item", "name")) == "name"
    assert sb.read_attribute(_field("Item", "shout")) is None


def test_resolver_call_calls_as_strawberry_does() -> None:
    """Row 21: called as `resolver_call` says, a resolver answers what Strawberry's wrapper
    makes it answer."""
    shout = sb.field_definition(_field("Item", "shout"))
    call = sb.resolver_call(shout)  # type: ignore[arg-type]
    assert call is not None and call.self_source and call.source_names == ()
    assert call.info_name is None and call.function(Item(), times=2) == "nn"
    by_root = sb.resolver_call(sb.field_definition(_field("Item", "byRoot")))  # type: ignore[arg-type]
    assert by_root is not None and by_root.source_names == ("root",)
    assert by_root.info_name == "info"
    name = sb.field_definition(_field("Item", "name"))
    assert sb.resolver_call(name) is None  # type: ignore[arg-type]


def test_resolver_call_arguments() -> None:
    """Rows 22-23: arguments by GraphQL name (camel case) and Python name, lists marked; an
    argument of another type leaves them unknown."""
    shout = sb.resolver_call(sb.field_definition(_field("Item", "shout")))  # type: ignore[arg-type]
    assert shout is not None and shout.arguments == (
        ("times", "times", False),
        ("words", "words", True),
        ("withCase", "with_case", False),
    )
    by_root = sb.resolver_call(sb.field_definition(_field("Item", "byRoot")))  # type: ignore[arg-type]
    assert by_root is not None and by_root.arguments == (("firstOne", "first_one", False),)
    later = sb.resolver_call(sb.field_definition(_field("Item", "later")))  # type: ignore[arg-type]
    assert later is not None and later.arguments is None


def test_strawberry_is_type_of() -> None:
    """Row 24: a type without its own `is_type_of`, and one with."""
    schema = sb.graphql_schema(ITEMS)
    assert sb.strawberry_is_type_of(schema.get_type("Item"))  # type: ignore[arg-type]
    assert not sb.strawberry_is_type_of(schema.get_type("Cast"))  # type: ignore[arg-type]


def test_cast_attribute() -> None:
    """Row 25: `strawberry.cast` marks a value with the attribute."""
    marked = strawberry.cast(Item, Item())
    assert getattr(marked, sb.CAST_ATTRIBUTE) is Item


def test_validate_document() -> None:
    """Row 26: graphql-core's errors for a document, under the rules given."""
    schema = sb.graphql_schema(ITEMS)
    rules = tuple(specified_rules)
    (error,) = sb.validate_document(schema, parse("{ nope }"), rules)
    assert "nope" in error.message
    assert sb.validate_document(schema, parse("{ item { name } }"), rules) == []
    assert sb.validate_document(schema, parse("{ nope }"), ()) == []


def test_validation_rules() -> None:
    """Row 27: `DisableIntrospection`'s rules refuse an introspection field."""
    rules = sb.validation_rules(DisableIntrospection())
    schema = sb.graphql_schema(ITEMS)
    assert sb.validate_document(schema, parse("{ __schema { queryType { name } } }"), rules)


def test_cached_parse_is_the_extensions_cache() -> None:
    """Row 28: a document parsed here is the one the extension's own parse returns."""
    parse_ = sb.cached_parse(7)
    document = parse_("{ item { name } }", max_tokens=100)
    assert ParserCache(maxsize=7).cached_parse_document("{ item { name } }", max_tokens=100) is (
        document
    )


def test_get_operation_type() -> None:
    """Row 29."""
    document = parse("query A { item { name } } mutation B { x }")
    assert sb.get_operation_type(document, "B") is OperationType.MUTATION
    assert sb.get_operation_type(document, "A") is OperationType.QUERY


def test_pre_execution_error() -> None:
    """Row 30: what a stream yields for a document refused before it runs."""

    @strawberry.type
    class Subscription:
        @strawberry.subscription
        async def ticks(self) -> AsyncGenerator[int, None]:  # pragma: no cover - never runs
            yield 1

    schema = strawberry.Schema(query=ItemQuery, subscription=Subscription)

    async def first() -> Any:
        stream = await schema.stream("subscription { nope }")
        return await anext(aiter(stream))

    assert isinstance(asyncio.run(first()), sb.PreExecutionError)


def _parameters(method: Any) -> tuple[str, ...]:
    return tuple(inspect.signature(method).parameters)[1:]  # after `self`


@pytest.mark.parametrize("name", sorted(sb.SCHEMA_HOOKS))
def test_schema_hook_signature(name: str) -> None:
    """Rows 31-32."""
    assert _parameters(getattr(strawberry.Schema, name)) == sb.SCHEMA_HOOKS[name]


@pytest.mark.parametrize("name", sorted(sb.VIEW_HOOKS))
def test_view_hook_signature(name: str) -> None:
    """Rows 33-41: each view method http/endpoint.py overrides or calls, with its parameters."""
    assert _parameters(getattr(GraphQL, name)) == sb.VIEW_HOOKS[name]


@pytest.mark.parametrize("name", sb.VIEW_ATTRIBUTES)
def test_view_attribute(name: str) -> None:
    """Rows 42-46: each view attribute http/endpoint.py sets or reads."""
    view = GraphQL(ITEMS, graphql_ide=None)
    assert hasattr(view, name)
    if name == "graphql_ide":
        assert view.graphql_ide is None


def test_legacy_handler_is_built_and_run_as_relied_on() -> None:
    """Row 43: the legacy protocol's handler class is built with `websocket=` and handled."""
    built: list[dict[str, Any]] = []

    class Refusing:
        def __init__(self, **kwargs: Any) -> None:
            built.append(kwargs)
            self.websocket = kwargs["websocket"]

        async def handle(self) -> None:
            await self.websocket.close(4406, "legacy")

    class View(GraphQL):  # type: ignore[type-arg]
        graphql_ws_handler_class = Refusing  # type: ignore[assignment]

    client = TestClient(View(ITEMS))  # no lifespan: Strawberry's app does not speak it
    with client.websocket_connect("/", subprotocols=[GRAPHQL_WS_PROTOCOL]) as socket:
        message = socket.receive()
    assert message["type"] == "websocket.close" and message["code"] == 4406
    assert len(built) == 1 and "websocket" in built[0]


def test_invalid_operation_type_is_the_cause() -> None:
    """Row 47: a mutation over GET: `execute_single`'s HTTPException, caused by the error
    that names the operation type."""
    causes: list[BaseException | None] = []

    @strawberry.type
    class Mutation:
        x: int = 1

    class View(GraphQL):  # type: ignore[type-arg]
        async def execute_single(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return await super().execute_single(*args, **kwargs)
            except Exception as error:
                causes.append(error.__cause__)
                raise

    view = View(strawberry.Schema(query=ItemQuery, mutation=Mutation))
    response = TestClient(view).get("/", params={"query": "mutation { x }"})
    assert response.status_code >= 400
    (cause,) = causes
    assert isinstance(cause, sb.InvalidOperationTypeError)
    assert cause.operation_type is OperationType.MUTATION


def test_request_data_protocol() -> None:
    """Row 48: a request's data says how it runs; set, it is what Strawberry reads."""
    data = GraphQLRequestData(
        query="{ item { name } }", variables=None, operation_name=None, extensions=None
    )
    assert sb.protocol_of(data) == "http"
    sb.run_as(data, "sse")
    assert sb.protocol_of(data) == "sse" == data.protocol
    seen: list[str] = []

    class View(GraphQL):  # type: ignore[type-arg]
        async def parse_http_body(self, request: Any) -> Any:
            parsed = await super().parse_http_body(request)
            sb.run_as(parsed, "sse")  # what http/endpoint.py does for a client that prefers it
            return parsed

        async def get_root_value(self, request: Any) -> ItemQuery:
            return ItemQuery()

    view = View(ITEMS, subscription_protocols=(GRAPHQL_SSE_PROTOCOL,))
    response = TestClient(view).post("/", json={"query": "{ item { name } }"})
    seen.append(response.headers["content-type"])
    assert seen[0].startswith("text/event-stream")
    assert '{"data":{"item":{"name":"n"}}}' in response.text.replace(" ", "")


@pytest.mark.parametrize("name", sorted(sb.SSE_HOOKS))
def test_sse_hook_signature(name: str) -> None:
    """Rows 49-50, and what the transport writes with them (http/sse.py rewrites CRLF)."""
    assert _parameters(getattr(sb.SSETransport, name)) == sb.SSE_HOOKS[name]
    arguments = ("next", "{}") if name == "encode_event" else ("keep-alive",)
    written = getattr(sb.SSETransport, name)(object.__new__(sb.SSETransport), *arguments)
    assert "\r\n" in written


@pytest.mark.parametrize("name", sorted(sb.WS_HOOKS))
def test_ws_hook_signature(name: str) -> None:
    """Rows 51-59."""
    method = getattr(sb.BaseGraphQLTransportWSHandler, name)
    assert _parameters(method) == sb.WS_HOOKS[name]


class _Socket:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.closed: list[tuple[int, str]] = []

    async def send_json(self, message: Any) -> None:
        self.sent.append(message)

    async def close(self, code: int, reason: str) -> None:
        self.closed.append((code, reason))


class _Context:
    connection_params: Any = None


def _handler(view: Any = None) -> Any:
    class View:
        async def on_ws_connect(self, context: Any) -> Any:
            return strawberry.UNSET

    return sb.BaseGraphQLTransportWSHandler(
        view=view or View(),
        websocket=_Socket(),
        context=_Context(),
        root_value=ItemQuery(),
        schema=ITEMS,
        connection_init_wait_timeout=timedelta(seconds=5),
        max_subscriptions_per_connection=3,
    )


def test_ws_handler_runs_as_relied_on() -> None:
    """Rows 60-63, 65: the handler's attributes; `connection_init` sets the context object's
    `connection_params` and acknowledges."""
    handler = _handler()
    for name in sb.WS_ATTRIBUTES:
        assert hasattr(handler, name), name
    assert not handler.connection_acknowledged
    payload = {"Authorization": "Bearer x"}
    asyncio.run(handler.handle_connection_init({"type": "connection_init", "payload": payload}))
    assert handler.context.connection_params == payload
    assert handler.connection_acknowledged
    assert handler.websocket.sent == [{"type": "connection_ack"}]


def test_ws_operations_change_only_as_relied_on() -> None:
    """Row 64: Strawberry changes a connection's `operations` only by `[]=`, `del` and
    `pop` (which http/websocket.py's `_Operations` reports), and an operation has its `task`."""
    source = inspect.getsource(inspect.getmodule(sb.BaseGraphQLTransportWSHandler))  # type: ignore[arg-type]
    uses = re.findall(r"self\.operations(\[[^\]]*\]\s*=(?!=)|\.[a-z_]+\(|\[)", source)
    kinds = {"set" if "=" in use else use for use in uses}
    assert kinds <= {"set", "[", ".pop(", ".values(", ".keys(", ".get("}, kinds
    assert "del self.operations[" in source
    changed: list[str] = []

    class Reported(dict[str, Any]):
        def __setitem__(self, key: str, value: Any) -> None:
            super().__setitem__(key, value)
            changed.append(f"set {key}")

        def pop(self, key: str, *default: Any) -> Any:
            changed.append(f"pop {key}")
            return super().pop(key, *default)

        def __delitem__(self, key: str) -> None:
            super().__delitem__(key)
            changed.append(f"del {key}")

    async def run() -> Any:
        handler = _handler()
        handler.operations = Reported()
        await handler.handle_connection_init({"type": "connection_init"})
        payload = {"query": "{ item { name } }"}
        await handler.handle_subscribe({"id": "1", "type": "subscribe", "payload": payload})
        operation = handler.operations["1"]
        assert isinstance(operation.task, asyncio.Task)
        await operation.task
        return handler.websocket.sent

    sent = asyncio.run(run())
    assert changed[0] == "set 1" and any(c.endswith(" 1") for c in changed[1:])
    assert {"id": "1", "type": "next", "payload": {"data": {"item": {"name": "n"}}}} in sent


# -- a pin fails when its attribute goes ------------------------------------------------------


def test_a_pin_fails_when_executor_method_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take `handle_field_error` away from graphql-core's `Executor`: its pins fail."""
    monkeypatch.delattr(Executor, "handle_field_error")
    with pytest.raises(AttributeError):
        test_executor_method_signature("handle_field_error")
    with pytest.raises(AttributeError):
        test_executor_methods_behave_as_relied_on()


def test_a_pin_fails_when_the_definition_key_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rename Strawberry's definition key: the pin of `field_definition` fails."""
    monkeypatch.setattr(GraphQLCoreConverter, "DEFINITION_BACKREF", "renamed")
    with pytest.raises(AssertionError):
        test_field_definition()


def test_a_pin_fails_when_a_view_hook_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give a view hook another parameter: its signature pin fails."""

    async def create_response(self: Any, response_data: Any, sub_response: Any, x: Any) -> Any:
        raise NotImplementedError

    monkeypatch.setattr(GraphQL, "create_response", create_response)
    with pytest.raises(AssertionError):
        test_view_hook_signature("create_response")


def test_sub_response_has_no_status_until_set() -> None:
    """Row 39: `create_response` computes the status when a resolver set none: Strawberry's
    sub-response starts without one, and without a content length."""
    sub_response = asyncio.run(GraphQL(ITEMS).get_sub_response(None))  # type: ignore[arg-type]
    assert not sub_response.status_code
    assert "content-length" not in sub_response.headers


# -- Starlette (rows 66-67) ------------------------------------------------------------------


def test_header_fields_are_what_the_response_sends() -> None:
    """Rows 66-67: fields appended to the list are sent, repeated ones and all, in order."""
    response = Response(b"{}", media_type="application/json")
    fields = header_fields(response)
    assert fields is response.raw_headers
    fields.extend([(b"ratelimit", b"a"), (b"ratelimit", b"b")])
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:  # pragma: no cover - a plain response reads nothing
        return {"type": "http.request"}

    asyncio.run(response({"type": "http"}, receive, send))
    headers = sent[0]["headers"]
    assert [v for k, v in headers if k == b"ratelimit"] == [b"a", b"b"]
    assert response.headers.getlist("ratelimit") == ["a", "b"]


# -- nowhere else ----------------------------------------------------------------------------

PACKAGE = pathlib.Path(internals.__file__).resolve().parent.parent  # graph_api/
# Modules whose names the libraries' docs do not promise (reached through internals/ only).
NON_PUBLIC_MODULES = (
    "graphql.execution.executor",
    "graphql.execution.middleware",
    "graphql.type.scalars",
    "graphql.validation.validate",
    "strawberry.http.base",
    "strawberry.http.streaming",
    "strawberry.resolvers",
    "strawberry.schema.schema",
    "strawberry.schema.schema_converter",
    "strawberry.subscriptions.protocols",
    "strawberry.types.base",
    "strawberry.types.cast",
    "strawberry.types.execution",
    "strawberry.utils",
)


def _touches(path: pathlib.Path) -> list[str]:
    """A module's imports of non-public library modules, and its reads of an underscored
    attribute of anything but `self` or `cls`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.startswith(NON_PUBLIC_MODULES) or "._" in node.module:
                found.append(f"{path.name}:{node.lineno} from {node.module}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
    return found


def test_no_touch_outside_internals() -> None:
    """graph_api reaches a library's private or undocumented names only through
    `graph_api.internals` (the embedded backend's moto patches are a development backend's)."""
    skipped = (PACKAGE / "internals", PACKAGE / "embedded")
    found = [
        touch
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.is_relative_to(skipped[0]) and not path.is_relative_to(skipped[1])
        for touch in _touches(path)
    ]
    assert found == []


@pytest.mark.parametrize("name", sb.VIEW_OPTIONS)
def test_view_option(name: str) -> None:
    """Row 68: the view takes the option, and hands it to the websocket handler it builds
    (as `BaseGraphQLTransportWSHandler.__init__`'s parameter of the same name)."""
    assert name in inspect.signature(GraphQL).parameters
    assert name in sb.WS_HOOKS["__init__"]
    view = GraphQL(ITEMS, **{name: timedelta(seconds=3) if "timeout" in name else 4})
    assert getattr(view, name) in (4, timedelta(seconds=3))


def test_the_table_names_a_pin_for_every_touch() -> None:
    """`graph_api.internals`' table: its rows number every touch it counts, and each names
    tests of this module that exist."""
    rows = [line for line in (internals.__doc__ or "").splitlines() if re.match(r"\| \d", line)]
    numbered: list[int] = []
    by_library: dict[str, int] = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        first, _, last = cells[0].partition("-")
        numbers = range(int(first), int(last or first) + 1)
        numbered.extend(numbers)
        by_library[cells[1]] = by_library.get(cells[1], 0) + len(numbers)
        for pin in cells[-1].split(";"):
            assert callable(globals().get(f"test_{pin.strip()}")), pin
    count = re.search(r"(\d+) touches", internals.__doc__ or "")
    assert count is not None and sorted(numbered) == list(range(1, int(count[1]) + 1))
    for library, touches in by_library.items():
        assert f"{library} {touches}" in " ".join((internals.__doc__ or "").split()), library


@strawberry.type
class Pet:
    name: str = "Rex"
    legs: int = 4


@strawberry.type
class PetQuery:
    @strawberry.field
    def pet(self) -> Pet:
        return Pet()


COLLECTED = """query($yes: Boolean!) {
  pet { name a: legs @include(if: $yes) ...F ... on Pet { b: name @skip(if: $yes) } }
  ...Q @skip(if: $yes)
}
fragment F on Pet { c: legs }
fragment Q on PetQuery { other: pet { legs } }"""


@pytest.mark.parametrize("yes", [True, False])
def test_collected_fields_are_the_executors(yes: bool) -> None:
    """Row 69: graphql-core's collection, root and subfields, is what its executor runs
    (the response keys in order), `@skip`/`@include` and fragments as the variables say."""
    schema = strawberry.Schema(query=PetQuery)
    graphql = sb.graphql_schema(schema)
    document = parse(COLLECTED)
    operation, *fragments = document.definitions
    assert isinstance(operation, OperationDefinitionNode)
    details = graphql_core.fragment_details(
        {f.name.value: f for f in fragments if isinstance(f, FragmentDefinitionNode)}
    )
    query_type, pet_type = graphql.query_type, graphql.get_type("Pet")
    assert query_type is not None and isinstance(pet_type, GraphQLObjectType)
    variables = {"yes": yes}
    root = graphql_core.collected_fields(graphql, details, variables, operation, query_type, None)
    pets = [node for node in root if node.name.value == "pet" and node.alias is None]
    under = graphql_core.collected_fields(graphql, details, variables, operation, pet_type, pets)
    result = asyncio.run(schema.execute(COLLECTED, variable_values=variables))
    assert result.errors is None and result.data is not None
    assert [(n.alias or n.name).value for n in root] == list(result.data)
    assert [(n.alias or n.name).value for n in under] == list(result.data["pet"])
