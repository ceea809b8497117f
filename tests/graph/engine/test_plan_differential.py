"""Our executor against graphql-core's own, on every document of the tests and 500 random
shapes (each with two or three sets of variables): the same data, the same errors at the same paths.

Our schema runs its executor (`graph/engine/execution.py`, the plan's steps) on the plans the
cache kept (`graph/engine/plan/cache.py`), as a server does request after request; the reference is
the same types and extensions on graphql-core's executor alone (Strawberry's default
execution context), each request on a plan made for it (a cold plan cache). Both read the
seeded demo table, which nothing writes; their answers and their DynamoDB requests (the
request's ledger) must be the same. Each random document runs with two or three sets of
variables (`@include`/`@skip` flipped, another `first`, another number of ids), all of
them in a shuffled order, so that a plan kept for one set and wrongly reused for another
shows. The documents:
`tests/ops/operations/`'s queries, `bench/queries.py`'s, the README's, and random shapes drawn
from the schema with a seeded RNG: fragments (named, inline, with and without a type
condition), aliases, `__typename`, `@include`/`@skip` read from variables or written as
literals, nested connections with `first`/`last` as literals or variables, node interfaces,
missing ids, all within the server's limits.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest
from graphql import (
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLInterfaceType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
    get_named_type,
    is_leaf_type,
    parse,
    print_ast,
    visit,
)
from graphql.language import DocumentNode, Visitor
from reference_executor import ours_and_reference
from support import OPERATIONS, ROOT
from test_request_counts import targets

from bench import queries as bench_queries
from graph_api.graph.engine.context import Context, Services
from graph_api.graph.engine.plan import cache
from graph_api.graph.engine.plan import operation as plans_of_operations
from graph_api.graph.schema import GraphSchema, build_schema
from graph_api.internals.strawberry import graphql_schema
from graph_api.store.codec import Item

SEED = 55
RANDOM_SHAPES = 500
AT_ONCE = 8  # documents in flight
README = ROOT / "README.md"

Document = tuple[str, str, dict[str, Any]]  # (name, text, variables)


# -- running both executors ------------------------------------------------------------------


# The data, the errors, and what the plan decides of the request: its cost, its Queries
# (a roster's first page rides with its node's read, or not) and the items it read, each
# with the attributes asked for. Not the number of BatchGetItems: a level reached through
# two batches that answer at different times reads in two (`test_request_counts`'s
# SPLIT_LEVELS), which one executor does on one run and not the next.
Answer = tuple[Any, list[dict[str, Any]], tuple[Any, int, list[tuple[str, list[str]]]]]

# Set while the reference runs: the plan cache neither hands out nor keeps a plan.
cold: contextvars.ContextVar[bool] = contextvars.ContextVar("cold", default=False)


class ColdForTheReference(cache.Plans):
    def get(self, schema: Any, document: Any, key: Any) -> Any:
        return None if cold.get() else super().get(schema, document, key)

    def put(self, schema: Any, document: Any, key: Any, plan: Any) -> Any:
        return plan if cold.get() else super().put(schema, document, key, plan)


@pytest.fixture(autouse=True)
def plans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plans_of_operations, "_plans", ColdForTheReference())


def normal(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Errors in an order of their own: which of two concurrent fields fails first is the
    event loop's to say, in either executor."""
    return sorted(errors, key=lambda error: json.dumps(error, sort_keys=True))


