"""Every touch of a library's private or undocumented attribute in graph_api, in one place.

A touch is a leading-underscore attribute or module of a library, or a name its docs do not
promise (graphql-core's `Executor` methods, which it says are "not part of the public API";
Strawberry's view and websocket handler beyond the hooks its integration docs list). Each
lives behind an accessor, or for a method a subclass overrides, in a hook table, in the
module of its library; `tests/project/test_internals.py` pins each one (`test_<pin>` below, one
case per name in a table): an upgrade that renames, removes or changes one fails there, not
in a request. 69 touches: graphql-core 15, Strawberry 52, Starlette 2. None of uvicorn's
(its options are all documented settings; the head and header caps are ours, in
http/middleware and http/hosting's `uvicorn_limits`), botocore's or aiodynamo's (the wire
uses their documented interfaces). The embedded backend's moto patches (graph_api/embedded) are
a development backend's, listed in its own docstring.

| # | library | attribute | used in | here | pin |
|---|---|---|---|---|---|
| 1-10 | graphql-core | `Executor.execute_fields` (overridden), `execute_field`, `build_resolve_info`, `handle_field_error`, `complete_value`, `collect_subfields`, `collect_and_execute_subfields`, `with_abort_signal`, `settle_in_background`, `track_async_work` | graph/engine/execution | `graphql_core.EXECUTOR_METHODS` | executor_method_signature; executor_methods_behave_as_relied_on |
| 11 | graphql-core | `get_middleware_resolvers` (`:meta private:`), `MiddlewareManager.middlewares` | graph/engine/execution | `graphql_core.wraps_resolvers` | wraps_resolvers |
| 12 | graphql-core | `graphql.type.scalars.serialize_string/_id/_boolean` (not exported) | graph/engine/execution | `graphql_core.UNCHANGED` | unchanged_are_the_builtin_scalars_coercions |
| 13 | graphql-core | `Path`'s field order (built by `tuple.__new__`) | graph/engine/execution | `graphql_core.make_path` | make_path_is_a_path |
| 14 | graphql-core | `graphql.validation.validate.ValidationAbortedError` | graph/engine/limits | `graphql_core.ValidationAbortedError` | validation_aborted_error |
| 15 | Strawberry | `Info._raw_info` | graph/engine/prefetch | `strawberry.raw_info` | raw_info_is_graphql_cores_resolve_info_of_the_field |
| 16 | Strawberry | `Info(_raw_info=, _field=)` | graph/engine/execution | `strawberry.strawberry_info` | strawberry_info_is_the_info_strawberry_gives_a_resolver |
| 17 | Strawberry | `Schema._schema` | graph/engine/limits, cost, prefetch | `strawberry.graphql_schema` | graphql_schema_is_the_schema_strawberry_built |
| 18 | Strawberry | `StrawberryGraphQLCoreExecutionContext` | graph/engine/execution | `strawberry.StrawberryExecutor` | strawberry_executor_is_the_default |
| 19 | Strawberry | `GraphQLCoreConverter.DEFINITION_BACKREF` | graph/engine/execution | `strawberry.field_definition` | field_definition |
| 20 | Strawberry | `is_default_resolver`, `StrawberryField.base_resolver`, `.default_resolver`, `.extensions`, `.python_name` | graph/engine/execution | `strawberry.read_attribute` | read_attribute |
| 21 | Strawberry | `StrawberryResolver.wrapped_func`, `.self_parameter`, `.root_parameter`, `.parent_parameter`, `.info_parameter`; `StrawberryField.is_subscription` | graph/engine/execution | `strawberry.resolver_call` | resolver_call_calls_as_strawberry_does |
| 22 | Strawberry | `StrawberryField.arguments` (`.type`, `.graphql_name`, `.python_name`), `StrawberryList`, `StrawberryOptional` | graph/engine/execution | `strawberry.resolver_call` | resolver_call_arguments |
| 23 | Strawberry | `strawberry.utils.str_converters.to_camel_case` | graph/engine/execution | `strawberry.resolver_call` | resolver_call_arguments |
| 24 | Strawberry | a type definition's `.origin` (its own `is_type_of`) | graph/engine/execution | `strawberry.strawberry_is_type_of` | strawberry_is_type_of |
| 25 | Strawberry | `strawberry.types.cast.TYPE_CAST_ATTRIBUTE` | graph/engine/execution | `strawberry.CAST_ATTRIBUTE` | cast_attribute |
| 26 | Strawberry | `strawberry.schema.schema.validate_document` | graph/engine/limits | `strawberry.validate_document` | validate_document |
| 27 | Strawberry | `AddValidationRules.validation_rules` | graph/engine/limits | `strawberry.validation_rules` | validation_rules |
| 28 | Strawberry | `ParserCache.cached_parse_document` (its shared cache) | graph/schema | `strawberry.cached_parse` | cached_parse_is_the_extensions_cache |
| 29 | Strawberry | `strawberry.utils.operation.get_operation_type` | graph/schema | `strawberry.get_operation_type` | get_operation_type |
| 30 | Strawberry | `strawberry.types.execution.PreExecutionError` | graph/schema | `strawberry.PreExecutionError` | pre_execution_error |
| 31-32 | Strawberry | `Schema.execute(allowed_operation_types=, operation_extensions=)`, `Schema.stream` | graph/schema | `strawberry.SCHEMA_HOOKS` | schema_hook_signature |
| 33-41 | Strawberry | `GraphQL.run`, `pick_websocket_subprotocol`, `parse_json`, `parse_http_body`, `execute_operation`, `execute_single`, `get_sub_response` (its status None until set), `create_response`, `should_render_graphql_ide` | http/endpoint | `strawberry.VIEW_HOOKS` | view_hook_signature; sub_response_has_no_status_until_set |
| 42-46 | Strawberry | `GraphQL.graphql_transport_ws_handler_class`, `graphql_ws_handler_class` (built with `websocket=`, then `handle()`), `request_adapter_class`, `stream_transport_classes_by_protocol`, `graphql_ide` | http/endpoint, legacy_ws | `strawberry.VIEW_ATTRIBUTES` | view_attribute; legacy_handler_is_built_and_run_as_relied_on |
| 47 | Strawberry | `InvalidOperationTypeError` (`.operation_type`) as the cause of `execute_single`'s `HTTPException` | http/endpoint | `strawberry.InvalidOperationTypeError` | invalid_operation_type_is_the_cause |
| 48 | Strawberry | `GraphQLRequestData.protocol` | http/endpoint | `strawberry.protocol_of`, `run_as` | request_data_protocol |
| 49-50 | Strawberry | `SSETransport.encode_event`, `encode_comment` | http/sse | `strawberry.SSE_HOOKS` | sse_hook_signature |
| 51-59 | Strawberry | `BaseGraphQLTransportWSHandler.__init__`, `on_request_accepted`, `handle`, `handle_message`, `handle_invalid_message`, `handle_connection_init`, `handle_subscribe`, `send_message`, `shutdown` | http/websocket | `strawberry.WS_HOOKS` | ws_hook_signature |
| 60-63 | Strawberry | the handler's `view`, `websocket`, `context`, `connection_acknowledged` | http/websocket | `strawberry.WS_ATTRIBUTES` | ws_handler_runs_as_relied_on |
| 64 | Strawberry | the handler's `operations`, changed only by `[]=`, `del`, `pop` (`_Operations`); `Operation.task` | http/websocket | `strawberry.WS_ATTRIBUTES` | ws_operations_change_only_as_relied_on |
| 65 | Strawberry | `connection_params` set on a context object by `connection_init` | http/websocket | `strawberry.WS_ATTRIBUTES` | ws_handler_runs_as_relied_on |
| 66-67 | Starlette | `Response.raw_headers` / `MutableHeaders.raw` (the live list of header fields) | graph/engine/throttle, http/endpoint | `starlette.header_fields` | header_fields_are_what_the_response_sends |
| 68 | Strawberry | `GraphQL(connection_init_wait_timeout=)` | http/endpoint | `strawberry.VIEW_OPTIONS` | view_option |
| 69 | graphql-core | `collect_fields`, `collect_subfields` ("for internal use only"), `FieldDetails`, `FragmentDetails` | graph/engine/plan/operation | `graphql_core.collected_fields` | collected_fields_are_the_executors |
"""

from __future__ import annotations

from graph_api.internals.strawberry import graphql_schema, raw_info, strawberry_info

__all__ = ["graphql_schema", "raw_info", "strawberry_info"]
