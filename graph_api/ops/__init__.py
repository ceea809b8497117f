"""Operator tools behind `graph-api`'s commands: the integrity check, the migration of an
old-layout table, the demo school, the schema and operations checks, the NoSQL Workbench
model, and the file through which the table commands find a running embedded backend.
Offline work: they may Scan, and nothing on the request path imports them."""
