"""New node ids: sortable by creation time, valid as ids (`[A-Za-z0-9_-]{1,64}`).

ULID-style: 48 bits of Unix milliseconds then 80 random bits, in Crockford base32 (26
characters), so ids created later sort later, in catalogs and in edges.
"""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(now_ms: int | None = None) -> str:
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | secrets.randbits(80)
    return "".join(_ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5))
