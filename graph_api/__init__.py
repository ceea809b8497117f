"""A GraphQL API over a DynamoDB single-table materialized graph of a school."""

__version__ = "0.1.0"
