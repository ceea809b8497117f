"""`graph-api persist DIR`: a persisted-query manifest of the operations under DIR.

The manifest is Apollo's (`apollo-persisted-query-manifest`, version 1): one entry an
operation, `{"id", "name", "type", "body"}`, whose body is the operation and the fragments it
spreads (transitively, in the order the files define them), printed by graphql-core, and
whose id is the SHA-256 of the body in hex. The operations are read and validated as
`schema-check --operations DIR` does (`operations_check`): a manifest is written only when
every one validates and has a name (clients and the manifest key operations by name).
A server with GRAPH_API_DOCUMENTS_MANIFEST runs them by id (`graph_api.http.persisted`).

`add_typename` writes the bodies as Apollo Client sends them, and as Apollo's own manifest
generator writes them: `__typename` added to every selection set but an operation's own
(Apollo's `addTypenameToDocument`), so that the answers to a manifest's documents carry what
Apollo's cache keys objects by.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLSchema,
    NameNode,
    Node,
    OperationDefinitionNode,
    SelectionSetNode,
    Visitor,
    print_ast,
    visit,
)

from graph_api.http.persisted import MANIFEST_FORMAT, sha256_hex
from graph_api.ops import operations_check
from graph_api.ops.operations_check import Definition, OperationsError


class Broken(OperationsError):
    """An operation does not validate against the schema: the check's lines."""


def manifest(schema: GraphQLSchema, root: Path, add_typename: bool = False) -> dict[str, Any]:
    """The manifest of the operations under `root` (bodies with `__typename` added as Apollo
    Client adds it, if `add_typename`); OperationsError when one does not validate against
    `schema`, or has no name."""
    report = operations_check.check(schema, root)
    if not report.passed:
        raise Broken("\n".join(report.lines()))
    _, definitions = operations_check.load(root)
    fragments = {
        d.node.name.value: d for d in definitions if not isinstance(d.node, OperationDefinitionNode)
    }
    order = {name: n for n, name in enumerate(fragments)}
    operations = []
    for definition in definitions:
        node = definition.node
        if not isinstance(node, OperationDefinitionNode):
            continue
        if node.name is None:
            raise OperationsError(f"{_where(definition)}: an operation needs a name to persist")
        used = sorted(operations_check.reachable([node], fragments), key=order.__getitem__)
        document = DocumentNode(definitions=(node, *(fragments[n].node for n in used)))
        if add_typename:
            document = visit(document, _AddTypename())
        body = print_ast(document)
        operations.append(
            {
                "id": sha256_hex(body),
                "name": node.name.value,
                "type": node.operation.value,
                "body": body,
            }
        )
    return {"format": MANIFEST_FORMAT, "version": 1, "operations": operations}


_TYPENAME = FieldNode(name=NameNode(value="__typename"), arguments=(), directives=())


class _AddTypename(Visitor):
    """Apollo Client's `addTypenameToDocument`: `__typename` last in every selection set but
    an operation's own, unless the set has it already or selects an introspection field, or
    is under a field marked `@export`."""

    def enter_selection_set(
        self, node: SelectionSetNode, _key: Any, parent: Node | None, *_: Any
    ) -> SelectionSetNode | None:
        if isinstance(parent, OperationDefinitionNode):
            return None
        if any(isinstance(s, FieldNode) and s.name.value.startswith("__") for s in node.selections):
            return None
        if isinstance(parent, FieldNode) and any(
            d.name.value == "export" for d in parent.directives or ()
        ):
            return None
        return SelectionSetNode(selections=(*node.selections, _TYPENAME))


def _where(definition: Definition) -> str:
    loc = definition.node.loc
    if loc is None:
        return str(definition.path)
    position = loc.source.get_location(loc.start)
    return f"{definition.path}:{position.line}:{position.column}"
