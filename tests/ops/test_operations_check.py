"""`graph-api schema-check --operations DIR`: a front end's operations against the schema.

tests/ops/operations is a sample front end's operations, Relay-style (a student page, a class
roster paged by first/after, students by location, two mutations with their userErrors;
fragments shared across files). They must validate against the code's schema, fail on a
breaking change to a field they use, pass on an additive one, and compile with Relay's own
compiler (relay-compiler, pinned in tests/project/relay).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from graphql import (
    FragmentDefinitionNode,
    GraphQLArgument,
    GraphQLField,
    GraphQLInt,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    GraphQLString,
    OperationDefinitionNode,
    build_schema,
    find_breaking_changes,
    parse,
)
from support import OPERATIONS, RELAY, ROOT, npm_package, tool

from graph_api import cli
from graph_api.graph.schema import schema
from graph_api.ops import operations_check

SCHEMA_FILE = ROOT / "schema" / "schema.graphql"
CURRENT = schema.as_str()


def code_schema() -> GraphQLSchema:
    """A fresh copy of the code's schema, for a test to change (in place, by type and field
    name, so that the change survives new fields, arguments and descriptions)."""
    return build_schema(CURRENT)


def fields(changed: GraphQLSchema, type_name: str) -> dict[str, GraphQLField]:
    type_ = changed.get_type(type_name)
    assert isinstance(type_, GraphQLObjectType)
    return type_.fields


def breaking(changed: GraphQLSchema) -> list[str]:
    """What the breaking-change check (graph-api schema-check) would say of the change."""
    return [c.description for c in find_breaking_changes(code_schema(), changed)]


def check(changed: GraphQLSchema | None = None) -> operations_check.Report:
    return operations_check.check(changed or code_schema(), OPERATIONS)


def broken(report: operations_check.Report) -> set[str]:
    return {d.label for d in report.broken}


def test_the_sample_operations_validate_against_the_code_schema() -> None:
    report = check()
    assert report.passed, report.lines()
    assert (report.operations, report.fragments) == (5, 4)
    kinds = {d.label.split()[0] for d in operations_check.load(OPERATIONS)[1]}
    assert kinds == {"query", "mutation", "fragment"}


def test_the_cli_passes_with_a_one_line_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema-check", "--operations", str(OPERATIONS)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "operations check passed: 5 operation(s) and 4 fragment(s) in 7 file(s) under"
        f" {OPERATIONS} validate against the schema"
    ]


def test_a_removed_field_fails_each_operation_that_selects_it() -> None:
    without = code_schema()
    del fields(without, "Student")["classes"]
    assert breaking(without) == ["Field Student.classes was removed."]
    report = check(without)
    assert not report.passed
    # The student page (through its fragment) and the enrolment mutation select it.
    assert broken(report) == {"query StudentPageQuery", "mutation EnrollStudentMutation"}
    page = next(p for p in report.problems if p.definition.label == "query StudentPageQuery")
    assert page.message == "Cannot query field 'classes' on type 'Student'."
    assert page.where == f"{OPERATIONS / 'student' / 'StudentPage.graphql'}:18:3"
    assert str(page).startswith(f"{page.definition.path}: query StudentPageQuery: Cannot query")


def test_a_break_in_a_shared_fragment_names_every_operation_that_spreads_it() -> None:
    without = code_schema()
    del fields(without, "Class")["studentCount"]
    report = check(without)
    assert broken(report) == {
        "query StudentPageQuery",
        "query ClassRosterQuery",
        "mutation EnrollStudentMutation",
    }
    assert {p.where.rsplit(":", 2)[0] for p in report.problems if "studentCount" in p.message} >= {
        str(OPERATIONS / "class" / "ClassCard.graphql")
    }


def test_a_renamed_argument_fails() -> None:
    renamed = code_schema()
    arguments = fields(renamed, "Query")["studentsByLocation"].args
    arguments["countryCode"] = arguments.pop("country")
    report = check(renamed)
    assert broken(report) == {"query StudentsByLocationQuery"}
    messages = {p.message for p in report.problems}
    assert "Unknown argument 'country' on field 'Query.studentsByLocation'." in messages
    assert (
        "Argument 'Query.studentsByLocation(countryCode:)' of type 'String!' is required,"
        " but it was not provided." in messages
    )


def test_a_type_change_of_an_argument_fails() -> None:
    retyped = code_schema()
    fields(retyped, "Mutation")["updateStudent"].args["id"].type = GraphQLNonNull(GraphQLInt)
    report = check(retyped)
    assert broken(report) == {"mutation RenameStudentMutation"}


def test_additive_changes_pass() -> None:
    added = code_schema()
    student = fields(added, "Student")
    student["nickname"] = GraphQLField(GraphQLString)  # a new optional field
    student["classes"].args["subject"] = GraphQLArgument(GraphQLString)  # a new optional arg
    fields(added, "PageInfo")["pageCount"] = GraphQLField(GraphQLNonNull(GraphQLInt))
    assert breaking(added) == []
    assert check(added).passed


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["schema-check", "--operations", str(folder)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_cli_names_each_broken_operation_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "a/Page.graphql", 'query PageQuery { student(id: "s") { nme } }\n')
    write(tmp_path, "b/Card.graphql", "fragment Card_class on Class { subjet }\n")
    write(
        tmp_path,
        "b/List.graphql",
        "query ListQuery { classes { edges { node { ...Card_class } } } }",
    )
    code, out, _ = run_cli(tmp_path, capsys)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == (
        f"{tmp_path / 'a/Page.graphql'}: query PageQuery: Cannot query field 'nme' on type"
        f" 'Student'. Did you mean 'name' or 'home'? ({tmp_path / 'a/Page.graphql'}:1:38)"
    )
    assert lines[1].startswith(f"{tmp_path / 'b/List.graphql'}: query ListQuery: Cannot query")
    assert lines[1].endswith(f"({tmp_path / 'b/Card.graphql'}:1:32)")
    assert lines[2] == (
        "operations check failed: 2 break against the schema, of 2 operation(s) and"
        f" 1 fragment(s) in 3 file(s) under {tmp_path}"
    )


def test_unused_fragments_are_checked_and_names_must_be_unique(tmp_path: Path) -> None:
    write(tmp_path, "Lonely.graphql", "fragment Lonely_student on Student { nickname }\n")
    write(tmp_path, "One.graphql", "query Same { sports { edges { cursor } } }\n")
    write(tmp_path, "Two.graphql", "query Same { teachers { edges { cursor } } }\n")
    report = operations_check.check(code_schema(), tmp_path)
    messages = [str(p) for p in report.problems]
    assert len(messages) == 2, messages
    assert "fragment Lonely_student: Cannot query field 'nickname'" in messages[0]
    assert "There can be only one operation named 'Same'" in messages[1]
    assert f"(also {tmp_path / 'One.graphql'}:1:1)" in messages[1]


@pytest.mark.parametrize(
    ("files", "says"),
    [
        (None, "is not a directory of .graphql operations"),
        ({}, "holds no .graphql file"),
        ({"Bad.graphql": "query BadQuery { student(id: 1) {"}, "Bad.graphql:1:34: does not parse"),
        ({"Types.graphql": "type Foo { id: ID }"}, "Types.graphql:1:1: does not parse as an op"),
    ],
)
def test_what_stops_the_check_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str] | None, says: str
) -> None:
    folder = tmp_path / "ops"
    if files is not None:
        folder.mkdir()
        for name, text in files.items():
            write(folder, name, text)
    code, out, err = run_cli(folder, capsys)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith("graph-api: ") and says in err, err


def relay_sources(src: Path) -> list[str]:
    """tests/ops/operations as a Relay project keeps them: one JavaScript module per file, named
    as the file, with a graphql tag per definition. The definitions' names."""
    names = []
    for path in sorted(OPERATIONS.rglob("*.graphql")):
        text = path.read_text(encoding="utf-8")
        tags = []
        for node in parse(text).definitions:
            assert isinstance(node, OperationDefinitionNode | FragmentDefinitionNode)
            assert node.loc is not None and node.name is not None
            names.append(node.name.value)
            tags.append(f"graphql`\n{text[node.loc.start : node.loc.end]}\n`;\n")
        module = src / path.relative_to(OPERATIONS).with_suffix(".js")
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text("import {graphql} from 'react-relay';\n\n" + "\n".join(tags))
    return names


def test_relay_compiler_accepts_the_sample_operations(tmp_path: Path) -> None:
    node = tool("node", "apt-get install nodejs npm")
    npm_package(RELAY)
    src, artifacts = tmp_path / "src", tmp_path / "__generated__"
    artifacts.mkdir()
    names = relay_sources(src)
    config = tmp_path / "relay.config.json"
    config.write_text(
        json.dumps(
            {
                "src": str(src),
                "schema": str(SCHEMA_FILE),
                "language": "javascript",
                "artifactDirectory": str(artifacts),
                # Relay's naming rule (`<Module>Query`, `<Module>_<prop>`), which Meta's
                # own (Haste) projects always follow: on, so that the samples follow it.
                "featureFlags": {"enforce_module_name_prefix_for_non_haste": True},
            }
        )
    )
    compiler = RELAY / "node_modules" / "relay-compiler" / "cli.js"
    result = subprocess.run(
        [node, str(compiler), str(config)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    written = {p.name.removesuffix(".graphql.js") for p in artifacts.glob("*.graphql.js")}
    assert written == set(names), result.stdout + result.stderr
