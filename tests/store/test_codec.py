"""The codec (store/codec.py) reads back exactly what it wrote, at any depth, and refuses
DynamoDB types the table never holds."""

from __future__ import annotations

import random
from typing import Any

import pytest

from graph_api.store import codec


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["str", "int", "bool", "none"] + (["map", "list"] if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return rng.choice(["", "S", "M", "é中", "x" * rng.randint(1, 5)])
    if kind == "int":
        return rng.choice([0, -1, 2**63, rng.randint(-1000, 1000)])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "none":
        return None
    if kind == "map":  # keys that look like type tags too
        return {rng.choice(["S", "N", "M", "L", "a", "b"]): random_value(rng, depth + 1)}
    return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


@pytest.mark.parametrize("seed", range(20))
def test_an_item_reads_back_as_written(seed: int) -> None:
    rng = random.Random(seed)
    item = {f"a{i}": random_value(rng) for i in range(8)} | {"S": "tag-named", "N": 1}
    assert codec.decode(codec.encode(item)) == item


@pytest.mark.parametrize("wire", [{"B": "AP8="}, {"SS": ["a"]}, {"M": {"x": {"NS": ["1"]}}}])
def test_types_the_table_never_holds_are_refused(wire: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        codec.decode({"x": wire})
