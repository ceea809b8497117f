"""Backoff for the retries botocore does not do for us (unprocessed keys and items)."""

from __future__ import annotations

import random

BASE_DELAY = 0.025  # seconds
MAX_DELAY = 1.0
MAX_ATTEMPTS = 8


def backoff(attempt: int, base: float = BASE_DELAY, cap: float = MAX_DELAY) -> float:
    """Capped exponential backoff with full jitter (AWS architecture blog's recommendation):
    a sleep drawn from [0, min(cap, base * 2**attempt)].
    """
    return random.uniform(0.0, min(cap, base * 2**attempt))
