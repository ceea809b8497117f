"""Everything that talks to DynamoDB: client, table requests, loaders, accounting."""
