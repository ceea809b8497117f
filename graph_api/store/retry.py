"""The one retry policy: what is sent again, how long to wait first, and when to stop.

Every loop that sends something to DynamoDB again takes its retry from a `Retries`, the
retries of one request (a GraphQL request; on the command line a transaction, a Scan page
or a seeding chunk; in the stream reader a lease write or a poll of a shard):

- **one count**: at most `Policy.max_retries` retries a request (12, `REQUEST`), whichever
  loops take them. Loops still nest (a write that reads again sends transactions, whose
  calls may be throttled) but they draw on the same count, so a request's attempts add up
  instead of multiplying. Before, each loop had 8 attempts of its own: a write could send
  its transaction 24 x 8 x 8 times and a BatchGetItem chunk went 8 x 8 times, and only the
  deadline stopped them; now a request makes at most 12 retries besides the calls it makes
  anyway. A success does not reset the count: a write whose reads keep going stale stops
  after 12 retries, however its calls went in between;
- **the deadline**: a retry whose backoff would end past it is not taken (`remaining()`
  says how long is left);
- **capped exponential backoff with full jitter** (AWS Architecture Blog, "Exponential
  Backoff And Jitter"): retry n of a request sleeps a random time in
  [0, min(cap, base * 2**n)], 25 ms doubling to 1 s for a request;
- **a retry budget shared by the process** (`RetryBudget`): botocore's standard-mode retry
  quota (`botocore/retries/quota.py`, and `RetryQuotaChecker` in
  `botocore/retries/standard.py`), with botocore 1.44's figures: 500 tokens; a retry after
  a throttle costs 5, after a timeout, a dropped connection or a 5xx 14; a call that
  succeeds gives back what its last retry cost, or 1 when it was not retried. Like
  botocore's quota it belongs to a client (`Dynamo.budget`), and every request of the
  process shares that client. When DynamoDB keeps failing, the retries of every request
  drain it; once it is empty retries stop at once (UNAVAILABLE) until successes refill
  it, so a throttling storm is not answered with a retry storm. Contention (a write that
  must read again, a rename's copies planned again) costs 1: DynamoDB answered, so it is
  not overloaded, but those retries stop too once throttles have emptied the budget;
- **transaction conflicts are not the caller's error** (`Failure.CONFLICT`: a transaction
  cancelled for `TransactionConflict` alone, `TransactionConflictException`,
  `TransactionInProgressException`): another write held the item for its commit time
  (10-25 ms on AWS), and the same request passes once it has committed. They are sent
  again until the deadline, on a count and a backoff of their own (`CONFLICTS`: 5 ms
  growing to 100 ms, jittered above a 5 ms floor, 400 retries at most for a caller with
  no deadline), and cost the budget nothing: contention never drains what throttles need,
  nor do throttles' retries use up what contention needs. Within a process such writes
  mostly wait for each other instead (`store/item_locks.py`); what is left is other
  instances' writes. botocore's part is to send, sign and parse (the cancellation's
  reasons included) in its one attempt; which reasons mean "again" is decided here.

Where each loop lives, one per kind of failure, all on the request's `Retries`:

- the same request sent again (throttles, 5xx, timeouts, dropped connections, answers that
  are not DynamoDB's or fail their checksum, and a transaction's conflicts, under the same
  `ClientRequestToken`): `resend`, which `Table.call` and the command line's
  `admin.call` (migrate, seed) run;
- the rest sent again: `Table._get_chunk` (`UnprocessedKeys`), `admin.batch_write`
  (`UnprocessedItems`), `admin.scan` (the same page, smaller, `OFFLINE`);
- the write read again (`Stale`: a guard failed): `writes.attempts.retrying`;
- a rename's copies planned again: `writes.propagation._follow`;
- GetRecords on one shard: `events.reader` (`STREAM`; when it stops, the reader starts over
  from its checkpoints). Lease writes and DescribeTable go through `Table.call`, each a
  request of its own.

What is never retried: a refused condition (the caller's error), a connection nobody
accepts (`EndpointConnectionError`: nothing listens at that address, and will not within
seconds), and an `Unavailable` of our own making (a deadline passed, retries given up).
"""

