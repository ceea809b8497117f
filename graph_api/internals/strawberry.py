"""Strawberry's non-public API that graph_api relies on (`graph_api.internals` lists it).

Strawberry documents its types, fields, `Info`, extensions and the ASGI view's hooks
(`get_context`, `get_root_value`, `process_result`, `decode_json`, `encode_json`,
`render_graphql_ide`, `on_ws_connect`). The rest below is not documented: accessors for what
graph_api reads, and tables of the methods its subclasses override or call (`VIEW_HOOKS`,
`WS_HOOKS`, `SCHEMA_HOOKS`), each pinned by tests/project/test_internals.py.
"""

from __future__ import annotations

from collections.abc import Callable
from inspect import isasyncgenfunction
from types import FunctionType
from typing import Any, Literal, NamedTuple

from graphql import DocumentNode, GraphQLField, GraphQLObjectType, GraphQLResolveInfo, GraphQLSchema
from strawberry import ID
from strawberry.extensions import AddValidationRules, ParserCache
from strawberry.http import GraphQLRequestData
from strawberry.http.base import BaseRequestProtocol
from strawberry.http.streaming import SSETransport
from strawberry.resolvers import is_default_resolver
from strawberry.schema.base import BaseSchema
from strawberry.schema.exceptions import InvalidOperationTypeError
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext, validate_document
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    ConnectionInitMessage,
    Message,
    SubscribeMessage,
)
from strawberry.types import Info
from strawberry.types.base import StrawberryList, StrawberryOptional
from strawberry.types.cast import TYPE_CAST_ATTRIBUTE
from strawberry.types.execution import PreExecutionError
from strawberry.types.field import StrawberryField
from strawberry.utils.operation import get_operation_type
from strawberry.utils.str_converters import to_camel_case

__all__ = [
    "CAST_ATTRIBUTE",
    "SCHEMA_HOOKS",
    "SSE_HOOKS",
    "VIEW_ATTRIBUTES",
    "VIEW_HOOKS",
    "VIEW_OPTIONS",
    "WS_ATTRIBUTES",
    "WS_HOOKS",
    "BaseGraphQLTransportWSHandler",
    "BaseRequestProtocol",
    "ConnectionInitMessage",
    "InvalidOperationTypeError",
    "Message",
    "Operation",
    "PreExecutionError",
    "ResolverCall",
    "SSETransport",
    "StrawberryExecutor",
    "SubscribeMessage",
    "cached_parse",
    "field_definition",
    "get_operation_type",
    "graphql_schema",
    "protocol_of",
    "raw_info",
    "read_attribute",
    "resolver_call",
    "run_as",
    "strawberry_info",
    "strawberry_is_type_of",
    "validate_document",
    "validation_rules",
]

# The executor Strawberry runs operations with, which `Schema(execution_context_class=)`
# replaces (graph/engine/execution.py subclasses it).
StrawberryExecutor = StrawberryGraphQLCoreExecutionContext
# `strawberry.cast` marks a value with this attribute; Strawberry's `is_type_of` reads it.
CAST_ATTRIBUTE = TYPE_CAST_ATTRIBUTE
# Where Strawberry keeps a graphql-core field's or type's definition (`extensions`).
_DEFINITION = GraphQLCoreConverter.DEFINITION_BACKREF


def strawberry_info(raw: GraphQLResolveInfo[Any], field: StrawberryField) -> Info[Any, Any]:
    """Strawberry's `Info` for a resolver, built as its schema converter builds it."""
    return Info(_raw_info=raw, _field=field)


def raw_info(info: Info[Any, Any]) -> GraphQLResolveInfo[Any]:
    """graphql-core's resolve info under Strawberry's `Info`: the field nodes, fragments."""
    return info._raw_info


def graphql_schema(schema: BaseSchema) -> GraphQLSchema:
    """The graphql-core schema Strawberry built, which validation and pricing walk."""
    return schema._schema  # type: ignore[attr-defined,no-any-return]


def field_definition(field: GraphQLField) -> StrawberryField | None:
    """The Strawberry field a graphql-core field was built from (None: not Strawberry's)."""
    return field.extensions.get(_DEFINITION)


def read_attribute(field: GraphQLField) -> str | None:
    """The attribute a field reads, when Strawberry resolves it by `getattr` alone: its
    default resolver, no resolver function of its own, no field extensions."""
    definition = field_definition(field)
    if (
        definition is not None
        and field.resolve is not None
        and is_default_resolver(field.resolve)
        and definition.base_resolver is None
        and definition.default_resolver is getattr
        and not definition.extensions
    ):
        return definition.python_name
    return None


_SCALARS = (int, str, float, bool, ID)


class ResolverCall(NamedTuple):
    """How Strawberry's wrapper calls a field's resolver: its function, where the source and
    the info go, and its arguments (GraphQL name, Python name, a list of scalars), or None
    when one is neither a built-in scalar nor a list of them."""

    function: Callable[..., Any]
    self_source: bool  # the source as the first positional argument
    source_names: tuple[str, ...]  # `root`, `parent`: the source by keyword
    info_name: str | None
    arguments: tuple[tuple[str, str, bool], ...] | None


