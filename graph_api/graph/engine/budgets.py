"""Rate limits by cost, per caller: a token bucket of cost points each.

A caller is `Context.holder`: a token's subject, else the client's address (the peer, or
the forwarded address from a proxy named in FORWARDED_ALLOW_IPS). Its bucket holds at most
its budget's `maximum` points and refills at `restore_rate` a second (`policy.BUDGETS`,
by role; GRAPH_API_RATE_LIMITS overrides). An operation takes what it asked for (its
static cost, at most the maximum) before it runs, and gets back what it did not use after
(`Throttle` says what is left); one that the bucket cannot pay is refused, and told in how
many seconds it could be.

Where the buckets live: in the process (`LocalBuckets`: one dict lookup and some arithmetic
an operation), or, with a Redis events broker, in Redis (`SharedBuckets`: one script call,
atomic, shared by every worker and instance). When Redis does not answer, the process's own
buckets stand in: a failing Redis slows no request and refuses none.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from graph_api.graph.auth.policy import BUDGETS, Budget, Role
from graph_api.graph.auth.tokens import Principal
from graph_api.settings import REDIS_SCHEMES, Settings, budget_rows

if TYPE_CHECKING:  # redis-py is loaded only with a Redis broker (Lambda never loads it)
    from redis.asyncio import Redis

log = logging.getLogger("graph_api")

# Buckets a process keeps: beyond it, full ones are dropped (a full bucket is what a new
# caller gets anyway), then the oldest. About 200 bytes each: 20 MB at most.
MAX_BUCKETS = 100_000
POLICY = "cost"  # the quota policy's name in the RateLimit header fields
_REMAINING = f'"{POLICY}";r=%d;t=%d'.encode()  # the RateLimit field's value, made per answer
MAX_ROLE_SETS = 64  # sets of roles whose budget is kept (there are 2^6 at most)
# After a failed Redis call, how long the process's buckets stand in before Redis is asked
# again: a Redis that hangs costs one timeout every few seconds, not one a request.
REDIS_BACKOFF_SECONDS = 5.0


class Throttle(NamedTuple):
    """A bucket as its caller is told it: `retry_after` > 0 when the operation was refused
    (seconds until the bucket holds what it asked for). A tuple: two are made a request."""

    maximum: int
    available: float
    restore_rate: int
    retry_after: float = 0.0

    def status(self) -> dict[str, int]:
        """`extensions.cost.throttleStatus`, as Shopify's Admin API names it."""
        return {
            "maximumAvailable": self.maximum,
            "currentlyAvailable": int(self.available),
            "restoreRate": self.restore_rate,
        }

    def fields(self) -> list[tuple[bytes, bytes]]:
        """The IETF RateLimit field (draft-ietf-httpapi-ratelimit-headers) as raw header
        bytes: what remains and the seconds until the bucket is full again; `Retry-After`
        on a refusal (RFC 9110). `Tier.policy` is the policy's own field."""
        until_full = math.ceil(max(0.0, self.maximum - self.available) / self.restore_rate)
        fields = [(b"ratelimit", _REMAINING % (self.available, until_full))]
        if self.retry_after:
            fields.append((b"retry-after", b"%d" % self.seconds()))
        return fields

    def seconds(self) -> int:
        """`retry_after` in whole seconds, at least 1 (what Retry-After carries)."""
        return max(1, math.ceil(self.retry_after))


class Tier(NamedTuple):
    """A caller's budget and its `RateLimit-Policy` header field (the quota and the window
    it refills in from empty), made once a process for each set of roles."""

    budget: Budget
    policy: tuple[bytes, bytes]

    @classmethod
    def of(cls, budget: Budget) -> Tier:
        window = math.ceil(budget.maximum / budget.restore_rate)
        value = f'"{POLICY}";q={budget.maximum};w={window}'
        return cls(budget, (b"ratelimit-policy", value.encode()))


class _Bucket:
    __slots__ = ("budget", "level", "stamp")

    def __init__(self, level: float, stamp: float, budget: Budget) -> None:
        self.level, self.stamp, self.budget = level, stamp, budget


class LocalBuckets:
    """The process's buckets, by caller, on the monotonic clock."""

    def __init__(
        self, size: int = MAX_BUCKETS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.size = size
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str, budget: Budget, cost: float) -> Throttle:
        """Take `cost` from the caller's bucket, or nothing when it holds less (a refusal:
        `retry_after`). A negative cost gives points back (at most up to the maximum)."""
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self.size:
                self._evict(now)
            bucket = self._buckets[key] = _Bucket(float(budget.maximum), now, budget)
        bucket.budget = budget
        level = min(budget.maximum, bucket.level + (now - bucket.stamp) * budget.restore_rate)
        bucket.stamp = now
        if cost > 0 and level < cost:
            bucket.level = level
            wait = (cost - level) / budget.restore_rate
            return Throttle(budget.maximum, level, budget.restore_rate, wait)
        bucket.level = level = min(float(budget.maximum), level - cost)
        return Throttle(budget.maximum, level, budget.restore_rate)

    def __len__(self) -> int:
        return len(self._buckets)

    def _evict(self, now: float) -> None:
        """Drop the buckets full by now (a full bucket is what a new caller gets anyway);
        then, if over three quarters remain, the oldest down to half, whose callers start
        full again: each sweep frees a quarter at least, so sweeps stay rare."""
        for key in [
            key
            for key, b in self._buckets.items()
            if b.level + (now - b.stamp) * b.budget.restore_rate >= b.budget.maximum
        ]:
            del self._buckets[key]
        excess = len(self._buckets) - self.size // 2
        if len(self._buckets) > self.size * 3 // 4 and excess > 0:
            for key in list(self._buckets)[:excess]:
                del self._buckets[key]


