"""Everything that talks to DynamoDB: the client (aiodynamo on our wire, botocore's
credentials, accounting, error mapping), the change stream's Streams client, the codec, the
one retry policy, a GraphQL request's `Table` with its loaders and transactions, the
operator's synchronous `admin` work on the table (definition, create, bulk writes, the
Scan), and the embedded backend (moto, with DynamoDB's behaviour restored). It knows keys
and items from `graph_api.model`; it imports neither the schema nor the HTTP layer."""
