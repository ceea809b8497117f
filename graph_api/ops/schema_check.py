"""The breaking-change check: the code's GraphQL schema against the last released one.

`schema/released.graphql` is the contract clients were given; it changes only on a release.
A breaking change (graphql-core's `find_breaking_changes`) fails the check unless it is
recorded as intended in `schema/intended-breaking-changes.txt`, one line per change:

    <the change's description, exactly as the check prints it> | <why it is intended>

Dangerous changes (an added optional argument, a changed default, ...) are printed and pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from graphql import (
    GraphQLError,
    GraphQLSchema,
    build_schema,
    find_breaking_changes,
    find_dangerous_changes,
)

RELEASED = Path("schema/released.graphql")
INTENDED = Path("schema/intended-breaking-changes.txt")
SEPARATOR = " | "


class SchemaCheckError(ValueError):
    """The check could not run: a file is missing or malformed."""


@dataclass(frozen=True)
class Change:
    kind: str  # the BreakingChangeType / DangerousChangeType name
    description: str


@dataclass(frozen=True)
class Report:
    breaking: list[Change]
    dangerous: list[Change]
    intended: dict[str, str] = field(default_factory=dict)  # description -> reason

    @property
    def unrecorded(self) -> list[Change]:
        return [c for c in self.breaking if c.description not in self.intended]

    @property
    def stale(self) -> list[str]:
        """Recorded changes the check no longer finds: left over from an earlier release."""
        found = {c.description for c in self.breaking}
        return [d for d in self.intended if d not in found]

    @property
    def passed(self) -> bool:
        return not self.unrecorded


def _build(sdl: str, name: str) -> GraphQLSchema:
    try:
        return build_schema(sdl)
    except GraphQLError as error:
        raise SchemaCheckError(f"{name} is not a valid schema: {error.message}") from error


def compare(released_sdl: str, current_sdl: str) -> tuple[list[Change], list[Change]]:
    """(breaking, dangerous) changes from the released schema to the current one."""
    old, new = _build(released_sdl, "the released schema"), _build(current_sdl, "the schema")
    breaking = [Change(c.type.name, c.description) for c in find_breaking_changes(old, new)]
    dangerous = [Change(c.type.name, c.description) for c in find_dangerous_changes(old, new)]
    return breaking, dangerous


def parse_intended(text: str, source: Path = INTENDED) -> dict[str, str]:
    """The recorded intended breaking changes; every one must give its reason."""
    intended: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        description, _, reason = (part.strip() for part in line.partition(SEPARATOR.strip()))
        if not description or not reason:
            raise SchemaCheckError(
                f"{source}:{number}: write '<change>{SEPARATOR}<reason>', not {line!r}"
            )
        intended[description] = reason
    return intended


def check(
    released_sdl: str, current_sdl: str, intended_text: str = "", source: Path = INTENDED
) -> Report:
    breaking, dangerous = compare(released_sdl, current_sdl)
    return Report(breaking, dangerous, parse_intended(intended_text, source))


def render(report: Report, intended_path: Path = INTENDED) -> list[str]:
    """What the check prints: every change, then its verdict."""
    lines = []
    for change in report.breaking:
        reason = report.intended.get(change.description)
        if reason is None:
            lines.append(f"BREAKING   {change.kind}: {change.description}")
        else:
            lines.append(f"intended   {change.kind}: {change.description} ({reason})")
    lines += [f"dangerous  {c.kind}: {c.description}" for c in report.dangerous]
    lines += [
        f"note: {intended_path} records a change no longer found; remove it: {d}"
        for d in report.stale
    ]
    if report.unrecorded:
        lines.append(
            f"{len(report.unrecorded)} breaking change(s) not recorded: if intended, add each"
            f" to {intended_path} as '<change>{SEPARATOR}<reason>'"
        )
    elif not report.breaking and not report.dangerous:
        lines.append("no changes that break or endanger clients since the released schema")
    else:
        lines.append("schema check passed")
    return lines


def run(current_sdl: str, released: Path, intended: Path) -> tuple[Report, Sequence[str]]:
    """Read the files and check; a missing intended file means nothing is recorded."""
    try:
        released_sdl = released.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SchemaCheckError(f"{released} not found: it holds the last released schema") from None
    intended_text = intended.read_text(encoding="utf-8") if intended.exists() else ""
    report = check(released_sdl, current_sdl, intended_text, intended)
    return report, render(report, intended)
