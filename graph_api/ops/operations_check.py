"""The operations check: a front end's `.graphql` operations against the API's schema.

`graph-api schema-check --operations DIR` reads every `.graphql` file under DIR (recursively),
as Apollo, urql and GraphQL Code Generator projects keep them: a file may hold several
operations and fragments, and a fragment may be spread from any file, so fragments are
looked up across the whole directory. Each operation is validated, with the fragments it
spreads (transitively), by graphql-core's standard rules, the ones the server applies to a
request; a fragment no operation spreads is validated on its own.

The check is on plain GraphQL: client-only directives (Relay's `@connection`,
`@argumentDefinitions`, Apollo's `@client`) are not in the server's schema and fail as
unknown directives. A Relay project keeps its operations in JavaScript; it checks them with
relay-compiler against `schema/schema.graphql` (README, "Checking your operations in CI").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from graphql import (
    DocumentNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSchema,
    NoUnusedFragmentsRule,
    OperationDefinitionNode,
    Source,
    parse,
    specified_rules,
    validate,
)
from graphql.language import Visitor, visit


class OperationsError(ValueError):
    """The check could not run: DIR is missing, holds no operations, or a file won't parse."""


@dataclass(frozen=True)
class Definition:
    path: Path
    node: OperationDefinitionNode | FragmentDefinitionNode

    @property
    def label(self) -> str:
        """`query StudentPageQuery`, `fragment StudentRow_student`, `anonymous mutation`."""
        node = self.node
        if isinstance(node, FragmentDefinitionNode):
            return f"fragment {node.name.value}"
        kind = node.operation.value
        return f"{kind} {node.name.value}" if node.name else f"anonymous {kind}"


@dataclass(frozen=True)
class Problem:
    definition: Definition  # the operation (or unused fragment) that breaks
    message: str  # graphql-core's validation message
    where: str  # FILE:LINE:COLUMN of the offending node, in whichever file holds it

    def __str__(self) -> str:
        return f"{self.definition.path}: {self.definition.label}: {self.message} ({self.where})"


@dataclass(frozen=True)
class Report:
    root: Path
    files: int
    operations: int
    fragments: int
    problems: list[Problem]

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def broken(self) -> list[Definition]:
        """Each operation (or unused fragment) that breaks, once, in file order."""
        return list(dict.fromkeys(p.definition for p in self.problems))

    def lines(self) -> list[str]:
        counted = (
            f"{self.operations} operation(s) and {self.fragments} fragment(s)"
            f" in {self.files} file(s) under {self.root}"
        )
        if self.passed:
            return [f"operations check passed: {counted} validate against the schema"]
        return [str(p) for p in self.problems] + [
            f"operations check failed: {len(self.broken)} break against the schema, of {counted}"
        ]


def load(root: Path) -> tuple[list[Path], list[Definition]]:
    """Every definition of every `.graphql` file under `root`, in path order."""
    if not root.is_dir():
        raise OperationsError(f"{root} is not a directory of .graphql operations")
    paths = sorted(root.rglob("*.graphql"))
    if not paths:
        raise OperationsError(f"{root} holds no .graphql file")
    definitions = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
            document = parse(Source(text, str(path)))
        except GraphQLError as error:
            where = _where(error) or str(path)
            raise OperationsError(f"{where}: does not parse: {error.message}") from None
        except (OSError, UnicodeDecodeError) as error:
            raise OperationsError(f"{path}: cannot be read: {error}") from None
        for node in document.definitions:
            if isinstance(node, OperationDefinitionNode | FragmentDefinitionNode):
                definitions.append(Definition(path, node))
            else:  # a type definition or extension: not a client operation
                raise OperationsError(
                    f"{_location(path, node)}: does not parse as an operation: holds a"
                    f" {node.kind.replace('_', ' ')} (schema files don't belong under {root})"
                )
    return paths, definitions


def check(schema: GraphQLSchema, root: Path) -> Report:
    """Validate every operation under `root` against `schema`."""
    paths, definitions = load(root)
    fragments: dict[str, Definition] = {}
    operation_names: dict[str, Definition] = {}
    problems: list[Problem] = []
    for definition in definitions:
        node = definition.node
        if node.name is None:
            continue
        name, kind = (
            node.name.value,
            "fragment" if isinstance(node, FragmentDefinitionNode) else "operation",
        )
        seen = fragments if kind == "fragment" else operation_names
        if name in seen:  # clients and code generators key their documents by name
            first = seen[name]
            problems.append(
                Problem(
                    definition,
                    f"There can be only one {kind} named '{name}'"
                    f" (also {_location(first.path, first.node)}).",
                    _location(definition.path, node),
                )
            )
        else:
            seen[name] = definition

    spread: set[str] = set()
    operations = [d for d in definitions if isinstance(d.node, OperationDefinitionNode)]
    for operation in operations:
        used = reachable([operation.node], fragments)
        spread.update(used)
        problems += _validate(schema, operation, [fragments[n].node for n in used])
    for name, fragment in fragments.items():
        if name not in spread:  # a fragment of a component no operation here uses (yet)
            used = reachable([fragment.node], fragments) - {name}
            others = [fragments[n].node for n in used]
            problems += _validate(schema, fragment, others, unused_fragments_ok=True)
    order = {d: i for i, d in enumerate(definitions)}
    problems.sort(key=lambda p: order[p.definition])
    return Report(root, len(paths), len(operations), len(fragments), problems)


def reachable(
    nodes: Iterable[OperationDefinitionNode | FragmentDefinitionNode],
    fragments: dict[str, Definition],
) -> set[str]:
    """Names of the known fragments `nodes` spread, directly or through other fragments."""
    found: set[str] = set()
    todo = list(nodes)
    while todo:
        for name in _spreads(todo.pop()):
            if name in fragments and name not in found:
                found.add(name)
                todo.append(fragments[name].node)
    return found


def _spreads(node: OperationDefinitionNode | FragmentDefinitionNode) -> list[str]:
    names: list[str] = []

    class Spreads(Visitor):
        def enter_fragment_spread(self, spread: FragmentSpreadNode, *_: object) -> None:
            names.append(spread.name.value)

    visit(node, Spreads())
    return names


def _validate(
    schema: GraphQLSchema,
    definition: Definition,
    fragments: Sequence[OperationDefinitionNode | FragmentDefinitionNode],
    unused_fragments_ok: bool = False,
) -> list[Problem]:
    rules = [r for r in specified_rules if not (unused_fragments_ok and r is NoUnusedFragmentsRule)]
    document = DocumentNode(definitions=(definition.node, *fragments))
    return [
        Problem(definition, error.message, _where(error) or str(definition.path))
        for error in validate(schema, document, rules)
    ]


def _location(path: Path, node: OperationDefinitionNode | FragmentDefinitionNode | object) -> str:
    loc = getattr(node, "loc", None)
    if loc is None:
        return str(path)
    position = loc.source.get_location(loc.start)
    return f"{path}:{position.line}:{position.column}"


def _where(error: GraphQLError) -> str | None:
    """FILE:LINE:COLUMN of the error's first node (its own file: fragments come from any)."""
    for node in error.nodes or ():
        if node.loc is not None:
            position = node.loc.source.get_location(node.loc.start)
            return f"{node.loc.source.name}:{position.line}:{position.column}"
    if error.source is not None and error.locations:
        first = error.locations[0]
        return f"{error.source.name}:{first.line}:{first.column}"
    return None
