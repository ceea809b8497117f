"""Conditions a caller puts on a write, as data: the writer checks them on the item it read
and puts them in its own transaction, so they hold when the write commits (no read of its
own, no read-then-check race). Who gets which guard is the policy's (`graph/authorize.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from graph_api.errors import Forbidden
from graph_api.store.codec import Item
from graph_api.store.transactions import Clause


@dataclass(frozen=True)
class Guard:
    """The class the write touches must be taught by `taught_by` (a teacher id)."""

    taught_by: str

    def clauses(self) -> list[Clause]:
        return [("eq", "teacherId", self.taught_by)]

    def check(self, klass: Item) -> None:
        """Raise FORBIDDEN unless the class item, as read, meets the guard."""
        if klass.get("teacherId") != self.taught_by:
            raise Forbidden(f"class {klass.get('id')} is not taught by the caller")


def clauses(guard: Guard | None) -> list[Clause]:
    return guard.clauses() if guard is not None else []
