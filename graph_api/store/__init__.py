"""The one door to DynamoDB: every call the API and the command line send to it goes
through here. The client (aiodynamo on our wire, botocore's credentials, accounting, error
mapping), the change stream's Streams client, the codec, the one retry policy, a GraphQL
request's `Table` with its loaders and transactions, and the operator's synchronous `admin`
work on the table (definition, create, bulk writes, the Scan). It knows keys and items from
`graph_api.model`; it imports neither the schema nor the HTTP layer, nor the embedded
development backend (`graph_api.embedded`, moto), which stands beside it as one more
DynamoDB to talk to."""
