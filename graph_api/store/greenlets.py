"""Synchronous code run on the event loop's thread, its network waits awaited.

boto3 is synchronous: each DynamoDB call used to run on a thread of a pool, and a GraphQL
request of the embedded backend or DynamoDB Local paid twice for it: the hand-over to a
thread and back (a future, a wake-up of the loop), and, with 16 requests in flight, the
threads and the loop taking the interpreter lock from one another. Measured on a
BatchGetItem of 30 students: 1.7 ms of CPU called directly, 2.6 ms through the pool, 3.5 ms
with 16 in flight.

`run(fn)` calls `fn` in a greenlet of the loop's thread instead. botocore serializes, signs
and parses there as before, without a thread; when our transport (`store/transport.py`)
would block on its socket, it calls `wait(awaitable)`, which hands the awaitable to `run`'s
coroutine, suspended until it is done, and resumes `fn` with its result. Other requests run
meanwhile, as with any coroutine. This is how SQLAlchemy runs its synchronous core over
asyncio drivers (`greenlet_spawn`, `await_only`). The greenlets are kept and serve one call
after another (`_Spawned`): a new one per call cost a page fault and about 40 µs.

A cancellation (a request's deadline) is raised inside `fn` where it waits, as
`CancelledError`, which botocore does not catch (it is not an Exception), so the transport
closes the socket it was using, and `run` raises it to its caller.
"""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from greenlet import GreenletExit, getcurrent, greenlet

T = TypeVar("T")


class _Spawned(greenlet):  # type: ignore[misc]
    """A greenlet that `run` drives: `wait` may suspend it. It serves one `run` after
    another: a new greenlet costs its own frame stack, mapped and unmapped each time (a
    page fault and about 40 µs of a DynamoDB call's CPU, measured), a kept one nothing."""

    def __init__(self) -> None:
        super().__init__(_serve)
        self.outcome: tuple[bool, Any] | None = None  # (failed, result or error), for run


def _serve(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    # The loop of a `_Spawned`. Its paused frame must not refer to its own greenlet: the
    # collector does not see greenlets' frames, so one that did would never be freed.
    while True:
        try:
            getcurrent().outcome = (False, fn(*args))
        except GreenletExit:  # collected while paused: let it end
            raise
        except BaseException as error:  # a cancellation too: run raises it
            # Its traceback without this loop's frame, whose locals will be another call's.
            trace = error.__traceback__
            getcurrent().outcome = (True, error.with_traceback(trace and trace.tb_next))
            del trace
        del fn, args  # nothing of this call kept while idle (run drops the rest)
        fn, args = getcurrent().parent.switch(_DONE)


_DONE = object()  # what a `_Spawned` switches to its caller when its call is over
_KEPT = 64  # idle greenlets kept per thread; past that, one whose call is over is freed


class _Idle(threading.local):
    """This thread's idle greenlets (each thread starts with none)."""

    def __init__(self) -> None:
        self.greenlets: list[_Spawned] = []


_idle = _Idle()


async def run(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on this thread, each `wait` inside it awaited here."""
    kept = _idle.greenlets
    child = kept.pop() if kept else _Spawned()
    child.parent = getcurrent()
    child.gr_context = contextvars.copy_context()  # as a task or an executor call sees it
    result: Any = child.switch(fn, args)
    while result is not _DONE:
        if child.dead:  # fn raised GreenletExit, which greenlet hands over as a value
            raise result
        try:
            value = await result
        except BaseException:  # a cancellation too: raised inside fn, where it waited
            result = child.throw(*sys.exc_info())
        else:
            result = child.switch(value)
    assert child.outcome is not None
    (failed, outcome), child.outcome = child.outcome, None
    child.gr_context = None  # nor the caller's context variables, while idle
    if len(kept) < _KEPT:
        kept.append(child)
    if failed:
        try:
            raise outcome
        finally:
            del outcome  # else this frame, in the error's traceback, holds the error: a cycle
    return outcome  # type: ignore[no-any-return]


def waiting() -> bool:
    """Whether this code runs under `run`, so that `wait` may suspend it."""
    return isinstance(getcurrent(), _Spawned)


def wait(awaitable: Awaitable[T]) -> T:
    """The awaitable's result, awaited by `run`'s coroutine while this greenlet is paused."""
    current = getcurrent()
    if not isinstance(current, _Spawned):
        raise RuntimeError("wait() outside run()")
    return current.parent.switch(awaitable)  # type: ignore[no-any-return]
