"""The request's DataLoaders (`store/loaders.py`) and the table's batched reads under them:
what `load_many` answers and raises, what `get_many` sends."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from graph_api.graph.context import Services
from graph_api.store.ledger import Ledger
from graph_api.store.loaders import _Loader
from graph_api.store.table import Table


def run_with_loop_errors(scenario: Any) -> list[str]:
    """Run `scenario(loader_factory)` on a fresh loop; the errors the loop reported."""
    reported: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _, context: reported.append(context["message"])
        )
        await scenario()
        gc.collect()  # a future whose error nobody retrieved says so when it is freed

    asyncio.run(main())
    return reported


def test_load_many_answers_in_order_with_one_batch_of_distinct_keys() -> None:
    batches: list[list[str]] = []

    async def batch(keys: list[str]) -> list[str]:
        batches.append(keys)
        return [key.upper() for key in keys]

    async def scenario() -> None:
        loader = _Loader(batch)
        assert await loader.load_many(["b", "a", "b", "c"]) == ["B", "A", "B", "C"]
        assert await loader.load_many(["a", "d"]) == ["A", "D"]  # "a" from the cache

    assert run_with_loop_errors(scenario) == []
    assert batches == [["b", "a", "c"], ["d"]]


def test_a_failed_batch_raises_once_and_leaves_no_error_unretrieved() -> None:
    async def batch(keys: list[str]) -> list[str]:
        if "late" in keys:  # a batch that fails after load_many has raised
            await asyncio.sleep(0.01)
        raise ConnectionError(f"the table is gone ({len(keys)} keys)")

    async def scenario() -> None:
        loader = _Loader(batch)
        with pytest.raises(ConnectionError, match="30 keys"):
            await loader.load_many([str(i) for i in range(30)])
        loader.load("late")  # another field's key, its batch sent first
        await asyncio.sleep(0.001)  # its batch is sent, and waits
        with pytest.raises(ConnectionError, match="1 keys"):
            await loader.load_many(["now", "late"])
        await asyncio.sleep(0.05)  # "late" fails meanwhile

    assert run_with_loop_errors(scenario) == []


def test_no_keys_is_no_request(services: Services) -> None:
    """A level with nothing to read (a teacher without classes, renamed) sends nothing:
    DynamoDB refuses a BatchGetItem without keys."""
    ledger = Ledger()
    table = Table(services.dynamo, services.settings.table, ledger=ledger)
    assert asyncio.run(table.get_many([])) == {}
    assert ledger.requests == 0 and ledger.calls == []