def run_all(services: Services, documents: list[Document]) -> list[tuple[Document, Answer, Answer]]:
    ours, reference = ours_and_reference(services)

    async def run(schema: GraphSchema, text: str, variables: dict[str, Any]) -> Answer:
        context = Context.create(services, "same-request-id")
        result = await schema.execute(text, variable_values=variables, context_value=context)
        errors = normal([error.formatted for error in result.errors or []])
        calls = [call.operation for call in context.ledger.calls]
        assert set(calls) <= {"Query", "BatchGetItem"}, calls
        assert context.ledger.requests == len(calls)  # no retries: nothing else differs
        cost = (result.extensions or {}).get("cost", {}).get("requested")
        return result.data, errors, (cost, calls.count("Query"), items_read(context))

    async def pair(document: Document) -> tuple[Document, Answer, Answer]:
        _, text, variables = document
        mine = await run(ours, text, variables)
        token = cold.set(True)
        try:
            theirs = await run(reference, text, variables)
        finally:
            cold.reset(token)
        return document, mine, theirs

    async def main() -> list[tuple[Document, Answer, Answer]]:
        done: list[tuple[Document, Answer, Answer]] = []
        for start in range(0, len(documents), AT_ONCE):  # the embedded backend waits, mostly
            done += await asyncio.gather(*map(pair, documents[start : start + AT_ONCE]))
        return done

    return asyncio.run(main())


def items_read(context: Context) -> list[tuple[str, list[str]]]:
    """The items the request's reads asked for, each with the attributes asked for."""
    reads = context.loaders.item._loader.cache_map._reads  # type: ignore[attr-defined]
    return sorted(
        (repr(key), sorted(attributes) if attributes is not None else ["(whole)"])
        for key, held in reads.items()
        for attributes, _ in held
    )


def assert_alike(results: list[tuple[Document, Answer, Answer]]) -> None:
    for (name, text, variables), mine, theirs in results:
        context = f"{name}\n{text}\n{variables}"
        assert mine[0] == theirs[0], context
        assert mine[1] == theirs[1], context
        assert mine[2] == theirs[2], f"cost, Queries, reads: {mine[2]} != {theirs[2]}\n{context}"
        # A real answer: the document ran (no request error, which both would share).
        assert mine[0] is not None, context


# -- the demo school's ids -----------------------------------------------------------------


class School:
    def __init__(self, items: list[Item]) -> None:
        self.ids: dict[str, list[str]] = {}
        for item in items:
            if item.get("type") in ("student", "teacher", "class", "sport") and "id" in item:
                self.ids.setdefault(item["type"], []).append(item["id"])
        for ids in self.ids.values():
            ids.sort()
        self.homes = [i["home"] for i in items if i.get("type") == "student" and i.get("home")]
        self.names = sorted(i["name"] for i in items if i.get("type") == "student" and "name" in i)
        self.subjects = sorted(i["subject"] for i in items if i.get("type") == "class")
        self.teacher_names = sorted(i["name"] for i in items if i.get("type") == "teacher")
        self.five = targets(items)


def variables_for(
    schema: GraphQLSchema, operation: OperationDefinitionNode, school: School, rng: random.Random
) -> dict[str, Any]:
    """Values for an operation's variables, by name and type, from the demo school."""
    values: dict[str, Any] = {}
    for definition in operation.variable_definitions or ():
        name = definition.variable.name.value
        type_text = print_ast(definition.type)
        lowered = name.lower()
        kind = next((k for k in ("class", "teacher", "sport") if k in lowered), "student")
        if type_text.startswith("["):
            values[name] = school.five["students"][: rng.randint(1, 8)]
        elif "ID" in type_text:
            values[name] = school.five[kind] if kind != "student" else school.five["students"][0]
        elif lowered in ("after", "before"):
            continue
        elif "Int" in type_text:
            values[name] = rng.randint(1, 6)
        elif "Boolean" in type_text:
            values[name] = rng.random() < 0.5
        elif lowered == "country":
            values[name] = school.five["country"]
        elif lowered == "state":
            values[name] = school.five["state"]
        elif lowered == "prefix":
            values[name] = school.names[0][:2]
        elif definition.default_value is None and type_text.endswith("!"):
            values[name] = "x"
    return values


def _spreads(node: Any) -> set[str]:
    found: set[str] = set()

    class Spreads(Visitor):
        def enter_fragment_spread(self, spread: FragmentSpreadNode, *_: Any) -> None:
            found.add(spread.name.value)

    visit(node, Spreads())
    return found