from __future__ import annotations

import enum
import logging
import random
import threading
import time
from asyncio import sleep  # by name: a test records the command line's sleeps instead
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import ClientConnectorCertificateError
from botocore.exceptions import (
    ChecksumError,
    ClientError,
    EndpointConnectionError,
    HTTPClientError,
    SSLError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.parsers import ResponseParserError

from graph_api import telemetry
from graph_api.errors import Unavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Policy:
    base: float  # seconds: the first retry sleeps up to twice this
    cap: float  # seconds: no sleep is drawn from a longer range
    max_retries: int  # retries of one request, every loop together


# A GraphQL request (or a lease write): 12 retries sleep at most 8.6 s in all, so under the
# default 10 s deadline the count and the deadline stop a request at about the same time.
REQUEST = Policy(base=0.025, cap=1.0, max_retries=12)
# `graph-api check`'s Scan pages: an offline tool can wait longer than a request (8 attempts).
OFFLINE = Policy(base=0.25, cap=4.0, max_retries=7)
# GetRecords on one shard: Streams' limit is 5 reads a second a shard; after 12 failures in
# a row the reader starts over from its checkpoints.
STREAM = Policy(base=0.025, cap=5.0, max_retries=12)

# Transaction conflicts: a commit takes 10-25 ms on AWS, so the first retry comes after
# 5-10 ms and none waits more than 100 ms; the deadline stops them, the count only a
# caller without one (the command line).
CONFLICTS = Policy(base=0.005, cap=0.1, max_retries=400)

# botocore's standard retry quota (RetryQuota.INITIAL_CAPACITY, RetryQuotaChecker's costs).
CAPACITY = 500
NO_RETRY_REFILL = 1


class Failure(enum.Enum):
    """Why a request is sent again; the value is what the retry costs the budget."""

    THROTTLED = 5  # throttled, or keys and items left unprocessed (DynamoDB's throttle too)
    TRANSIENT = 14  # a timeout, a dropped connection, a 5xx
    CONTENTION = 1  # a stale read, a rename's copies planned again
    CONFLICT = 0  # a transaction conflict: free, on a count and a backoff of its own


# Error codes that mean "too many requests" (DynamoDB, and Streams' LimitExceededException).
THROTTLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "LimitExceededException",
    }
)
# Cancellation reasons of a transaction that may pass when sent again, unchanged.
_CANCELLED_RETRYABLE = frozenset(
    {"None", "TransactionConflict", "ProvisionedThroughputExceeded", "ThrottlingError"}
)
_CANCELLED_THROTTLED = frozenset({"ProvisionedThroughputExceeded", "ThrottlingError"})
# Another write holds an item: DynamoDB takes this one once that has committed.
_CONFLICT_CODES = frozenset({"TransactionConflictException", "TransactionInProgressException"})

# Added to the message of a retry the budget refused: why we were retrying stays first.
BUDGET_SPENT = "not retried: DynamoDB keeps failing, so this server has paused its retries"
REFUSED = "DynamoDB kept refusing the write; nothing was written, try again"
LATE = "DynamoDB did not answer within this request's deadline; try again"


def backoff(attempt: int, base: float, cap: float) -> float:
    """Full jitter: a sleep drawn from [0, min(cap, base * 2**attempt)]."""
    return random.uniform(0.0, min(cap, base * 2**attempt))


def conflict_backoff(attempt: int) -> float:
    """A sleep drawn from [base, min(cap, base * 2**attempt)]: jittered so that writers
    that met do not meet again, and never so short that a retry lands inside the other
    write's commit."""
    policy = CONFLICTS
    return random.uniform(policy.base, max(policy.base, min(policy.cap, policy.base * 2**attempt)))


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def cancellation_reasons(error: ClientError) -> list[str]:
    """A cancelled transaction's reasons, in action order."""
    reasons = error.response.get("CancellationReasons") or []
    return [str(reason.get("Code", "None")) for reason in reasons]


