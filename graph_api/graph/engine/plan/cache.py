"""Operation plans kept from request to request: by document, then by plan variables.

Strawberry's parser cache hands out the same document object for the same text, so plans
are kept by the identity of the schema and the document (both kept alive beside them, so
that their ids stay their own), then by the operation's name and what the plan reads of the
variables (`operation.plan_key`). Each document keeps its last `variants` plans: a client
that cycles `first: $n` replaces its own plans, not other documents'. The least recently
used documents are dropped once the plans take more than `limit` bytes
(`OperationPlan.footprint`; a plan that grows, as its first requests fill its memos,
is measured again at the next look-up) or `documents` documents are held.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING

from graphql import DocumentNode, GraphQLSchema

from graph_api.graph.engine.document import DOCUMENTS

if TYPE_CHECKING:
    from graph_api.graph.engine.plan.operation import OperationPlan

VARIANTS = 8  # plans a document keeps (its values of `first`, `@include`, ...)
PLAN_BYTES = 16_000_000  # what all plans may take (`OperationPlan.footprint`)
# What an entry costs beyond its plan: its slots in two OrderedDicts and its key, about
# 100 bytes each as for the APQ store (`http/persisted.ENTRY_OVERHEAD`), with room.
ENTRY_OVERHEAD = 400


class _Entry:
    """One plan and the bytes charged for it; told by the plan when it grows (`note`)."""

    __slots__ = ("bytes", "document", "plan", "plans")

    def __init__(self, plan: OperationPlan, document: _Document, plans: Plans) -> None:
        self.plan = plan
        self.document: _Document | None = document
        self.plans = plans
        self.bytes = 0

    def note(self) -> None:
        """The plan holds more: measured again at the cache's next look-up."""
        self.plans.grown.append(self)

    def weigh(self) -> int:
        """Measure the plan again; what that adds to its bytes."""
        before = self.bytes
        self.bytes = self.plan.footprint() + ENTRY_OVERHEAD
        self.plan.watcher = self.note  # told again when it grows again
        return self.bytes - before

    def drop(self) -> None:
        self.document = None
        self.plan.watcher = None


class _Document:
    __slots__ = ("bytes", "kept", "plans")

    def __init__(self, kept: tuple[GraphQLSchema, DocumentNode]) -> None:
        self.kept = kept
        self.plans: OrderedDict[Hashable, _Entry] = OrderedDict()
        self.bytes = 0


class Plans:
    """Plans by document and plan key (module docstring)."""

    def __init__(
        self, limit: int = PLAN_BYTES, documents: int = DOCUMENTS, variants: int = VARIANTS
    ) -> None:
        self.limit = limit
        self.documents = documents
        self.variants = variants
        self.bytes = 0  # charged for every plan held
        self.grown: list[_Entry] = []  # plans that grew since they were measured
        self._documents: OrderedDict[tuple[int, int], _Document] = OrderedDict()

    def __len__(self) -> int:
        """Plans held."""
        return sum(len(d.plans) for d in self._documents.values())

    def get(
        self, schema: GraphQLSchema, document: DocumentNode, key: Hashable
    ) -> OperationPlan | None:
        if self.grown:
            self._settle()
        at = (id(schema), id(document))
        held = self._documents.get(at)
        if held is None or held.kept[0] is not schema or held.kept[1] is not document:
            return None
        entry = held.plans.get(key)
        if entry is None:
            return None
        self._documents.move_to_end(at)
        held.plans.move_to_end(key)
        return entry.plan

    def put(
        self, schema: GraphQLSchema, document: DocumentNode, key: Hashable, plan: OperationPlan
    ) -> OperationPlan:
        if self.grown:
            self._settle()
        at = (id(schema), id(document))
        held = self._documents.get(at)
        if held is None or held.kept[0] is not schema or held.kept[1] is not document:
            if held is not None:  # another document under a reused id: its plans go
                self._drop(self._documents.pop(at))
            held = self._documents[at] = _Document((schema, document))
        self._documents.move_to_end(at)
        old = held.plans.pop(key, None)
        if old is not None:
            self._forget(held, old)
        while len(held.plans) >= self.variants:
            self._forget(held, held.plans.popitem(last=False)[1])
        entry = held.plans[key] = _Entry(plan, held, self)
        self._charge(held, entry.weigh())
        self._shrink()
        return plan

    def _settle(self) -> None:
        """Charge what the plans that grew now hold (each once), and shrink."""
        grown, self.grown = self.grown, []
        for entry in grown:
            held = entry.document
            if held is not None:
                self._charge(held, entry.weigh())
        self._shrink()

    def _charge(self, held: _Document, bytes_: int) -> None:
        held.bytes += bytes_
        self.bytes += bytes_

    def _forget(self, held: _Document, entry: _Entry) -> None:
        self._charge(held, -entry.bytes)
        entry.drop()

    def _drop(self, held: _Document) -> None:
        self.bytes -= held.bytes
        for entry in held.plans.values():
            entry.drop()

    def _shrink(self) -> None:
        """The least recently used documents dropped while over either bound."""
        documents = self._documents
        while documents and (self.bytes > self.limit or len(documents) > self.documents):
            self._drop(documents.popitem(last=False)[1])