# KEYS[1]: the bucket (a hash of level and stamp, on Redis's clock); ARGV: maximum, restore
# rate, cost (negative: a refund). Returns {taken (1/0), level as text} (Lua numbers
# would come back truncated). The key expires once the bucket would be full.
_SCRIPT = """
local maximum = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local b = redis.call('HMGET', KEYS[1], 'level', 'stamp')
local level = tonumber(b[1])
local stamp = tonumber(b[2])
if level == nil or stamp == nil then
  level = maximum
  stamp = now
end
if now > stamp then
  level = math.min(maximum, level + (now - stamp) * rate)
end
local taken = 1
if cost > 0 and level < cost then
  taken = 0
else
  level = math.min(maximum, level - cost)
end
redis.call('HSET', KEYS[1], 'level', tostring(level), 'stamp', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((maximum - level) / rate * 1000) + 1000)
return {taken, tostring(level)}
"""


class SharedBuckets:
    """The buckets in Redis (the events broker's), one per caller for every worker and
    instance: each take or refund one atomic script call. A call that fails or takes
    longer than `timeout` is made on the process's buckets instead, and so are the calls
    of the next `REDIS_BACKOFF_SECONDS` (logged, once a minute at most)."""

    def __init__(self, url: str, prefix: str, local: LocalBuckets, timeout: float = 0.5) -> None:
        from redis.asyncio import Redis

        self.prefix = prefix
        self.local = local
        self._redis: Redis = Redis.from_url(
            url, socket_connect_timeout=timeout, socket_timeout=timeout
        )
        self._script = self._redis.register_script(_SCRIPT)
        from redis.exceptions import RedisError

        self._errors = (RedisError, OSError)
        self._warned = 0.0
        self._down_until = 0.0

    async def take(self, key: str, budget: Budget, cost: float) -> Throttle:
        if self._down_until and time.monotonic() < self._down_until:
            return self.local.take(key, budget, cost)
        try:
            taken, level = await self._script(
                keys=[self.prefix + key], args=[budget.maximum, budget.restore_rate, cost]
            )
        except self._errors as error:  # redis-py's, and a socket's
            self._down_until = time.monotonic() + REDIS_BACKOFF_SECONDS
            self._warn(error)
            return self.local.take(key, budget, cost)
        self._down_until = 0.0
        available = float(level)
        if taken:
            return Throttle(budget.maximum, available, budget.restore_rate)
        wait = (cost - available) / budget.restore_rate
        return Throttle(budget.maximum, available, budget.restore_rate, wait)

    def _warn(self, error: Exception) -> None:
        now = time.monotonic()
        if now - self._warned >= 60.0:
            self._warned = now
            log.warning("rate limits: Redis failed (%s); this process's buckets stand in", error)

    async def aclose(self) -> None:
        await self._redis.aclose()


class Limiter:
    """The budgets by role, and where the buckets are (`shared`: None, in the process)."""

    def __init__(self, budgets: Mapping[Role, Budget], shared: SharedBuckets | None) -> None:
        self.budgets = dict(budgets)
        self.local = shared.local if shared is not None else LocalBuckets()
        self.shared = shared
        self._default = self.budgets.get(Role.ANONYMOUS) or min(
            self.budgets.values(), key=lambda b: b.maximum
        )
        self._by_roles: dict[frozenset[Role], Tier] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> Limiter | None:
        """None when GRAPH_API_RATE_LIMITS is off."""
        if settings.rate_limits == "off":
            return None
        budgets = dict(BUDGETS)
        if settings.rate_limits:
            for role, (maximum, rate) in budget_rows(settings.rate_limits).items():
                budgets[Role(role)] = Budget(maximum, rate)
        shared = None
        if buckets_in_redis(settings):
            prefix = f"graph-api:{settings.table}:budget:"
            shared = SharedBuckets(settings.events_broker, prefix, LocalBuckets())
        return cls(budgets, shared)

    def tier(self, caller: Principal) -> Tier:
        """The largest budget of the caller's roles (a token with none: anonymous's), with
        its header field, worked out once for each set of roles."""
        known = self._by_roles.get(caller.roles)
        if known is not None:
            return known
        found = [self.budgets[r] for r in caller.roles if r in self.budgets]
        best = Tier.of(max(found, key=lambda b: b.maximum) if found else self._default)
        if len(self._by_roles) < MAX_ROLE_SETS:
            self._by_roles[caller.roles] = best
        return best

    async def aclose(self) -> None:
        if self.shared is not None:
            await self.shared.aclose()


def buckets_in_redis(settings: Settings) -> bool:
    """Whether the callers' buckets are in Redis: rate limits on, and a Redis events broker."""
    return settings.rate_limits != "off" and (
        settings.events_broker.partition("://")[0] in REDIS_SCHEMES
    )


def describe(throttle: Throttle) -> str:
    return (
        f"over this caller's rate limit: {int(throttle.available)} of {throttle.maximum} cost"
        f" points left, {throttle.restore_rate} restored a second; try again in"
        f" {throttle.seconds()} s"
    )
