"""One plan per operation: the document walked once, and what every layer reads of it.

- `walk`: the one walk of a document (each selection once, each fragment's figures
  memoized): each operation's depth and aliases (the limits), its cost formula, the fields
  selected on each type (what reads of its items ask for), and which variables can change
  the plan. Cached with the parsed document.
- `operation`: the `OperationPlan` of one operation for the values of those variables,
  made once after validation (`cost.CostLimit`) and kept with the document: its cost, the
  attributes each node type's reads ask for, and per level of the response (`levels`) what
  its resolvers decide their reads by (a roster's first page, what a page's nodes read).
  The executor keeps its per-field steps on it (`graph/engine/execution.py`).

Resolvers reach their level's plan through the request's context (`Context.plan`), by
their own response path: none reads another field's selection.
"""
