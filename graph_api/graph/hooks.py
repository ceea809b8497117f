"""Strawberry's extension hooks, found once per extension class instead of once a request.

Each request gets its own extension instances (`schema.build_schema` passes classes and
factories), and for each stage of it (operation, parsing, validation, execution) Strawberry
looks every extension's hook up again and wraps it in a context manager: with our six
extensions, 24 lookups a request, each with `inspect`'s tests and a `functools.wraps`, about
13 µs of the 200 that a `{ __typename }` costs in process. What a class's hook is does not
change from one request to the next, so `HookRunner` works it out once a class; a request
only binds the context manager it makes to its own instance. The stages themselves are
Strawberry's (the same context managers, exit stacks and order): an extension sees no
difference.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from typing import Any

from strawberry.extensions import SchemaExtension
from strawberry.extensions.context import (
    ExecutingContextManager,
    ExtensionContextManagerBase,
    OperationContextManager,
    ParsingContextManager,
    ValidationContextManager,
    WrappedHook,
)
from strawberry.extensions.runner import SchemaExtensionsRunner

# A hook as its instance's context manager is made from it (given the instance), and
# whether that one is asynchronous; None: the class leaves the stage to SchemaExtension.
Found = tuple[Callable[[SchemaExtension], Any], bool] | None

_found: dict[tuple[type[SchemaExtension], str], Found] = {}


def found(extension_class: type[SchemaExtension], stage: str) -> Found:
    """What `ExtensionContextManagerBase.get_hook` finds for the class, worked out once."""
    key = (extension_class, stage)
    if key not in _found:
        _found[key] = _classify(extension_class, stage)
    return _found[key]


def _classify(extension_class: type[SchemaExtension], stage: str) -> Found:
    # The cases and the order of Strawberry's `get_hook` and `from_callable`.
    hook = getattr(extension_class, stage)
    if hook is getattr(SchemaExtension, stage):
        return None
    if inspect.isgeneratorfunction(hook):
        return contextlib.contextmanager(hook), False
    if inspect.isasyncgenfunction(hook):
        return contextlib.asynccontextmanager(hook), True
    if not callable(hook):
        raise ValueError(f"Hook {stage} on {extension_class} must be callable, received {hook!r}")
    if inspect.iscoroutinefunction(hook):

        @contextlib.asynccontextmanager
        async def awaited(extension: SchemaExtension) -> AsyncIterator[None]:
            await hook(extension)
            yield

        return awaited, True

    @contextlib.contextmanager
    def called(extension: SchemaExtension) -> Iterator[None]:
        hook(extension)
        yield

    return called, False


class _FoundOnce(ExtensionContextManagerBase):
    def get_hook(self, extension: SchemaExtension) -> WrappedHook | None:
        hook = found(type(extension), self.HOOK_NAME)
        if hook is None:
            return None
        make, is_async = hook
        return WrappedHook(extension=extension, hook=partial(make, extension), is_async=is_async)


class _Operation(_FoundOnce, OperationContextManager):
    pass


class _Parsing(_FoundOnce, ParsingContextManager):
    pass


class _Validation(_FoundOnce, ValidationContextManager):
    pass


class _Executing(_FoundOnce, ExecutingContextManager):
    pass


class HookRunner(SchemaExtensionsRunner):
    """Strawberry's runner of a request's extensions, their hooks found once a class."""

    def operation(self) -> OperationContextManager:
        return _Operation(self.extensions)

    def parsing(self) -> ParsingContextManager:
        return _Parsing(self.extensions)

    def validation(self) -> ValidationContextManager:
        return _Validation(self.extensions)

    def executing(self) -> ExecutingContextManager:
        return _Executing(self.extensions)
