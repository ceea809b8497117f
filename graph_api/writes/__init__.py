"""The write path: each mutation is one TransactWriteItems (plus, for renames of nodes with
more copies than fit, idempotent follow-up chunks). Functions here take validated input,
read what they must (strongly consistent), and return the id of the node they wrote.

One module a node type (`students`, `teachers`, `classes`, `sports`: `create`, `update`,
`delete`), `memberships` (enrolments and sport memberships: `link`, `unlink`), `propagation`
(a rename's copies), and what writers share: `reads`, `versions` (expectedVersion),
`attempts` (read again while a guard fails) and `deletion` (a node nothing links to)."""
