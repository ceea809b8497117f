"""The API's DynamoDB calls as its client makes them: timed (`CallClock`), grouped
into waves, and recorded as sent (`RequestRecorder`), for `make bench-plain` (bench/plain.py,
bench/floors.py).

Both hook botocore's public events, whatever the API's own code looks like.
"""

from __future__ import annotations

import bisect
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

Call = tuple[str, float, float]  # operation, started, ended (perf_counter seconds)
T = TypeVar("T")


class CallClock:
    """Every DynamoDB call the API's client makes while `watching`, with its operation
    and interval.

    Registered on botocore's events (public API, whatever the API's own code looks like):
    a call starts before its parameters are serialized and ends when its response is parsed.
    The bench sends one GraphQL request at a time, so the calls between two `take()`s are
    that request's.

    Registered only while watching: its two handlers cost the API ~47 µs of CPU a call
    (botocore emits both events, and builds an HTTP response object for `after-call`), which
    the timed requests must not pay (Q3 sends seven calls).
    """

    def __init__(self, dynamo: Any) -> None:
        self._calls: list[Call] = []
        self._events = dynamo  # `Dynamo.register`: on the client of every event loop

    @contextmanager
    def watching(self) -> Iterator[None]:
        self._events.register("before-parameter-build.dynamodb", self._start)
        self._events.register("after-call.dynamodb", self._end)
        try:
            yield
        finally:
            self._events.unregister("before-parameter-build.dynamodb", self._start)
            self._events.unregister("after-call.dynamodb", self._end)

    def calls_of(self, send: Callable[[], T]) -> tuple[T, list[Call]]:
        """What `send()` returns, and the calls made while it ran, the clock watching."""
        self.take()
        with self.watching():
            sent = send()
        return sent, self.take()

    @staticmethod
    def _start(context: dict[str, Any], **_: Any) -> None:
        context["bench_started"] = time.perf_counter()

    def _end(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        started = context.get("bench_started")
        if started is not None:
            self._calls.append((model.name, started, time.perf_counter()))  # atomic append

    def take(self) -> list[Call]:
        calls, self._calls = self._calls, []
        return calls


# Requests of ours sent again after a timed run, untimed, while the clock watches: the calls
# a query makes, and their waves, without the clock on the requests that were timed.
SAMPLED = 20


def group(calls: list[Call]) -> list[list[Call]]:
    """The calls in waves: calls that overlap in time (directly or through another) are one."""
    out: list[list[Call]] = []
    end = 0.0
    for call in sorted(calls, key=lambda c: c[1]):
        if out and call[1] <= end:
            out[-1].append(call)
            end = max(end, call[2])
        else:
            out.append([call])
            end = call[2]
    return out


def waves(calls: list[Call]) -> tuple[int, float, float]:
    """(waves, wall ms, serial ms): wall is the sum of the waves' spans (time with at least
    one call in flight), serial the sum of the calls' own times."""
    grouped = group(calls)
    wall = sum(max(c[2] for c in w) - min(c[1] for c in w) for w in grouped)
    serial = sum(c[2] - c[1] for c in calls)
    return len(grouped), wall * 1000, serial * 1000


def shape(calls: list[Call]) -> str:
    """The waves' operations in order, e.g. `1 BatchGetItem → 30 Query`."""
    return " \u2192 ".join(
        " + ".join(f"{n} {op}" for op, n in sorted(Counter(c[0] for c in w).items()))
        for w in group(calls)
    )


def calls_within(calls: list[Call], intervals: list[tuple[float, float]]) -> list[list[Call]]:
    """For each interval, the calls that started and ended inside it."""
    calls = sorted(calls, key=lambda call: call[1])
    starts = [call[1] for call in calls]
    out = []
    for begun, ended in intervals:
        first, last = bisect.bisect_left(starts, begun), bisect.bisect_right(starts, ended)
        out.append([call for call in calls[first:last] if call[2] <= ended])
    return out


def pauses(requests: list[list[Call]]) -> list[float] | None:
    """The API's pauses between its calls for requests sent one after another: for each call
    of a request, the time since the call before it ended (the first call's, since the
    previous request's last one), its lower quartile over the requests. None unless every
    request made the same calls one at a time.

    Lower bounds of how long DynamoDB waits between the calls: measured between the clock's
    events (a call's start before its parameters are serialized, its end once its answer is
    parsed), they leave out our client's share of each call; the lower quartile, as a busy
    moment only lengthens them.
    """
    shapes = {tuple(call[0] for call in calls) for calls in requests}
    if len(requests) < 2 or len(shapes) != 1 or any(len(w) > 1 for w in group(requests[0])):
        return None
    gaps: list[list[float]] = [[] for _ in requests[0]]
    for before, calls in itertools.pairwise(requests):
        previous = before[-1][2]
        for i, (_, started, ended) in enumerate(calls):
            gaps[i].append(started - previous)
            previous = ended
    return [sorted(gap)[len(gap) // 4] for gap in gaps]


class RequestRecorder:
    """The DynamoDB requests the API sends while `recording`, as they go on the wire (signed):
    botocore's `before-send` event. DynamoDB Local checks no signature's age, so a recorded
    request can be sent again. Registered only while recording.
    """

    def __init__(self, dynamo: Any) -> None:
        self._events = dynamo  # `Dynamo.register`: on the client of every event loop

    def _record(self, request: Any, recorded: list[dict[str, Any]]) -> None:
        url = urlsplit(request.url)
        body = request.body
        recorded.append(
            {
                "scheme": url.scheme,
                "host": url.hostname,
                "port": url.port,
                "path": url.path or "/",
                "headers": {k: _text(v) for k, v in request.headers.items()},
                "body": _text(body or b""),
            }
        )

    @contextmanager
    def recording(self) -> Iterator[list[dict[str, Any]]]:
        recorded: list[dict[str, Any]] = []

        def record(request: Any, **_: Any) -> None:  # None: the request is sent as usual
            self._record(request, recorded)

        self._events.register("before-send.dynamodb", record)
        try:
            yield recorded
        finally:
            self._events.unregister("before-send.dynamodb", record)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def record_calls(
    client: Any, body: bytes, recorder: RequestRecorder, clock: CallClock, attempts: int = 3
) -> tuple[list[dict[str, Any]], list[Call]] | None:
    """The DynamoDB requests our API sends for one GraphQL request, and their calls as the
    clock saw them; None when a call of something else (the stream reader's lease) kept
    slipping in: the requests recorded must be the ones the answer counts."""
    for _ in range(attempts):
        with recorder.recording() as recorded:
            (status, raw), calls = clock.calls_of(lambda: client.post_raw(body))
        if status != 200:
            raise RuntimeError(f"HTTP {status} while recording: {raw[:300]!r}")
        counted = (json.loads(raw).get("extensions") or {}).get("dynamodb", {}).get("requests")
        if counted == len(recorded) == len(calls):
            return recorded, calls
    return None
