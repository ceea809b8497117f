"""Every element of the schema says what it is: GraphiQL's docs pane is the API's manual.

A type, field, argument, input field or enum value without a description fails the test,
which names each one missing.
"""

from __future__ import annotations

from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLObjectType,
    GraphQLUnionType,
)

from graph_api.graph.schema import schema


def undescribed() -> list[str]:
    """The schema's elements without a (non-blank) description, as `Type.field(arg:)`."""
    missing: list[str] = []

    def check(name: str, description: str | None) -> None:
        if not (description or "").strip():
            missing.append(name)

    for name, typ in sorted(schema._schema.type_map.items()):
        if name.startswith("__"):
            continue  # introspection's own types
        if isinstance(typ, GraphQLObjectType | GraphQLInterfaceType):
            check(name, typ.description)
            for field_name, field in typ.fields.items():
                check(f"{name}.{field_name}", field.description)
                for arg_name, arg in field.args.items():
                    check(f"{name}.{field_name}({arg_name}:)", arg.description)
        elif isinstance(typ, GraphQLInputObjectType):
            check(name, typ.description)
            for field_name, input_field in typ.fields.items():
                check(f"{name}.{field_name}", input_field.description)
        elif isinstance(typ, GraphQLEnumType):
            check(name, typ.description)
            for value_name, value in typ.values.items():
                check(f"{name}.{value_name}", value.description)
        elif isinstance(typ, GraphQLUnionType):
            check(name, typ.description)
        # Scalars: the built-in ones are the spec's; a custom one would need a branch here.
    return missing


def test_every_type_field_argument_and_value_has_a_description() -> None:
    missing = undescribed()
    assert not missing, f"{len(missing)} schema elements lack a description:\n" + "\n".join(missing)


def test_the_walk_sees_the_elements_it_checks() -> None:
    # Guards the test above against walking nothing: these elements exist and are reached.
    type_map = schema._schema.type_map
    assert {"Query", "Mutation", "Student", "Node", "PageInfo", "UserErrorCode"} <= set(type_map)
    assert "first" in type_map["Query"].fields["teachers"].args  # type: ignore[union-attr]
