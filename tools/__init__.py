"""Developer tools that are not part of the API: DynamoDB Local, the load test."""