def not_dynamodb(error: ClientError) -> bool:
    """A 4xx answer without one of DynamoDB's error codes (an HTML 403, 404, 405 page): the
    endpoint is something else (a web server, a wrong port). It answers so again: never
    retried. Rate limits and timeouts of a proxy on the way (429, 408) are not this."""
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    code = error_code(error)
    return 400 <= status < 500 and status not in (408, 429) and (not code or code.isdigit())


def failure_of(error: BaseException) -> Failure | None:
    """What a failed call means for sending it again unchanged; None: it would fail again.

    An `Unavailable` is retried only when DynamoDB's answer (or its silence) caused it: one
    of our own (a deadline passed, retries given up, the budget spent) is final.
    """
    if isinstance(error, Unavailable):
        cause = error.__cause__
        if isinstance(cause, ClientError):
            if error_code(cause) == "ValidationException":  # refused as sent: it would be again
                return None
            if error_code(cause) == "ResourceNotFoundException" or not_dynamodb(cause):
                return None  # no such table, or not DynamoDB: the same again
            throttled = error_code(cause) in THROTTLE_CODES
            return Failure.THROTTLED if throttled else Failure.TRANSIENT
        if isinstance(cause, EndpointConnectionError):
            return None  # nothing listens there (refused, no such host): it will not soon
        if isinstance(cause, SSLError) and isinstance(
            cause.kwargs.get("error"), ClientConnectorCertificateError
        ):
            return None  # a certificate we do not trust is not trusted a moment later
        if isinstance(cause, BotoConnectionError | HTTPClientError):
            return Failure.TRANSIENT
        if isinstance(cause, ResponseParserError | ChecksumError):  # an answer not DynamoDB's
            return Failure.TRANSIENT
        return None
    if isinstance(error, ClientError):
        code = error_code(error)
        if code in _CONFLICT_CODES:  # another write holds the item (or this token's does)
            return Failure.CONFLICT
        if code == "TransactionCanceledException":
            reasons = set(cancellation_reasons(error))
            if reasons <= _CANCELLED_RETRYABLE:  # never a failed condition: that is final
                if reasons & _CANCELLED_THROTTLED:
                    return Failure.THROTTLED
                return Failure.CONFLICT if "TransactionConflict" in reasons else Failure.CONTENTION
    return None


