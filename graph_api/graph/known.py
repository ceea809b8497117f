"""Whether a value completes as an object type, answered by its class where the class decides.

The executor asks two things of every object it completes: whether it is awaitable
(`graph.awaitables`), and whether it is of the field's object type (Strawberry's
`is_type_of`: a `strawberry.cast` mark looked up on the instance, then `isinstance`). That
is four calls an object, for the same few classes: Q1 of `make bench` completes 575 objects.
`KnownObjects` keeps the classes it found to complete, when nothing of an instance can
change the answer, so most objects are told by one set lookup.

An instance could change it three ways, and a class is kept only when none applies:
- an awaitable told by the instance (`awaitables.by_type` is None for its class);
- a `__class__` of its own, which `isinstance` reads;
- a cast mark set on it: `Uncast`, the base of our node types, makes the mark a read-only
  property, so `strawberry.cast` raises for them instead of marking one instance. (A type
  that implements no interface has no `is_type_of`: any object completes as it.)
"""

from __future__ import annotations

from collections.abc import Callable
from inspect import getattr_static
from typing import Any

from graphql import GraphQLObjectType, Undefined
from strawberry.types.cast import TYPE_CAST_ATTRIBUTE

from graph_api.graph.awaitables import by_type, is_awaitable

_OBJECTS_CLASS = getattr_static(object, "__class__")


class Uncast:
    """A base for object types whose instances are never `strawberry.cast`: their class
    alone tells Strawberry's `is_type_of` (and the lookup of the mark fails no more)."""

    __slots__ = ()

    @property
    def __as_strawberry_type__(self) -> None:
        return None


class KnownObjects:
    """Whether a value completes as `object_type` on the executor's short path: not an
    awaitable, and of the type by Strawberry's own `is_type_of` (or, for a type without
    one, a value at all). `types` holds the classes whose every instance does."""

    def __init__(self, object_type: GraphQLObjectType) -> None:
        self._is_type_of: Callable[[Any, Any], Any] | None = object_type.is_type_of
        self.types: set[type] = set()

    def __call__(self, value: Any) -> bool:
        return type(value) in self.types or self.admits(value)

    def admits(self, value: Any) -> bool:
        """The question asked of the value itself; its class kept when that decides."""
        if is_awaitable(value):
            return False
        if self._is_type_of is None:  # any value that is one
            known = not (value is None or value is Undefined or isinstance(value, Exception))
        else:
            known = bool(self._is_type_of(value, None))
        if known and _class_decides(type(value), cast=self._is_type_of is not None):
            self.types.add(type(value))
        return known


def _class_decides(cls: type, *, cast: bool) -> bool:
    if by_type(cls) is not False or getattr_static(cls, "__class__", None) is not _OBJECTS_CLASS:
        return False
    return not cast or isinstance(getattr_static(cls, TYPE_CAST_ATTRIBUTE, None), property)


# By the type's id (kept with it, so its id stays its own): what is learnt serves every request.
_known: dict[int, tuple[GraphQLObjectType, KnownObjects]] = {}


def known_objects(object_type: GraphQLObjectType) -> KnownObjects:
    """The `KnownObjects` of `object_type`, shared by every request."""
    found = _known.get(id(object_type))
    if found is None:
        found = _known[id(object_type)] = (object_type, KnownObjects(object_type))
    return found[1]
