"""Whether a field's value is awaitable, answered by its type where the type decides.

graphql-core asks every value it completes, through Strawberry's `optimized_is_awaitable`,
which looks up `__await__` on the instance: a failed attribute lookup each time for the
plain values that most fields are. The executor (`graph.execution`, `graph.runners`) asks
here instead.
"""

from __future__ import annotations

from collections.abc import Awaitable
from types import GeneratorType
from typing import Any, TypeGuard

from strawberry.execution import optimized_is_awaitable

# What a completed field most often is: never awaitable, told without a call.
COMPLETED = frozenset({dict, list, str, int, float, bool, type(None)})

# What is known of each type seen; None: ask each value. Builtins (whose lookup is their own
# C code) are never awaitable.
_BUILTINS = (type(None), bool, int, float, str, bytes, bytearray, list, tuple, dict, set, frozenset)
_by_type: dict[type, bool | None] = dict.fromkeys(_BUILTINS, False)
_UNSEEN = object()


def is_awaitable(value: Any) -> TypeGuard[Awaitable[Any]]:
    """Strawberry's `optimized_is_awaitable`, answered by type where the type decides.

    A value is awaitable for `await` by its type alone; graphql-core also asks the instance
    for `__await__`, which only a `__getattr__` could answer differently: a type with none
    is asked once.
    """
    known = _by_type.get(type(value), _UNSEEN)
    if known is _UNSEEN:
        known = _by_type[type(value)] = (
            optimized_is_awaitable(value) if _by_type_decides(type(value)) else None
        )
    return optimized_is_awaitable(value) if known is None else known  # type: ignore[return-value]


def by_type(cls: type) -> bool | None:
    """Whether every instance of `cls` is awaitable (True) or none is (False); None when
    only an instance can tell."""
    known = _by_type.get(cls, _UNSEEN)
    if known is _UNSEEN:
        return None  # not seen yet: `is_awaitable` learns it from a value
    return known  # type: ignore[return-value]


def _by_type_decides(cls: type) -> bool:
    """Whether every instance of `cls` answers alike: attribute lookup is `object`'s own,
    with no `__getattr__` of any kind (a proxy's C-level forwarding, a `partialmethod`
    would answer for the value it wraps). A generator-based coroutine is told by its code's
    flags, value by value. An `__await__` set on an instance is not seen: `await` itself
    ignores it."""
    return (
        getattr(cls, "__getattribute__", None) is object.__getattribute__
        and getattr(cls, "__getattr__", None) is None
        and not issubclass(cls, GeneratorType)
    )
