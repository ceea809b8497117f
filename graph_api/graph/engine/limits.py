"""Bounds on one operation: depth, aliases, tokens, static cost, introspection.

Every bound works on the document as written, from its one walk (`graph/engine/plan/walk.py`, which
the operation's plan reuses): each selection is visited once and each fragment's figures
are memoized, so a document whose fragments spread each other exponentially is measured in
time linear in its size (and refused, since its expansion is what the limits count). Tokens
are counted by the parser, which stops at the limit; depth and aliases by `measure` below,
before graphql-core's own rules run; cost by `graph.engine.cost` once the variables are known.

graphql-core's rules are not all linear (OverlappingFieldsCanBeMergedRule compares fields of
the same name pairwise: about a second for 5,000 tokens of repeated fields on this machine),
so `Validation` runs them in one worker thread, off the event loop, and caches the result
by document text: the loop keeps answering (`/healthz`, other requests) meanwhile, and at
most one such validation runs at a time.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import orjson
from graphql import (
    ASTValidationRule,
    DocumentNode,
    GraphQLError,
    GraphQLSchema,
)
from strawberry.extensions import (
    AddValidationRules,
    DisableIntrospection,
    MaxTokensLimiter,
    SchemaExtension,
)

from graph_api.errors import BadUserInput
from graph_api.graph.engine.budgets import buckets_in_redis
from graph_api.graph.engine.cost import CostLimit, SharedCostLimit
from graph_api.graph.engine.document import operations_of
from graph_api.graph.engine.plan import walk
from graph_api.internals.graphql_core import ValidationAbortedError
from graph_api.internals.strawberry import graphql_schema, validate_document, validation_rules
from graph_api.model import validation
from graph_api.settings import Settings

# The operation name the client sent (None: none), for the multiple-operations rule:
# Strawberry's ExecutionContext.operation_name falls back to the first operation's name.
requested_operation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "requested_operation", default=None
)


@dataclass
class Shape:
    """What a document asks for, fragments spread in, and what measuring it took."""

    depths: dict[str, int] = field(default_factory=dict)  # by operation name ("" if none)
    aliases: int = 0  # aliased fields, every spread of a fragment counted
    visited: int = 0  # selections visited: each selection of the document once


def measure(document: DocumentNode, schema: GraphQLSchema) -> Shape:
    """Depth of each operation and aliases of the document, from its one walk for `schema`
    (`plan.walk`, which the plan reuses)."""
    walked = walk.walked(schema, document)
    shape = Shape(visited=walked.visited)
    for operation in walked.operations:
        node = operation.node
        name = node.name.value if node.name else ""
        shape.depths[name] = max(shape.depths.get(name, 0), operation.depth)
        shape.aliases += operation.aliases
    return shape


@dataclass(frozen=True)
class DocumentLimits:
    max_depth: int
    max_aliases: int

    def check(self, document: DocumentNode, schema: GraphQLSchema) -> list[GraphQLError]:
        shape = measure(document, schema)
        errors = [
            GraphQLError(
                f"{f'operation {name!r}' if name else 'the operation'} nests fields"
                f" {depth} deep, over the limit of {self.max_depth}",
                extensions={"code": BadUserInput.code, "limit": self.max_depth},
            )
            for name, depth in shape.depths.items()
            if depth > self.max_depth
        ]
        if shape.aliases > self.max_aliases:
            errors.append(
                GraphQLError(
                    f"the document has {shape.aliases} aliases (fragments counted each time"
                    f" they are spread), over the limit of {self.max_aliases}",
                    extensions={"code": BadUserInput.code, "limit": self.max_aliases},
                )
            )
        return errors


def operation_name_errors(document: DocumentNode) -> list[GraphQLError]:
    """GraphQL spec, GetOperation: several operations and no operationName is a request error
    (Strawberry would run the first one)."""
    if requested_operation.get() is None and len(operations_of(document)) > 1:
        return [
            GraphQLError(
                "Must provide operation name if query contains multiple operations.",
                extensions={"code": BadUserInput.code, "field": "operationName"},
            )
        ]
    return []


def variable_errors(variables: object) -> list[GraphQLError]:
    """Every string among the variables (and every key of an input object) must be valid
    Unicode, with no lone surrogate: such a string can be neither stored nor compared,
    whichever field it is for."""
    try:  # the common case, told at once: orjson refuses a lone surrogate (and odd values)
        orjson.dumps(variables)
    except TypeError:  # orjson.JSONEncodeError: the walk below finds where, if it is that
        pass
    else:
        return []
    pending: list[tuple[object, tuple[str | int, ...]]] = [(variables, ())]
    while pending:
        value, path = pending.pop()
        if isinstance(value, dict):
            pending.extend((inner, (*path, key)) for key, inner in value.items())
            keys = [k for k in value if isinstance(k, str)]
        elif isinstance(value, list | tuple):
            pending.extend((inner, (*path, i)) for i, inner in enumerate(value))
            keys = []
        else:
            keys = [value] if isinstance(value, str) else []
        if not all(validation.is_unicode_text(k) for k in keys):
            where = "$" + "".join(
                f"[{part}]" if isinstance(part, int) else f".{part}" for part in path
            ).lstrip(".")
            return [
                GraphQLError(
                    f"variable {where} is not valid Unicode text (a lone surrogate?)",
                    extensions={"code": BadUserInput.code, "field": where},
                )
            ]
    return []


Rules = tuple[type[ASTValidationRule], ...]


class ValidationResults:
    """Validation results by document text, and the one thread that computes them."""

    def __init__(self, limits: DocumentLimits, maxsize: int) -> None:
        self.limits = limits
        self.maxsize = maxsize
        self.results: OrderedDict[tuple[str, Rules], list[GraphQLError]] = OrderedDict()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphql-validate")

    def get(self, key: tuple[str, Rules]) -> list[GraphQLError] | None:
        found = self.results.get(key)
        if found is not None:
            self.results.move_to_end(key)
        return found

    def put(self, key: tuple[str, Rules], errors: list[GraphQLError]) -> None:
        self.results[key] = errors
        while len(self.results) > self.maxsize:
            self.results.popitem(last=False)

    async def validate(
        self, schema: GraphQLSchema, document: DocumentNode, rules: Rules
    ) -> list[GraphQLError]:
        """Our limits first, on the loop (one linear pass); graphql-core's rules after them,
        in the worker thread, only for a document within the limits."""
        errors = self.limits.check(document, schema)
        if errors:
            return errors
        loop = asyncio.get_running_loop()
        errors = await loop.run_in_executor(
            self.executor, validate_document, schema, document, rules
        )
        # graphql-core gives up on a document too costly to compare (its overlapping-fields
        # budget) or nested too deeply, with a bare "Validation aborted.".
        return [
            GraphQLError(
                "the document is too complex to validate: spread fewer fragments, ask for"
                " each field once, or nest less",
                extensions={"code": BadUserInput.code},
            )
            if isinstance(error, ValidationAbortedError)
            else error
            for error in errors
        ]


class Validation(SchemaExtension):
    """Validates the document (cached by its text), then the request around it: the
    operation name and the variables' text. Replaces Strawberry's ValidationCache."""

    def __init__(self, results: ValidationResults) -> None:
        self.results = results

    async def on_validate(self) -> AsyncIterator[None]:
        context = self.execution_context
        document = context.graphql_document
        assert document is not None  # parsed, or Strawberry returned the syntax error
        rules = tuple(context.validation_rules)
        key = (context.query, rules) if context.query is not None else None
        errors = self.results.get(key) if key else None
        if errors is None:
            errors = await self.results.validate(graphql_schema(context.schema), document, rules)
            if key:
                self.results.put(key, errors)
        if not errors:
            errors = [*operation_name_errors(document), *variable_errors(context.variables)]
        context.pre_execution_errors = list(errors)
        yield


def limit_extensions(settings: Settings, cache_size: int) -> list[Callable[[], SchemaExtension]]:
    """The extensions that bound an operation; each request gets its own instances."""
    limits = DocumentLimits(settings.max_depth, settings.max_aliases)
    results = ValidationResults(limits, cache_size)
    # The rate limit's gate is the cost extension's (graph/engine/throttle.py); with Redis's
    # buckets, its hook awaits them.
    cost_limit = SharedCostLimit if buckets_in_redis(settings) else CostLimit
    extensions: list[Callable[[], SchemaExtension]] = [
        lambda: MaxTokensLimiter(max_token_count=settings.max_tokens),
        lambda: Validation(results),
        lambda: cost_limit(settings.max_cost),
    ]
    if not settings.introspection:
        rules = validation_rules(DisableIntrospection())
        extensions.insert(1, lambda: AddValidationRules(rules))
    return extensions