def resolver_call(definition: StrawberryField) -> ResolverCall | None:
    """How a field's resolver is called; None when only Strawberry's wrapper may call it:
    no resolver, field extensions, a subscription's (its events resolve to themselves), a
    static or class method, an async generator."""
    resolver = definition.base_resolver
    if (
        resolver is None
        or definition.is_subscription
        or definition.extensions
        or not isinstance(resolver.wrapped_func, FunctionType)
        or isasyncgenfunction(resolver.wrapped_func)
    ):
        return None
    arguments: list[tuple[str, str, bool]] = []
    scalars = True
    for argument in definition.arguments:
        type_ = argument.type
        if type(type_) is StrawberryOptional:  # not its subclass Maybe, which wraps
            type_ = type_.of_type
        listed = type(type_) is StrawberryList
        if listed:  # Strawberry hands such a list over as a copy, its items unchanged
            type_ = type_.of_type  # type: ignore[union-attr]
            if type(type_) is StrawberryOptional:
                type_ = type_.of_type
        if type_ not in _SCALARS:
            scalars = False
            break
        name = argument.graphql_name or to_camel_case(argument.python_name)
        arguments.append((name, argument.python_name, listed))
    return ResolverCall(
        resolver.wrapped_func,
        resolver.self_parameter is not None,
        tuple(
            p.name for p in (resolver.root_parameter, resolver.parent_parameter) if p is not None
        ),
        resolver.info_parameter.name if resolver.info_parameter else None,
        tuple(arguments) if scalars else None,
    )


def strawberry_is_type_of(object_type: GraphQLObjectType) -> bool:
    """Whether the type's `is_type_of` is Strawberry's own (which reads no info), not one
    its class defines."""
    definition = object_type.extensions.get(_DEFINITION)
    return definition is not None and getattr(definition.origin, "is_type_of", None) is None


def validation_rules(extension: AddValidationRules) -> list[Any]:
    """The rules an `AddValidationRules` extension adds (`DisableIntrospection`'s)."""
    return list(extension.validation_rules)


def cached_parse(maxsize: int) -> Callable[..., DocumentNode]:
    """`ParserCache`'s parse, whose LRU cache every `ParserCache(maxsize=)` of that size
    shares: a document parsed here is a cache hit for the extension's own parse."""
    return ParserCache(maxsize=maxsize).cached_parse_document


# Undocumented methods of `strawberry.asgi.GraphQL` (the view) that http/endpoint.py overrides
# or calls, with their parameters (after `self`); and the class attributes it sets.
VIEW_HOOKS: dict[str, tuple[str, ...]] = {
    "run": ("request", "context", "root_value"),
    "pick_websocket_subprotocol": ("request",),
    "parse_json": ("data",),
    "parse_http_body": ("request",),
    "execute_operation": (
        "request",
        "request_adapter",
        "request_data",
        "context",
        "root_value",
        "sub_response",
    ),
    "execute_single": (
        "request",
        "request_adapter",
        "sub_response",
        "context",
        "root_value",
        "request_data",
    ),
    "get_sub_response": ("request",),
    "create_response": ("response_data", "sub_response"),
    "should_render_graphql_ide": ("request",),
}
VIEW_ATTRIBUTES = (
    "graphql_transport_ws_handler_class",
    "graphql_ws_handler_class",  # built with `websocket=` (and more), then `handle()`d
    "request_adapter_class",
    "stream_transport_classes_by_protocol",
    "graphql_ide",  # the constructor's option, as given
)
# The view's option http/endpoint.py passes that its docs do not list: how long a websocket
# may wait before `connection_init`.
VIEW_OPTIONS = ("connection_init_wait_timeout",)
# graphql-transport-ws's handler (http/websocket.py's `WebSocketHandler`): its methods overridden
# or called, with their parameters.
WS_HOOKS: dict[str, tuple[str, ...]] = {
    "__init__": (
        "view",
        "websocket",
        "context",
        "root_value",
        "schema",
        "connection_init_wait_timeout",
        "max_subscriptions_per_connection",
    ),
    "on_request_accepted": (),
    "handle": (),
    "handle_message": ("message",),
    "handle_invalid_message": ("error_message",),
    "handle_connection_init": ("message",),
    "handle_subscribe": ("message",),
    "send_message": ("message",),
    "shutdown": (),
}
# The handler's attributes http/websocket.py reads; `operations` it replaces with a dict that
# tells it of every change (Strawberry changes it only by `[]=`, `del` and `pop`), and each
# operation's `task` it waits for. `connection_init` sets the context's `connection_params`.
WS_ATTRIBUTES = (
    "view",
    "websocket",
    "context",
    "connection_acknowledged",
    "operations",
)


def protocol_of(data: GraphQLRequestData) -> str:
    """How Strawberry runs a request: `"http"` (one answer) or `"sse"` (a stream)."""
    return data.protocol


def run_as(data: GraphQLRequestData, protocol: Literal["http", "sse"]) -> None:
    """Have Strawberry run a request as one answer (`"http"`) or as a stream (`"sse"`)."""
    data.protocol = protocol


# `strawberry.Schema`'s methods graph/schema.py overrides beyond the documented ones.
SCHEMA_HOOKS: dict[str, tuple[str, ...]] = {
    "execute": (
        "query",
        "variable_values",
        "context_value",
        "root_value",
        "operation_name",
        "allowed_operation_types",
        "operation_extensions",
    ),
    "stream": (
        "query",
        "variable_values",
        "context_value",
        "root_value",
        "operation_name",
        "operation_extensions",
        "allowed_operation_types",
    ),
}
# SSE's framing (http/sse.py): the two methods that write an event and a comment.
SSE_HOOKS: dict[str, tuple[str, ...]] = {
    "encode_event": ("event", "data"),
    "encode_comment": ("comment",),
}
