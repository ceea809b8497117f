"""Accounting: what one GraphQL request cost in DynamoDB requests and capacity."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Call:
    """One client call (its retries included), timed on the monotonic clock."""

    operation: str
    started: float
    ended: float


def capacity_units(consumed: Any) -> float:
    """The capacity units of an answer's ConsumedCapacity (one entry, or one a table)."""
    units = 0.0
    for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
        units += float(entry.get("CapacityUnits", 0.0))
    return units


@dataclass
class Ledger:
    # HTTP requests sent to DynamoDB: every attempt the wire sends counts.
    requests: int = 0
    capacity: float = 0.0
    calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # Calls finish on worker threads, so updates take the lock.
    def count_request(self) -> None:
        with self._lock:
            self.requests += 1

    def record(self, call: Call, consumed: Any) -> None:
        units = capacity_units(consumed)
        with self._lock:
            self.calls.append(call)
            self.capacity += units

    def summary(self) -> dict[str, float | int]:
        return {"requests": self.requests, "consumedCapacity": round(self.capacity, 2)}


# Loop turns `sent` lets pass at most: a load, the loader's dispatch, the batch's first step,
# the tasks it gathers (whose first steps send the requests).
TURNS = 5


async def sent(ledger: Ledger, asked: int, turns: int = TURNS) -> None:
    """Return once `asked` more requests than now have left (the ledger counts each as
    the wire sends it), or after `turns` loop turns: reads started without being awaited
    (`graph.engine.prefetch.start_partitions`) leave before the caller's own work
    goes on."""
    target = ledger.requests + asked
    for _ in range(turns if asked else 0):
        await asyncio.sleep(0)
        if ledger.requests >= target:
            return


# The ledger of the call running in this context: the wire counts each attempt against it.
active: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar(
    "graph_api_ledger", default=None
)
