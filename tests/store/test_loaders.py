"""The request's DataLoaders (`store/loaders.py`) and the table's batched reads under them:
what `load_many` answers and raises, what `get_many` sends."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from graph_api.graph.engine.context import Services
from graph_api.model.keys import Key
from graph_api.store.codec import Item
from graph_api.store.ledger import Ledger
from graph_api.store.loaders import Loaders, _Loader
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


class FakeTable:
    """What `Loaders` asks of a table: the `get_many` calls, answered from `items`."""

    def __init__(self, items: dict[Key, Item]) -> None:
        self.items = items
        self.asked: list[tuple[list[Key], frozenset[str] | None]] = []

    async def get_many(
        self, keys: list[Key], *, consistent: bool, attributes: frozenset[str] | None = None
    ) -> dict[Key, Item]:
        self.asked.append((list(keys), attributes))
        wanted = None if attributes is None else attributes | {"PK", "SK"}
        return {
            key: {k: v for k, v in item.items() if wanted is None or k in wanted}
            for key, item in self.items.items()
            if key in keys
        }


A, B, GONE = Key("S#a", "S#a"), Key("S#b", "S#b"), Key("S#gone", "S#gone")
ITEMS = {
    A: {"PK": "S#a", "SK": "S#a", "type": "student", "name": "Ada", "email": "a@x"},
    B: {"PK": "S#b", "SK": "S#b", "type": "student", "name": "Bo", "home": {"city": "Oslo"}},
}


def run_loaders(scenario: Any) -> FakeTable:
    table = FakeTable(ITEMS)

    async def main() -> None:
        await scenario(Loaders(table))  # type: ignore[arg-type]

    asyncio.run(main())
    return table


def test_parts_of_one_turn_are_one_read_of_what_they_ask_together() -> None:
    async def scenario(loaders: Loaders) -> None:
        a, b = await asyncio.gather(
            loaders.item.load_parts([A], frozenset({"name"})),
            loaders.item.load_parts([B], frozenset({"home"})),
        )
        # Each gets what the turn read: at least what it asked for, never a whole item.
        assert a == [{"PK": "S#a", "SK": "S#a", "name": "Ada"}]
        assert b == [{"PK": "S#b", "SK": "S#b", "name": "Bo", "home": {"city": "Oslo"}}]

    assert run_loaders(scenario).asked == [([A, B], frozenset({"name", "home"}))]


def test_a_whole_read_in_the_turn_makes_it_read_whole_items() -> None:
    async def scenario(loaders: Loaders) -> None:
        part, whole = await asyncio.gather(
            loaders.item.load_parts([A], frozenset({"name"})), loaders.item.load(B)
        )
        assert part == [ITEMS[A]] and whole == ITEMS[B]

    assert run_loaders(scenario).asked == [([A, B], None)]


def test_an_item_read_answers_later_reads_that_ask_no_more() -> None:
    async def scenario(loaders: Loaders) -> None:
        await loaders.item.load(A)
        await loaders.item.load_parts([B], frozenset({"name", "home"}))
        await loaders.item.load_parts([GONE], frozenset({"name"}))
        # From the cache: a whole item, a part that asked for more, an item that is absent.
        assert await loaders.item.load_parts([A], frozenset({"email"})) == [ITEMS[A]]
        assert (await loaders.item.load_parts([B], frozenset({"home"})))[0]["home"]
        assert await loaders.item.load(GONE) is None
        # A part does not answer a whole read, nor a part that asks for more.
        assert await loaders.item.load(B) == ITEMS[B]

    assert run_loaders(scenario).asked == [
        ([A], None),
        ([B], frozenset({"name", "home"})),
        ([GONE], frozenset({"name"})),
        ([B], None),
    ]


def test_a_primed_item_answers_the_parts_waiting_for_the_turn() -> None:
    async def scenario(loaders: Loaders) -> None:
        waiting = loaders.item.load_parts([A], frozenset({"name"}))
        loaders.item.prime(A, ITEMS[A])  # another shape read it (a node's partition)
        assert await waiting == [ITEMS[A]]

    assert run_loaders(scenario).asked == []
