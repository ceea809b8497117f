"""Every touch of a library's private or undocumented attribute in graph_api, in one place.

A touch is a leading-underscore attribute or module of a library, or a name its docs do not
promise (graphql-core's `Executor` methods, which it says are "not part of the public API";
Strawberry's view and websocket handler beyond the hooks its integration docs list). Each
lives behind an accessor, or for a method a subclass overrides, in a hook table, in the
module of its library; `tests/test_internals.py` pins each one (`test_<pin>` below, one
case per name in a table): an upgrade that renames, removes or changes one fails there, not
in a request. 71 touches: botocore 2, graphql-core 14, Strawberry 53, Starlette 2 (uvicorn:
none, its options are all documented settings; the head and header caps are ours, in
http/middleware and http/hosting's `uvicorn_limits`).

| # | library | attribute | used in | here | pin |
|---|---|---|---|---|---|
| 1-2 | botocore | `JSONParser._parse_body_as_json`, `._parse_shape` | store/response_parser | `botocore.ParserHooks` | botocores_json_parse_goes_through_both_hooks |
| 3-12 | graphql-core | `Executor.execute_fields` (overridden), `execute_field`, `build_resolve_info`, `handle_field_error`, `complete_value`, `collect_subfields`, `collect_and_execute_subfields`, `with_abort_signal`, `settle_in_background`, `track_async_work` | graph/execution | `graphql_core.EXECUTOR_METHODS` | executor_method_signature; executor_methods_behave_as_relied_on |
| 13 | graphql-core | `get_middleware_resolvers` (`:meta private:`), `MiddlewareManager.middlewares` | graph/execution | `graphql_core.wraps_resolvers` | wraps_resolvers |
| 14 | graphql-core | `graphql.type.scalars.serialize_string/_id/_boolean` (not exported) | graph/execution | `graphql_core.UNCHANGED` | unchanged_are_the_builtin_scalars_coercions |
| 15 | graphql-core | `Path`'s field order (built by `tuple.__new__`) | graph/execution | `graphql_core.make_path` | make_path_is_a_path |
| 16 | graphql-core | `graphql.validation.validate.ValidationAbortedError` | graph/limits | `graphql_core.ValidationAbortedError` | validation_aborted_error |
| 17 | Strawberry | `Info._raw_info` | graph/prefetch | `strawberry.raw_info` | raw_info_is_graphql_cores_resolve_info_of_the_field |
| 18 | Strawberry | `Info(_raw_info=, _field=)` | graph/execution | `strawberry.strawberry_info` | strawberry_info_is_the_info_strawberry_gives_a_resolver |
| 19 | Strawberry | `Schema._schema` | graph/limits, cost, prefetch | `strawberry.graphql_schema` | graphql_schema_is_the_schema_strawberry_built |
| 20 | Strawberry | `StrawberryGraphQLCoreExecutionContext` | graph/execution | `strawberry.StrawberryExecutor` | strawberry_executor_is_the_default |
| 21 | Strawberry | `GraphQLCoreConverter.DEFINITION_BACKREF` | graph/execution | `strawberry.field_definition` | field_definition |
| 22 | Strawberry | `is_default_resolver`, `StrawberryField.base_resolver`, `.default_resolver`, `.extensions`, `.python_name` | graph/execution | `strawberry.read_attribute` | read_attribute |
| 23 | Strawberry | `StrawberryResolver.wrapped_func`, `.self_parameter`, `.root_parameter`, `.parent_parameter`, `.info_parameter`; `StrawberryField.is_subscription` | graph/execution | `strawberry.resolver_call` | resolver_call_calls_as_strawberry_does |
| 24 | Strawberry | `StrawberryField.arguments` (`.type`, `.graphql_name`, `.python_name`), `StrawberryList`, `StrawberryOptional` | graph/execution | `strawberry.resolver_call` | resolver_call_arguments |
| 25 | Strawberry | `strawberry.utils.str_converters.to_camel_case` | graph/execution | `strawberry.resolver_call` | resolver_call_arguments |
| 26 | Strawberry | a type definition's `.origin` (its own `is_type_of`) | graph/execution | `strawberry.strawberry_is_type_of` | strawberry_is_type_of |
| 27 | Strawberry | `strawberry.types.cast.TYPE_CAST_ATTRIBUTE` | graph/execution | `strawberry.CAST_ATTRIBUTE` | cast_attribute |
| 28 | Strawberry | `strawberry.schema.schema.validate_document` | graph/limits | `strawberry.validate_document` | validate_document |
| 29 | Strawberry | `AddValidationRules.validation_rules` | graph/limits | `strawberry.validation_rules` | validation_rules |
| 30 | Strawberry | `ParserCache.cached_parse_document` (its shared cache) | graph/schema | `strawberry.cached_parse` | cached_parse_is_the_extensions_cache |
| 31 | Strawberry | `strawberry.utils.operation.get_operation_type` | graph/schema | `strawberry.get_operation_type` | get_operation_type |
| 32 | Strawberry | `strawberry.types.execution.PreExecutionError` | graph/schema | `strawberry.PreExecutionError` | pre_execution_error |
| 33-34 | Strawberry | `Schema.execute(allowed_operation_types=, operation_extensions=)`, `Schema.stream` | graph/schema | `strawberry.SCHEMA_HOOKS` | schema_hook_signature |
| 35-43 | Strawberry | `GraphQL.run`, `pick_websocket_subprotocol`, `parse_json`, `parse_http_body`, `execute_operation`, `execute_single`, `get_sub_response` (its status None until set), `create_response`, `should_render_graphql_ide` | http/app | `strawberry.VIEW_HOOKS` | view_hook_signature; sub_response_has_no_status_until_set |
| 44-48 | Strawberry | `GraphQL.graphql_transport_ws_handler_class`, `graphql_ws_handler_class` (built with `websocket=`, then `handle()`), `request_adapter_class`, `stream_transport_classes_by_protocol`, `graphql_ide` | http/app, legacy_ws | `strawberry.VIEW_ATTRIBUTES` | view_attribute; legacy_handler_is_built_and_run_as_relied_on |
| 49 | Strawberry | `InvalidOperationTypeError` (`.operation_type`) as the cause of `execute_single`'s `HTTPException` | http/app | `strawberry.InvalidOperationTypeError` | invalid_operation_type_is_the_cause |
| 50 | Strawberry | `GraphQLRequestData.protocol` | http/app | `strawberry.protocol_of`, `run_as` | request_data_protocol |
| 51-52 | Strawberry | `SSETransport.encode_event`, `encode_comment` | http/sse | `strawberry.SSE_HOOKS` | sse_hook_signature |
| 53-61 | Strawberry | `BaseGraphQLTransportWSHandler.__init__`, `on_request_accepted`, `handle`, `handle_message`, `handle_invalid_message`, `handle_connection_init`, `handle_subscribe`, `send_message`, `shutdown` | http/app | `strawberry.WS_HOOKS` | ws_hook_signature |
| 62-66 | Strawberry | the handler's `view`, `websocket`, `context`, `connection_acknowledged`, `max_subscriptions_per_connection` | http/app | `strawberry.WS_ATTRIBUTES` | ws_handler_runs_as_relied_on |
| 67 | Strawberry | the handler's `operations`, changed only by `[]=`, `del`, `pop` (`_Operations`); `Operation.task` | http/app | `strawberry.WS_ATTRIBUTES` | ws_operations_change_only_as_relied_on |
| 68 | Strawberry | `connection_params` set on a context object by `connection_init` | http/app | `strawberry.WS_ATTRIBUTES` | ws_handler_runs_as_relied_on |
| 69-70 | Starlette | `Response.raw_headers` / `MutableHeaders.raw` (the live list of header fields) | graph/throttle, http/app | `starlette.header_fields` | header_fields_are_what_the_response_sends |
| 71 | Strawberry | `GraphQL(max_subscriptions_per_connection=, connection_init_wait_timeout=)` | http/app | `strawberry.VIEW_OPTIONS` | view_option |
"""

from __future__ import annotations

from typing import Any

from graph_api.internals.botocore import ParserHooks

__all__ = ["ParserHooks", "graphql_schema", "raw_info", "strawberry_info"]

# Strawberry's accessors under their old names, imported when first asked for: the store
# imports this package for `ParserHooks` alone, and need not import Strawberry with it.
_STRAWBERRY = frozenset({"graphql_schema", "raw_info", "strawberry_info"})


def __getattr__(name: str) -> Any:
    if name in _STRAWBERRY:
        from graph_api.internals import strawberry

        return getattr(strawberry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
