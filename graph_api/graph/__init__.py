"""The GraphQL schema (Strawberry): queries, mutations and subscriptions, one module per node
type, Relay paging, the request context and the process's services, bearer tokens and access
rules, the limits and the static cost checked before execution, and the masking of
unexpected errors. Resolvers read through `graph_api.store` and write through
`graph_api.writes`; the HTTP layer above hands them each request."""
