"""New node ids: sortable by creation time, valid as ids (`[A-Za-z0-9_-]{1,64}`).

ULID-style: 48 bits of Unix milliseconds then 80 random bits, in Crockford base32 (26
characters), so ids created later sort later, in catalogs and in edges.
"""

from __future__ import annotations

import secrets
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last = 0  # the last id made by this process, as a number


def new_id(now_ms: int | None = None) -> str:
    """A new id; within one millisecond, ids of this process still increase (ULID's
    monotonic mode: the random part of the last id plus one)."""
    global _last
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    with _lock:
        value = (ms << 80) | secrets.randbits(80)
        if value >> 80 <= _last >> 80:
            value = _last + 1
        _last = value
    return "".join(_ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5))
