"""The write path: each mutation is one TransactWriteItems (plus, for renames of nodes with
more copies than fit, idempotent follow-up chunks). Functions here take validated input,
read what they must (strongly consistent), and return the id of the node they wrote."""
