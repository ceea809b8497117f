"""Live data: the table's change stream, turned into events for GraphQL subscriptions.

The pipeline runs one way:

    DynamoDB Streams (or the embedded backend's, same wire protocol)
      -> `reader` (one per table, holding a lease item; checkpoints after publishing)
      -> `derive` (item changes -> node and roster events)
      -> `broker` (in process, or Redis pub/sub between instances)
      -> `hub` (this instance's subscriptions, bounded queues)
      -> `graph.subscription` (each event resolves the subscriber's own selection).

`changes` holds the data that crosses those steps.
"""
