"""Node types by kind (`NodeBase.by_kind`): a student's classes and sports are built as the
kind's node type, so a second type declaring the same kind is refused where it is defined."""

from __future__ import annotations

import pytest

from graph_api.graph.types.nodes import NodeBase
from graph_api.graph.types.school_class import Class
from graph_api.graph.types.sport import Sport
from graph_api.graph.types.student import Student
from graph_api.graph.types.teacher import Teacher
from graph_api.model.keys import Kind


def test_each_kind_has_its_node_type() -> None:
    assert NodeBase.by_kind == {
        Kind.STUDENT: Student,
        Kind.TEACHER: Teacher,
        Kind.CLASS: Class,
        Kind.SPORT: Sport,
    }


def test_a_second_node_type_for_a_kind_is_refused() -> None:
    with pytest.raises(TypeError, match="CLASS has two node types: Class, Other"):
        type("Other", (NodeBase,), {"kind": Kind.CLASS})
    assert NodeBase.by_kind[Kind.CLASS] is Class


def test_a_subclass_without_a_kind_of_its_own_is_not_registered() -> None:
    type("Special", (Class,), {})
    assert NodeBase.by_kind[Kind.CLASS] is Class
