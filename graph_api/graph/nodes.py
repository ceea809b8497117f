"""What every node type shares: an id, what is known of it, and a batched full read.

A node object may be built from its own item or from an edge's copies. Fields the copies
hold resolve at once; any other field loads the node item through the request's batched
item loader, so asking for one more field of 50 nodes costs one BatchGetItem, not 50 reads.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeVar

import strawberry

from graph_api import keys
from graph_api.errors import NotFound
from graph_api.graph.context import Info
from graph_api.items import TYPE
from graph_api.keys import Kind
from graph_api.store.codec import Item

T = TypeVar("T")


class NodeBase:
    kind: ClassVar[Kind]
    id: strawberry.ID
    known: dict[str, Any]

    def __init__(
        self, *, id: strawberry.ID, known: dict[str, Any]
    ) -> None: ...  # replaced by the dataclass __init__ strawberry.type writes for each subclass

    @classmethod
    def from_item(cls, item: Item) -> Self:
        """The node from its own item: every field is known."""
        return cls(id=strawberry.ID(item["id"]), known=item)

    @classmethod
    def from_view(cls, view: tuple[str, dict[str, Any]]) -> Self:
        """The node as an edge sees it: its id and the edge's copies of its fields."""
        return cls(id=strawberry.ID(view[0]), known=view[1])

    @classmethod
    def from_entry(cls, id_: str, entry: Mapping[str, Any]) -> Self:
        """The node as an entry of another node's map sees it (a student's class)."""
        return cls(id=strawberry.ID(id_), known=dict(entry))

    async def read(self, info: Info, name: str) -> Any:
        """The field's value, loading the node's item if it is not known yet."""
        value = self.get(info, name)
        return await value if inspect.isawaitable(value) else value

    def get(self, info: Info, name: str) -> Any:
        """The field's value when known, else an awaitable of it (graphql-core awaits it).

        Returning plain values keeps the common case free of a coroutine and a task per
        field, which dominated the cost of wide lists.
        """
        known = self.known
        if name in known:
            return known[name]
        if TYPE in known:  # the whole item: an attribute it lacks is absent, not unread
            return None
        return self._load(info, name)

    async def _load(self, info: Info, name: str) -> Any:
        item = await info.context.loaders.item.load(keys.node(self.kind, self.id))
        if item is None:
            raise NotFound(f"{self.kind.lower()} {self.id} does not exist", id=self.id)
        return item.get(name)


def then(value: Any, apply: Callable[[Any], T]) -> Any:
    """`apply(value)`, now if `value` is plain, later if it is awaitable."""
    if inspect.isawaitable(value):
        awaitable = value

        async def later() -> T:
            return apply(await awaitable)

        return later()
    return apply(value)