def with_fragments(
    operation: OperationDefinitionNode, fragments: dict[str, FragmentDefinitionNode]
) -> DocumentNode:
    """The operation and the fragments it reaches (another file's too)."""
    needed: dict[str, FragmentDefinitionNode] = {}
    pending = list(_spreads(operation))
    while pending:
        name = pending.pop()
        if name in needed or name not in fragments:
            continue
        needed[name] = fragments[name]
        pending.extend(_spreads(fragments[name]))
    return DocumentNode(definitions=(operation, *needed.values()))


def written_documents(schema: GraphQLSchema, school: School) -> list[Document]:
    """Every query the tests' operations, the bench and the README write (mutations and
    subscriptions write or wait: left out)."""
    rng = random.Random(SEED)
    texts = [p.read_text(encoding="utf-8") for p in sorted(OPERATIONS.rglob("*.graphql"))]
    bench = [getattr(bench_queries, f"Q{n}") for n in range(1, 7)]
    readme = re.findall(r"```graphql\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    fragments: dict[str, FragmentDefinitionNode] = {}
    operations: list[tuple[str, OperationDefinitionNode]] = []
    for source, group in (("operations", texts), ("bench", bench), ("README", readme)):
        for text in group:
            for definition in parse(text).definitions:
                if isinstance(definition, FragmentDefinitionNode):
                    fragments[definition.name.value] = definition
                elif isinstance(definition, OperationDefinitionNode):
                    operations.append((source, definition))
    documents = []
    for source, operation in operations:
        if operation.operation != OperationType.QUERY:
            continue
        name = f"{source}: {operation.name.value if operation.name else '(anonymous)'}"
        text = print_ast(with_fragments(operation, fragments))
        documents.append((name, text, variables_for(schema, operation, school, rng)))
    return documents


# -- random shapes -------------------------------------------------------------------------


class Shapes:
    """Random query documents over the schema, within its limits (depth 10, 30 aliases,
    cost 50,000): at most two relations below a root node, small pages."""

    def __init__(self, schema: GraphQLSchema, school: School, rng: random.Random) -> None:
        self.schema = schema
        self.school = school
        self.rng = rng

    def document(self, n: int) -> Document:
        self.variables: dict[str, tuple[str, Any]] = {}
        self.fragments: list[str] = []
        self.aliases = 0
        query = self.schema.query_type
        assert query is not None
        roots = [self.root(query) for _ in range(self.rng.randint(1, 2))]
        if len(roots) == 2 and roots[0].split("(")[0] == roots[1].split("(")[0]:
            roots[1] = f"again: {roots[1]}"  # the same key twice: arguments that conflict
        declared = ", ".join(f"${name}: {type_}" for name, (type_, _) in self.variables.items())
        header = f"query Shape{n}({declared})" if declared else f"query Shape{n}"
        text = "\n".join([f"{header} {{ {' '.join(roots)} }}", *self.fragments])
        values = {name: value for name, (_, value) in self.variables.items()}
        return f"random #{n}", text, values

    def variable(self, prefix: str, type_: str, value: Any) -> str:
        name = f"{prefix}{len(self.variables)}"
        self.variables[name] = (type_, value)
        return f"${name}"

    def key(self, name: str) -> str:
        """The field's response key: now and then an alias."""
        if self.aliases < 20 and self.rng.random() < 0.15:
            self.aliases += 1
            return f"a{self.aliases}: {name}"
        return name

    def directive(self) -> str:
        rng = self.rng
        if rng.random() > 0.15:
            return ""
        which = rng.choice(["include", "skip"])
        condition = (
            self.variable("b", "Boolean!", rng.random() < 0.5)
            if rng.random() < 0.7
            else rng.choice(["true", "false"])
        )
        return f" @{which}(if: {condition})"

    def root(self, query: GraphQLObjectType) -> str:
        rng, school = self.rng, self.school
        name = rng.choice(sorted(query.fields))
        target = get_named_type(query.fields[name].type)
        ids = school.ids
        if name in ("student", "teacher", "class", "sport"):
            id_ = rng.choice(ids[name]) if rng.random() < 0.9 else "nobody"
            argument = self.variable("id", "ID!", id_) if rng.random() < 0.5 else f'"{id_}"'
            return self.key(name) + f"(id: {argument})" + self.object_selection(target, 2)
        if name in ("students", "nodes"):
            kinds = ["student"] if name == "students" else sorted(ids)
            chosen = []
            for _ in range(rng.randint(1, 4)):
                kind = rng.choice(kinds)
                id_ = rng.choice(ids[kind]) if rng.random() < 0.9 else "nobody"
                chosen.append(id_ if name == "students" else f"{kind.capitalize()}:{id_}")
            listed = self.variable("ids", "[ID!]!", chosen)
            return self.key(name) + f"(ids: {listed})" + self.object_selection(target, 2)
        if name == "node":
            kind = rng.choice(sorted(ids))
            id_ = f"{kind.capitalize()}:{rng.choice(ids[kind])}"
            return self.key(name) + f'(id: "{id_}")' + self.object_selection(target, 2)
        arguments = self.page_arguments(low=1, high=5)
        if name == "studentsByLocation":
            home = rng.choice(school.homes)
            arguments.append(f'country: "{home["country"]}"')
            if rng.random() < 0.7:
                arguments.append(f'state: "{home["state"]}"')
        elif name in ("studentsByName", "teachersByName", "classesBySubject"):
            words = {
                "studentsByName": school.names,
                "teachersByName": school.teacher_names,
                "classesBySubject": school.subjects,
            }[name]
            arguments.append(f'prefix: "{rng.choice(words)[: rng.randint(1, 3)].lower()}"')
        written = f"({', '.join(arguments)})" if arguments else ""
        return self.key(name) + written + self.connection_selection(target, 1)

    def page_arguments(self, low: int, high: int) -> list[str]:
        rng = self.rng
        choice = rng.random()
        if choice < 0.04:
            return []  # the default page, 20
        which = "last" if choice > 0.85 else "first"
        n = rng.randint(low, high)
        value = self.variable("n", "Int", n) if rng.random() < 0.4 else str(n)
        return [f"{which}: {value}"]

    def object_selection(self, type_: GraphQLNamedType, depth: int) -> str:
        """A selection on an object or interface type: scalars, relations while `depth`
        lasts, some of it in fragments."""
        rng = self.rng
        if isinstance(type_, GraphQLInterfaceType):
            parts = [self.key(rng.choice(["id", "nodeId"])), "__typename"]
            for possible in self.schema.get_possible_types(type_):
                if rng.random() < 0.6:
                    parts.append(f"... on {possible.name}{self.object_selection(possible, depth)}")
            return " { " + " ".join(parts) + " }"
        assert isinstance(type_, GraphQLObjectType)
        fields = type_.fields
        scalars = sorted(n for n, f in fields.items() if is_leaf_type(get_named_type(f.type)))
        relations = sorted(n for n in fields if n not in scalars)
        chosen = [n for n in scalars if rng.random() < 0.4] or [scalars[0]]
        parts = [self.key(n) + self.directive() for n in chosen]
        if rng.random() < 0.15:
            parts.append("__typename")
        if depth > 0:
            for name in rng.sample(relations, rng.randint(0, min(2, len(relations)))):
                parts.append(self.relation(type_, name, depth - 1))
        return " { " + " ".join(self.grouped(type_, parts)) + " }"

    def relation(self, parent: GraphQLObjectType, name: str, depth: int) -> str:
        field = parent.fields[name]
        target = get_named_type(field.type)
        head = self.key(name)
        if "first" in field.args:
            arguments = self.page_arguments(low=1, high=3)
            if arguments:
                head += f"({', '.join(arguments)})"
            return head + self.directive() + self.connection_selection(target, depth)
        return head + self.directive() + self.object_selection(target, depth)

    def connection_selection(self, connection: GraphQLNamedType, depth: int) -> str:
        rng = self.rng
        assert isinstance(connection, GraphQLObjectType)
        fields = connection.fields
        edge = get_named_type(fields["edges"].type)
        assert isinstance(edge, GraphQLObjectType)
        node = get_named_type(edge.fields["node"].type)
        edge_parts = [f"node{self.object_selection(node, depth)}"]
        if rng.random() < 0.3:
            edge_parts.insert(0, "cursor")
        parts = [f"edges {{ {' '.join(edge_parts)} }}"]
        if rng.random() < 0.3:
            parts.append("pageInfo { hasNextPage hasPreviousPage }")
        if "totalCount" in fields and rng.random() < 0.3:
            parts.append("totalCount")
        return " { " + " ".join(self.grouped(connection, parts)) + " }"

    def grouped(self, type_: GraphQLObjectType, parts: list[str]) -> list[str]:
        """Some of a selection's parts moved into a named fragment, an inline fragment on the
        type, or one with no type condition (maybe under a directive)."""
        rng = self.rng
        if len(parts) < 2 or rng.random() > 0.35:
            return parts
        cut = rng.randint(1, len(parts) - 1)
        inner, rest = parts[:cut], parts[cut:]
        how = rng.random()
        if how < 0.5:
            name = f"F{len(self.fragments)}"
            self.fragments.append(f"fragment {name} on {type_.name} {{ {' '.join(inner)} }}")
            return [f"...{name}{self.directive()}", *rest]
        condition = f" on {type_.name}" if how < 0.8 else ""
        return [f"...{condition}{self.directive()} {{ {' '.join(inner)} }}", *rest]


def random_documents(schema: GraphQLSchema, school: School) -> Iterator[Document]:
    shapes = Shapes(schema, school, random.Random(SEED))
    for n in range(RANDOM_SHAPES):
        yield shapes.document(n)


def variable_sets(document: Document, rng: random.Random) -> list[Document]:
    """The document with its variables, and with one or two other sets of them: each
    `@include`/`@skip` condition flipped or kept, another `first`/`last`, another number of
    ids (the same ids, repeated or cut: repeats are allowed)."""
    name, text, variables = document
    found = [document]
    for one in range(rng.randint(1, 2) if variables else 0):
        other = dict(variables)
        for key, value in variables.items():
            if key.startswith("b"):
                other[key] = not value if rng.random() < 0.7 else value
            elif key.startswith("n"):
                other[key] = rng.randint(1, 3)
            elif key.startswith("ids"):
                count = rng.randint(1, 5)
                other[key] = [value[i % len(value)] for i in range(count)]
        if other != variables:
            found.append((f"{name} (variables {one + 2})", text, other))
    return found


# -- the tests ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def school(demo_items: list[Item]) -> School:
    return School(demo_items)


def test_every_written_query_answers_alike(services: Services, school: School) -> None:
    documents = written_documents(graphql_schema(build_schema(services.settings)), school)
    names = [name for name, _, _ in documents]
    assert any(n.startswith("operations") for n in names), names
    assert any(n.startswith("README") for n in names), names
    assert sum(n.startswith("bench") for n in names) == 6, names
    assert_alike(run_all(services, documents))


def test_random_shapes_answer_alike(services: Services, school: School) -> None:
    documents = list(random_documents(graphql_schema(build_schema(services.settings)), school))
    rng = random.Random(SEED)
    runs = [run for document in documents for run in variable_sets(document, rng)]
    rng.shuffle(runs)
    results = run_all(services, runs)
    assert_alike(results)
    assert len(runs) > 1.8 * len(documents)  # most documents ran with more than one set
    # What the shapes exercised, so that a generator gone dull fails here.
    texts = [text for _, text, _ in documents]
    assert sum("fragment F" in t for t in texts) > 50
    assert sum("@include" in t or "@skip" in t for t in texts) > 50
    assert sum(re.search(r"\ba\d+: ", t) is not None for t in texts) > 50
    assert sum("... on" in t for t in texts) > 50
    answered = [mine for _, mine, _ in results if not mine[1]]
    assert len(answered) > RANDOM_SHAPES // 2  # most answer without any error