class RetryBudget:
    """Tokens that retries spend and successes refill, shared by every request of a client
    (botocore's `RetryQuota`). Thread-safe, as botocore's is."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self.available = capacity
        self._lock = threading.Lock()

    def spend(self, cost: int) -> bool:
        with self._lock:
            if cost > self.available:
                return False
            self.available -= cost
            return True

    def refill(self, amount: int) -> None:
        if amount and self.available < self.capacity:
            with self._lock:
                self.available = min(self.capacity, self.available + amount)


class Retries:
    """The retries of one request: its count, its deadline, and the process's budget."""

    def __init__(
        self, budget: RetryBudget, deadline: float | None = None, policy: Policy | None = None
    ) -> None:
        self.budget = budget
        self.deadline = deadline  # time.monotonic() by which the request must be answered
        self.policy = policy or REQUEST
        self.count = 0  # retries taken so far, by every loop of the request
        self.conflicts = 0  # transaction conflicts sent again (`CONFLICTS`), counted apart

    def remaining(self) -> float:
        """Seconds left before the deadline (infinite without one)."""
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def _take(self, failure: Failure, why: str, at_least: float) -> tuple[int, float]:
        """A retry's cost and its sleep, or Unavailable saying `why` we were retrying: that
        DynamoDB did not answer in time when its failures ran into the deadline (contention
        keeps `why`, which says what became of the write), and that retries are paused
        when the budget cannot pay for it. A conflict costs nothing and draws on its own
        count (`CONFLICTS`)."""
        if failure is Failure.CONFLICT:
            return self._take_conflict(why, at_least)
        if self.count >= self.policy.max_retries:
            raise Unavailable(why)
        delay = max(at_least, backoff(self.count + 1, self.policy.base, self.policy.cap))
        if delay >= self.remaining():
            raise Unavailable(why if failure is Failure.CONTENTION else LATE)
        if not self.budget.spend(failure.value):
            log.warning("retry budget spent: not retrying (%s)", failure.name.lower())
            raise Unavailable(f"{why} ({BUDGET_SPENT})")
        self.count += 1
        if telemetry.metrics is not None:
            telemetry.metrics.retry(failure.name.lower())
        return failure.value, delay

    def _take_conflict(self, why: str, at_least: float) -> tuple[int, float]:
        if self.conflicts >= CONFLICTS.max_retries:
            raise Unavailable(why)
        delay = max(at_least, conflict_backoff(self.conflicts + 1))
        if delay >= self.remaining():
            raise Unavailable(why)
        self.conflicts += 1
        if telemetry.metrics is not None:
            telemetry.metrics.retry(Failure.CONFLICT.name.lower())
        return Failure.CONFLICT.value, delay

    def _after(self, error: Exception, at_least: float = 0.0) -> tuple[int, float]:
        """`_take` for a failed call: `error` itself when sending it again cannot help; a
        give-up is raised from what DynamoDB answered, as the call's own error was."""
        failure = failure_of(error)
        if failure is None:
            raise error
        try:
            return self._take(failure, _gave_up(error), at_least)
        except Unavailable as stop:
            raise stop from _cause(error)

    async def pause(self, failure: Failure, why: str) -> int:
        """Sleep before a retry and return what it cost; Unavailable when the policy says
        stop (`why` then says why the request was being retried)."""
        cost, delay = self._take(failure, why, 0.0)
        await sleep(delay)
        return cost

    async def again(self, error: Exception, *, at_least: float = 0.0) -> int:
        """After a failed call: sleep (`at_least` seconds, if a service asks for spacing)
        before sending it again unchanged, and return the retry's cost; or raise."""
        cost, delay = self._after(error, at_least)
        await sleep(delay)
        return cost

    def progressed(self) -> None:
        """One step of a multi-step write (a chunk of followed copies) committed: the count
        starts again for the next step. The steps are fixed by the data, not by failures,
        so attempts stay bounded (steps x the policy) and no loop multiplies another."""
        self.count = 0
        self.conflicts = 0

    def answered(self, cost: int) -> None:
        """A call succeeded after a retry that cost `cost` (0: at its first attempt)."""
        self.budget.refill(cost or NO_RETRY_REFILL)

    def recovered(self, cost: int) -> None:
        """A loop reached its goal after a retry that cost `cost` (0: none): given back, as
        a call's successful retry is (its calls refilled their own share already)."""
        self.budget.refill(cost)


async def resend(send: Callable[[], Awaitable[T]], retries: Retries) -> T:
    """`send()` again, unchanged, while its failure says it may pass next time: the one loop
    for throttles, timeouts, dropped connections and transaction conflicts (`Table.call`
    for a request, `admin.call` for the command line), on `retries`."""
    cost = 0
    while True:
        try:
            response = await send()
        except (Unavailable, ClientError) as error:
            cost = await retries.again(error)
            continue
        retries.answered(cost)
        return response


def _cause(error: Exception) -> BaseException:
    """What DynamoDB answered (or how it failed to): the cause a give-up is raised from."""
    return error.__cause__ if isinstance(error, Unavailable) and error.__cause__ else error


def _gave_up(error: Exception) -> str:
    # The client's own words for busy or unreachable; a transaction that kept conflicting
    # was cancelled each time, so nothing was written.
    return str(error) if isinstance(error, Unavailable) else REFUSED
