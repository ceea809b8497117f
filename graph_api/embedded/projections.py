"""A projected read copies only the attributes it names.

moto's `Item.project` turns the whole item into plain Python and back for every item that a
projected GetItem, BatchGetItem or Query returns: a deep copy and a conversion of every
attribute, a student's `classes` and `sports` maps included, to keep a few of them: most of
a projected read's time, and more than reading the items whole (bench/README.md).

A projection of top-level attributes only (every one the API sends, `nodes.parts_of`) takes
those attributes' values as they are stored: shared with the table's item, not copied,
which is safe because a read's answer is written out under the tables' read lock
(`isolation`), with no write in between. It is also what DynamoDB answers: the stored values,
where moto's round trip through Python rewrites them (a number's spelling). Any other
projection (a nested path, a list element) goes through moto's own code.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import cast

from moto.dynamodb.models.dynamo_type import Item, LimitedSizeDict

# What moto's `find_nested_key` reads as a list element: `tags[0]`.
_LIST_ELEMENT = re.compile(r".+\[\d+\]$")

Project = Callable[[Item, list[list[str]]], Item]


def top_level_as_stored(original: Project) -> Project:
    @functools.wraps(original)  # `__wrapped__`: moto's own, which the tests compare with
    def project(self: Item, projection_expressions: list[list[str]]) -> Item:
        if any(len(path) != 1 or _LIST_ELEMENT.match(path[0]) for path in projection_expressions):
            return original(self, projection_expressions)
        stored = self.attrs
        projected = cast(Item, Item.__new__(Item))  # not `Item()`, which wraps each value anew
        projected.hash_key = self.hash_key
        projected.range_key = self.range_key
        # No size check per attribute (`LimitedSizeDict.__setitem__` sums the whole item on
        # each): a part of a stored item is smaller than the item.
        projected.attrs = LimitedSizeDict(
            {name: stored[name] for (name,) in projection_expressions if name in stored}
        )
        return projected

    return project
