"""moto's condition and update expressions, parsed once per text.

moto 5.2 parses an expression wherever it meets one: in a transaction, each action's
condition twice (its handler's validation, then the write) and its update expression once
more, the larger part of a 100-action transaction's CPU (bench/README.md).
The API's writes repeat a few texts with other names and values (`#n1 = :v1` for every
class a rename reaches), so:

- a condition is parsed once per text, set of names and values, and type of each value,
  with stand-ins for the names' and values' contents; each use gets a copy of that tree
  holding its own (`ConditionParser`, what moto's `create_condition_expression_parser`
  makes from then on);
- an update expression's syntax tree is kept by its text: moto only reads it (its
  validator works on a deep copy).

Anything else (no expression, a value that is not one typed value, a parse error) goes to
moto's own parser, which answers as it always did.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moto.dynamodb.comparisons import (
    AttributePath,
    AttributeValue,
    ConditionExpressionParser,
    Func,
    Op,
)

KEPT = 1024  # expressions kept, by text: the API's writes use a few dozen


class _Name(str):
    """A name placeholder (`#n0`) where a kept tree has a name."""


class _Value(str):
    """A value placeholder (`:v0`) where a kept tree has a value."""


@dataclass(frozen=True, slots=True)
class _Parsed:
    tree: Op | Func
    names_found: tuple[str, ...]
    values_found: tuple[str, ...]


Key = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]


@functools.lru_cache(maxsize=KEPT)
def _parsed(expression: str, names: tuple[str, ...], kinds: tuple[tuple[str, str], ...]) -> _Parsed:
    # What moto's parse depends on: the text, which placeholders exist (a missing one is an
    # error), and the type of each value (`BETWEEN` refuses NULL); never their contents.
    parser = ConditionExpressionParser(
        expression,
        {name: _Name(name) for name in names},
        {value: {kind: _Value(value)} for value, kind in kinds},
    )
    tree = parser.parse()
    return _Parsed(tree, tuple(parser.expr_attr_names_found), tuple(parser.expr_attr_values_found))


def _key(expression: Any, names: Any, values: Any) -> Key | None:
    if not isinstance(expression, str) or not expression:
        return None
    names, values = names or {}, values or {}
    if not isinstance(names, Mapping) or not isinstance(values, Mapping):
        return None
    kinds = []
    for placeholder, value in values.items():
        if not isinstance(value, Mapping) or len(value) != 1:
            return None
        kinds.append((placeholder, next(iter(value))))
    return expression, tuple(sorted(names)), tuple(sorted(kinds))


def _bind(node: Any, names: Mapping[str, str], values: Mapping[str, Any]) -> Any:
    """A copy of a kept tree with these names and values."""
    if isinstance(node, AttributePath):
        return AttributePath([names[p] if isinstance(p, _Name) else p for p in node.path])
    if isinstance(node, AttributeValue):
        if isinstance(node.value, _Value):
            return AttributeValue(values[node.value])
        return node
    if isinstance(node, Op | Func):
        bound = object.__new__(type(node))
        bound.__dict__.update({k: _bind(v, names, values) for k, v in vars(node).items()})
        return bound
    if isinstance(node, tuple | list):
        return type(node)(_bind(child, names, values) for child in node)
    return node


class ConditionParser:
    """moto's `ConditionExpressionParser`, as its callers use it, from kept parses."""

    def __init__(
        self,
        condition_expression: str | None,
        expression_attribute_names: dict[str, str] | None,
        expression_attribute_values: dict[str, dict[str, Any]] | None,
    ) -> None:
        self.condition_expression = condition_expression
        self.expression_attribute_names = expression_attribute_names
        self.expression_attribute_values = expression_attribute_values
        self.expr_attr_names_found: list[str] = []
        self.expr_attr_values_found: list[str] = []

    def parse(self) -> Op | Func:
        names, values = self.expression_attribute_names, self.expression_attribute_values
        key = _key(self.condition_expression, names, values)
        parsed = None
        if key is not None:
            try:
                parsed = _parsed(*key)
            except Exception:
                parsed = None  # moto's parser raises its own error with the real contents
        if parsed is None:
            parser = ConditionExpressionParser(self.condition_expression, names, values)
            try:
                return parser.parse()
            finally:
                self.expr_attr_names_found += parser.expr_attr_names_found
                self.expr_attr_values_found += parser.expr_attr_values_found
        self.expr_attr_names_found += parsed.names_found
        self.expr_attr_values_found += parsed.values_found
        tree: Op | Func = _bind(parsed.tree, names or {}, values or {})
        return tree


def kept_update_syntax(make: Any) -> Any:
    """`UpdateExpressionParser.make` (a classmethod's function), kept by text."""
    kept: Any = functools.lru_cache(maxsize=KEPT)(make)
    return classmethod(kept)
