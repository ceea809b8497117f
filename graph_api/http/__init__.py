"""The HTTP surface: the Starlette app (`/graphql`, `/healthz`), GraphQL over HTTP's media
types and statuses, the ASGI middleware, the GraphiQL page and its assets, and the hosts
that build the app (uvicorn workers, Lambda). It hands each request to the schema in
`graph_api.graph`; nothing below it imports it."""
