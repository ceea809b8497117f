"""Fixes to moto's DynamoDB backend (moto 5.2.x) that make it serve like a database.

Each restores DynamoDB's behaviour where moto's costs grow with the whole table, and each is
pinned by `tests/embedded/test_embedded.py`; each goes away when moto does the same:

- `partitions`: a Query reads one partition (of the table or a GSI), not the whole table,
  and one of an index the table lacks is refused as DynamoDB refuses it;
- `transactions`: a transaction copies only the items it touches and becomes visible at once;
- `responses`: item reads are written as JSON directly;
- `projections`: a projected read copies only the attributes it names, not the whole item;
- `expressions`: a condition or update expression is parsed once per text, not for every
  action that carries it (twice for a transaction's conditions);
- `streams`: DynamoDB Streams of committed changes only, trimmed, served on the same port
  (moto's own stream records refused transactions and is never trimmed; it is switched off);
- moto's models forget their instances: every moto model keeps each instance it ever
  made, for moto's dashboard (each Item, every copy of a query's results included: memory
  that grows with every request). The embedded backend has no dashboard;
- and moto's dispatch lists a handler's methods once, not on every request
  (`inspect.getmembers` over `DynamoHandler`).

What each saves: bench/README.md, `make bench-embedded`. `apply()` installs them once per
process; nothing else in the project touches moto's classes.
"""

from __future__ import annotations

import functools
import threading

from moto.core import responses as core_responses
from moto.core.model_instances import model_data
from moto.dynamodb import comparisons
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb import responses as dynamodb_responses
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.responses import DynamoResult

from graph_api.embedded import (
    expressions,
    partitions,
    projections,
    responses,
    streams,
    transactions,
)

_applied = False
_apply_lock = threading.Lock()


class _Untracked(list[object]):
    """moto's `instances_tracked`, keeping nothing."""

    def append(self, _: object) -> None:
        pass


def apply() -> None:
    """Install the fixes (once per process)."""
    global _applied
    with _apply_lock:
        if _applied:
            return
        Table.query = partitions.query_one_partition(Table.query)  # type: ignore[method-assign]
        DynamoDBBackend.get_schema = partitions.refuse_as_dynamodb(DynamoDBBackend.get_schema)  # type: ignore[method-assign]
        Table.put_item = partitions.put_then_reindex(Table.put_item)  # type: ignore[method-assign]
        Table.delete_item = partitions.delete_then_reindex(Table.delete_item)  # type: ignore[method-assign]
        DynamoDBBackend.update_item = partitions.update_then_reindex(DynamoDBBackend.update_item)  # type: ignore[method-assign]
        DynamoDBBackend.transact_write_items = transactions.transact_write_items  # type: ignore[method-assign]
        Table.set_stream_specification = streams.recorded(Table.set_stream_specification)  # type: ignore[method-assign]
        DynamoDBBackend.update_table_streams = streams.update_table_streams  # type: ignore[method-assign]
        DynamoDBBackend.delete_table = streams.retired_with_table(DynamoDBBackend.delete_table)  # type: ignore[method-assign]
        DynamoResult.execute_result = responses.as_json(DynamoResult.execute_result)  # type: ignore[method-assign]
        Item.project = projections.top_level_as_stored(Item.project)  # type: ignore[method-assign, assignment]
        # `moto.core.responses` calls the name it imported from `moto.core.utils`.
        listed = functools.cache(core_responses.method_names_from_class)  # type: ignore[attr-defined]
        core_responses.method_names_from_class = listed  # type: ignore[attr-defined]
        # Every caller of moto's condition parser, by the name it imported (`get_filter_expression`
        # calls the one in `comparisons`).
        for module in (comparisons, dynamodb_models, dynamodb_responses):
            module.create_condition_expression_parser = expressions.ConditionParser  # type: ignore[attr-defined]
        make = UpdateExpressionParser.make.__func__
        UpdateExpressionParser.make = expressions.kept_update_syntax(make)
        for model in model_data["dynamodb"].values():
            model.instances_tracked = _Untracked()  # type: ignore[attr-defined]
        _applied = True
