"""What the walk of a document (`graph/engine/plan/walk.py`) builds on: its fragments and
operations as written, the order that walks each fragment after those it spreads (so that
a document whose fragments spread each other exponentially is walked in linear time), and
`KeptBy`, which keeps what is worked out once from a document by the document's identity.
Nothing here trusts the document to be valid: an unknown fragment is skipped, and a cycle
of fragments is broken anywhere (`NoFragmentCyclesRule` reports it).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    ListValueNode,
    ObjectValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValueNode,
    VariableNode,
)

V = TypeVar("V")
DOCUMENTS = 256  # parsed documents Strawberry keeps (`graph.schema.CACHE_SIZE`), and so do we


class KeptBy(Generic[V]):
    """What is worked out once from objects that come back request after request (a
    document, an operation, a schema: Strawberry's parser cache hands out the same document
    objects), by their identity. Each value keeps its objects alive beside it, so that
    their ids stay their own; past `limit` values (Strawberry's cache is bounded too) the
    least recently used goes. `key` adds what is not an object of its own.
    """

    def __init__(self, limit: int = DOCUMENTS) -> None:
        self.limit = limit
        self._values: OrderedDict[tuple[Hashable, ...], tuple[tuple[object, ...], V]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._values)

    def get(self, kept: tuple[object, ...], key: Hashable = None) -> V | None:
        at = (*map(id, kept), key)
        found = self._values.get(at)
        if found is None or any(a is not b for a, b in zip(found[0], kept, strict=True)):
            return None
        self._values.move_to_end(at)
        return found[1]

    def put(self, kept: tuple[object, ...], value: V, key: Hashable = None) -> V:
        at = (*map(id, kept), key)
        self._values[at] = (kept, value)
        self._values.move_to_end(at)
        while len(self._values) > self.limit:
            self._values.popitem(last=False)
        return value


def fragments_of(document: DocumentNode) -> dict[str, FragmentDefinitionNode]:
    """The fragment definitions by name (the first of duplicates, which validation refuses)."""
    found: dict[str, FragmentDefinitionNode] = {}
    for definition in document.definitions:
        if isinstance(definition, FragmentDefinitionNode):
            found.setdefault(definition.name.value, definition)
    return found


def operations_of(document: DocumentNode) -> list[OperationDefinitionNode]:
    return [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]


def spreads_in(selection_set: SelectionSetNode | None) -> Iterator[str]:
    """The names of the fragments spread anywhere in a selection set (not through them)."""
    pending = [selection_set] if selection_set else []
    while pending:
        for selection in pending.pop().selections:
            if isinstance(selection, FragmentSpreadNode):
                yield selection.name.value
            elif isinstance(selection, FieldNode | InlineFragmentNode) and selection.selection_set:
                pending.append(selection.selection_set)


def fragment_order(fragments: dict[str, FragmentDefinitionNode]) -> list[str]:
    """The fragments' names, each after every fragment it spreads (cycles broken anywhere).

    Iterative, so a chain of a thousand fragments needs no recursion.
    """
    order: list[str] = []
    state: dict[str, bool] = {}  # False: being walked, True: done
    for root in fragments:
        if root in state:
            continue
        state[root] = False
        stack = [(root, spreads_in(fragments[root].selection_set))]
        while stack:
            name, pending = stack[-1]
            child = next(pending, None)
            if child is None:
                stack.pop()
                state[name] = True
                order.append(name)
            elif child in fragments and child not in state:
                state[child] = False
                stack.append((child, spreads_in(fragments[child].selection_set)))
    return order


def reads_variables(value: ValueNode) -> bool:
    """Whether an argument's value names a variable, at any depth of lists and objects."""
    if isinstance(value, VariableNode):
        return True
    if isinstance(value, ListValueNode):
        return any(reads_variables(item) for item in value.values)
    if isinstance(value, ObjectValueNode):
        return any(reads_variables(field.value) for field in value.fields)
    return False
