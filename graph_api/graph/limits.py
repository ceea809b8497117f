"""Bounds on one operation: depth, aliases, tokens, static cost, introspection.

Validation rules are built once and shared (they hold no state), so the validation cache,
which is keyed by the rules, keeps hitting; each request still gets its own extension
objects.
"""

from __future__ import annotations

from collections.abc import Callable

from graphql import ASTValidationRule
from strawberry.extensions import (
    AddValidationRules,
    DisableIntrospection,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
)

from graph_api.graph.cost import CostLimit
from graph_api.settings import Settings


def limit_extensions(settings: Settings) -> list[Callable[[], SchemaExtension]]:
    rules: list[type[ASTValidationRule]] = [
        *QueryDepthLimiter(max_depth=settings.max_depth).validation_rules,
        *MaxAliasesLimiter(max_alias_count=settings.max_aliases).validation_rules,
    ]
    if not settings.introspection:
        rules += DisableIntrospection().validation_rules
    return [
        lambda: MaxTokensLimiter(max_token_count=settings.max_tokens),
        lambda: AddValidationRules(rules),
        lambda: CostLimit(settings.max_cost),
    ]
