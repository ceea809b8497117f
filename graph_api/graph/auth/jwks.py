"""The issuer's signing keys (its JWKS), cached so that a slow or failing issuer delays only
the tokens that need it.

- A key id (`kid`) in the cache is answered from it at once, without waiting on anything:
  no fetch, no thread, no lock held across I/O. A set older than `lifespan` is refreshed in
  the background; until that refresh succeeds the last good set keeps answering.
- An unknown `kid` waits (at most `wait` seconds, holding no thread) for the one fetch in
  flight, or starts one if none is and the rate limit allows; otherwise it is answered at
  once: UNAUTHENTICATED (no such key), or, after a failed fetch, that fetch's failure.
- One fetch at a time, on a thread of its own (never asyncio's default pool): PyJWT's own
  fetch (`PyJWKClient.fetch_data`: http(s) only, no redirects, `timeout` per operation),
  its answer parsed by `PyJWKSet`.
- At most one fetch per `min_interval` seconds whatever its outcome; after a failed one the
  next waits `min_interval` doubled per failure in a row, up to `max_backoff`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from typing import Any

import jwt

from graph_api.errors import Unauthenticated

log = logging.getLogger(__name__)

FETCH_TIMEOUT = 5.0  # seconds, per connect and read (urllib's timeout)
LIFESPAN = 300.0  # a set this old is refreshed in the background (PyJWT's default lifespan)
MIN_INTERVAL = 10.0  # at most one fetch per this many seconds, whatever its outcome
MAX_BACKOFF = 300.0  # the longest wait after failed fetches in a row


class IssuerUnavailable(Exception):
    """The JWKS did not answer (refused, timed out, an HTTP error): the server's trouble,
    not the token's (UNAVAILABLE)."""


class SigningKeys:
    """The signing keys of the JWKS at `url`, by `kid` (see the module's docstring)."""

    def __init__(self, url: str) -> None:
        self.timeout = FETCH_TIMEOUT
        self.lifespan = LIFESPAN
        self.min_interval = MIN_INTERVAL
        self.max_backoff = MAX_BACKOFF
        # Only its fetch is used: its own caches and lock are what stalled requests.
        self._client = jwt.PyJWKClient(url, cache_jwk_set=False, timeout=FETCH_TIMEOUT)
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jwks")
        # Guards the state below; held only to read or swap it, never across a fetch.
        self._lock = threading.Lock()
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched: float | None = None  # monotonic time of the last good fetch
        self._ended: float | None = None  # monotonic time the last fetch ended
        self._failures = 0  # failed fetches in a row
        # The last fetch's failure, if it failed: (the issuer did not answer, what happened).
        self._problem: tuple[bool, str] | None = None
        self._pending: concurrent.futures.Future[None] | None = None

    @property
    def wait(self) -> float:
        """How long an unknown `kid` waits for the fetch in flight."""
        return 2 * self.timeout

    async def key(self, kid: Any) -> jwt.PyJWK:
        """The key named `kid`. Raises Unauthenticated for a `kid` the issuer does not list
        (or a set it answered that cannot be read), IssuerUnavailable when it did not answer."""
        if not isinstance(kid, str) or not kid:
            raise Unauthenticated("invalid token: its header names no signing key (kid)")
        now = time.monotonic()
        with self._lock:
            key = self._keys.get(kid)
            if key is not None:
                if self._fetched is not None and now - self._fetched >= self.lifespan:
                    self._start(now)  # refreshed for later tokens; this one does not wait
                return key
            pending = self._pending or self._start(now)
            problem = self._problem
        if pending is None:  # rate-limited: the last fetch's answer stands
            raise _refusal(problem)
        # Each waiter its own wrapper: a waiter cancelled (its client gone) leaves the fetch be.
        done, _ = await asyncio.wait([asyncio.wrap_future(pending)], timeout=self.wait)
        if not done:
            raise IssuerUnavailable(f"the JWKS did not answer within {self.wait:g} s")
        done.pop().result()  # `_fetch` records the failures it expects: anything else is a bug
        with self._lock:
            key = self._keys.get(kid)
            problem = self._problem
        if key is None:
            raise _refusal(problem)
        return key

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _pause(self) -> float:
        """How long after a fetch the next may start: `min_interval`, doubled per failed
        fetch in a row up to `max_backoff`."""
        doubled = self.min_interval * 2 ** min(max(self._failures - 1, 0), 32)
        return min(self.max_backoff, doubled) if self._failures else self.min_interval

    def _start(self, now: float) -> concurrent.futures.Future[None] | None:
        """A fetch started now, unless one is in flight or the rate limit holds (under the
        lock)."""
        if self._pending is not None:
            return None
        if self._ended is not None and now < self._ended + self._pause():
            return None
        self._pending = self._pool.submit(self._fetch)
        return self._pending

    def _fetch(self) -> None:
        """Fetch and parse the set, then swap it in or record why not (on the pool's thread)."""
        keys: dict[str, jwt.PyJWK] | None = None
        problem: tuple[bool, str] | None = None
        try:
            self._client.timeout = self.timeout
            keys = _signing_keys(self._client.fetch_data())
        except (jwt.PyJWKClientConnectionError, OSError) as error:
            problem = (True, f"the signing keys could not be fetched: {error}")
        except (jwt.PyJWTError, ValueError, TypeError, KeyError, RecursionError) as error:
            # The issuer answered something else than a key set (PyJWT lets some through).
            problem = (False, f"the signing keys could not be read: {error}")
        finally:
            now = time.monotonic()
            with self._lock:
                if keys is not None:
                    self._keys, self._fetched, self._failures = keys, now, 0
                else:
                    self._failures += 1
                self._problem, self._pending, self._ended = problem, None, now
                retry = self._pause()
        if problem is not None:
            log.warning("JWKS: %s (next fetch in %.0f s at the earliest)", problem[1], retry)


def _signing_keys(document: Any) -> dict[str, jwt.PyJWK]:
    """The set's signing keys by `kid`, as PyJWKClient selects them: `use` absent or `sig`,
    a `kid` given; keys PyJWT cannot use are left out (PyJWKSet)."""
    if not isinstance(document, dict):
        raise ValueError("the JWKS endpoint did not return a JSON object")
    keys = {
        key.key_id: key
        for key in jwt.PyJWKSet.from_dict(document).keys
        if key.public_key_use in ("sig", None) and isinstance(key.key_id, str) and key.key_id
    }
    if not keys:
        raise ValueError("the JWKS endpoint did not list any signing keys")
    return keys


def _refusal(problem: tuple[bool, str] | None) -> Exception:
    """Why a `kid` not in the set is refused: the last fetch's failure, else no such key."""
    if problem is None:
        return Unauthenticated("invalid token: the issuer lists no signing key of its kid")
    unavailable, message = problem
    return IssuerUnavailable(message) if unavailable else Unauthenticated(message)
