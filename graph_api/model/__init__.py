"""The data model every layer shares: the table's key layout (`keys`), the shape of each
item and the denormalized copies (`items`), new ids, input rules, and pagination cursors.
Pure functions and data: nothing here sends a request, and nothing here imports another
layer (only `graph_api.errors`)."""
