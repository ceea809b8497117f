"""The embedded server's heap: the table's items kept out of the collector's full passes.

CPython's cyclic collector stops every thread for a full pass over every object it tracks
whenever a quarter more of them has survived into its oldest generation since the last
pass. On the embedded server those objects are mostly the table's items (about 190,000 on
the demo, 900,000 at 5,000 students), and a transaction replaces hundreds of them, so a full
pass came every few teacher renames, and no read was answered while it ran (how long:
bench/README.md). Items form no reference cycles: a replaced
item is freed by its reference count, with or without the collector.

So the old objects are frozen (`gc.freeze()`: later passes skip them) once there are enough
of them that a pass over them would be felt (`OLD`): by the keeper thread, at a moment when
no request is being served, right after a full pass over what is not frozen yet (short:
only those objects), so that what it freezes is live and stays so: the table's items, not
the cycles a request leaves behind. Under traffic that never rests it freezes anyway once
there are `FORCED` old objects; the objects of the requests then in flight stay frozen
(their cycles are never collected), a few kilobytes each time.

The server's own process only (`serve_child`): freezing is process-wide.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

OLD = 20_000  # old objects not frozen: enough to freeze at rest (a pass over them: ~10 ms)
FORCED = 40_000  # ... and even while requests are in flight


class _State:
    def __init__(self) -> None:
        self.old = 0  # objects in the oldest generation, not frozen (at the last collection)
        self.serving: set[int] = set()  # threads serving a request (`wsgi`): at rest?
        self.freezes = 0


state = _State()


def _count_old(phase: str, info: dict[str, Any]) -> None:
    # Runs inside the collector, after a pass that moved survivors into the oldest
    # generation: a walk of that generation only (at most FORCED objects, rarely).
    if phase == "stop" and info["generation"] > 0:
        state.old = len(gc.get_objects(generation=2))


def freeze_old() -> None:
    """Collect what is not frozen yet, then freeze what survived."""
    gc.collect()  # a full pass over the objects not frozen: the others are live
    gc.freeze()
    state.old = 0
    state.freezes += 1


def keep(poll: float = 0.05) -> None:
    """From now on in this process: freeze the old objects as they accumulate."""
    if _count_old in gc.callbacks:
        return

    def keeper() -> None:
        while True:
            time.sleep(poll)
            if state.old > OLD and (not state.serving or state.old > FORCED):
                freeze_old()

    gc.callbacks.append(_count_old)
    threading.Thread(target=keeper, name="heap-keeper", daemon=True).start()
