"""`python -m graph_api.store.embedded`: the embedded DynamoDB's own process."""

from graph_api.store.embedded import serve_child

serve_child()
