"""The embedded server's heap: the table's items kept out of the collector's full passes.

CPython's cyclic collector stops every thread for a full pass over every object it tracks
whenever a quarter more of them has survived into its oldest generation since the last
pass. On the embedded server those objects are mostly the table's items (about 190,000 on
the demo), and a transaction replaces hundreds of them, so a full pass came every few
teacher renames: 100-140 ms on 2 busy cores during which no read was answered (the slowest
reads of `make bench-embedded`). Items form no reference cycles: a replaced item is freed by
its reference count, with or without the collector.

So the survivors of every pass beyond the youngest generation are frozen (`gc.freeze()`,
O(1)): later passes walk only what survived since. What was frozen while in use and later
becomes cyclic garbage (the objects of a request in flight: werkzeug's and Flask's form
cycles) waits for a full collection of the frozen objects, which the keeper thread runs at
a quiet moment (no new request for `quiet` seconds) once they grew by a quarter since the
last one (the collector's own ratio), and even under traffic once they doubled: as the
table grows, not every few renames, and when no one is waiting if the server ever rests.

The server's own process only (`serve_child`): freezing is process-wide.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

GROWTH = 1.25  # frozen objects grown by this much since the last full collection: collect
FORCED = 2.0  # ... at a quiet moment; grown by this much: collect even under traffic


class _State:
    baseline = 0  # objects frozen right after the last full collection
    frozen = 0  # objects frozen now, or a bound above it (see `_freeze_survivors`)
    requests = 0  # requests begun, counted by the server (`wsgi`): when did it last rest?
    full_running = False
    full_collections = 0


state = _State()


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    # Runs inside the collector, on whichever thread allocated: no locks, no collection.
    if phase != "stop" or info["generation"] == 0:
        return  # the youngest generation: its survivors are still young
    if state.full_running and info["generation"] != 2:
        return  # a young pass between the keeper's unfreeze and its full pass
    if state.full_running:
        gc.freeze()
        state.baseline = state.frozen = gc.get_freeze_count()
        return
    # Counting the frozen objects walks them all (2-5 ms at 200,000, several times a
    # transaction): add up what is frozen instead, a bound above the count (frozen items a
    # write replaced were freed since), which the keeper corrects when it matters.
    state.frozen += len(gc.get_objects(generation=2))
    gc.freeze()


def collect_frozen() -> None:
    """A full collection, frozen objects included; its survivors are frozen again."""
    state.full_running = True
    try:
        gc.unfreeze()
        gc.collect()  # its "stop" callback freezes the survivors and sets the baseline
    finally:
        state.full_running = False
        state.full_collections += 1


def keep(quiet: float = 0.25) -> None:
    """From now on in this process: freeze survivors, collect frozen garbage as it grows."""
    if _freeze_survivors in gc.callbacks:
        return

    def keeper() -> None:
        seen = -1
        while True:
            time.sleep(quiet)
            resting, seen = state.requests == seen, state.requests
            limit = state.baseline * (GROWTH if resting else FORCED)
            if state.frozen > limit:
                state.frozen = gc.get_freeze_count()  # the bound says maybe: count
                if state.frozen > limit:
                    collect_frozen()

    gc.callbacks.append(_freeze_survivors)
    threading.Thread(target=keeper, name="heap-keeper", daemon=True).start()
