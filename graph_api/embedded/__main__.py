"""`python -m graph_api.embedded`: the embedded DynamoDB's own process."""

from graph_api.embedded import serve_child

serve_child()
