"""The root Mutation: validate, write in one transaction, answer from a consistent read."""

from __future__ import annotations

from typing import TypeVar

import strawberry

from graph_api import validation
from graph_api.graph.context import Info
from graph_api.graph.inputs import (
    CreateClassInput,
    CreateSportInput,
    CreateStudentInput,
    CreateTeacherInput,
    HomeInput,
    UpdateClassInput,
    UpdateSportInput,
    UpdateStudentInput,
    UpdateTeacherInput,
    optional_name,
)
from graph_api.graph.nodes import NodeBase
from graph_api.graph.school_class import Class
from graph_api.graph.sport import Sport
from graph_api.graph.student import Student
from graph_api.graph.teacher import Teacher
from graph_api.items import ENROLMENT, MEMBERSHIP
from graph_api.writes import classes, edges, sports, students, teachers

N = TypeVar("N", bound=NodeBase)


def written(info: Info, node_type: type[N], id_: str) -> N:
    """The node just written, read back strongly consistent (never from GSI1)."""
    info.context.loaders.after_write()
    return node_type(id=strawberry.ID(id_), known={})


@strawberry.type
class Mutation:
    # -- students ------------------------------------------------------------------------
    @strawberry.mutation
    async def create_student(self, info: Info, input: CreateStudentInput) -> Student:
        id_ = await students.create(
            info.context.table,
            input.id,
            validation.name(input.name),
            validation.email(input.email),
            input.home.place() if input.home else None,
        )
        return written(info, Student, id_)

    @strawberry.mutation
    async def update_student(
        self,
        info: Info,
        id: strawberry.ID,
        input: UpdateStudentInput,
        expected_version: int | None = None,
    ) -> Student:
        email = None if input.email is None else validation.email(input.email)
        await students.update_student(
            info.context.table, id, optional_name(input.name), email, expected_version
        )
        return written(info, Student, id)

    @strawberry.mutation
    async def delete_student(self, info: Info, id: strawberry.ID) -> strawberry.ID:
        await students.delete_student(info.context.table, id)
        return id

    @strawberry.mutation(description="Set the student's home; null clears it.")
    async def set_home(
        self, info: Info, student_id: strawberry.ID, home: HomeInput | None
    ) -> Student:
        await students.set_home(info.context.table, student_id, home.place() if home else None)
        return written(info, Student, student_id)

    # -- teachers ------------------------------------------------------------------------
    @strawberry.mutation
    async def create_teacher(self, info: Info, input: CreateTeacherInput) -> Teacher:
        id_ = await teachers.create(info.context.table, input.id, validation.name(input.name))
        return written(info, Teacher, id_)

    @strawberry.mutation
    async def update_teacher(
        self,
        info: Info,
        id: strawberry.ID,
        input: UpdateTeacherInput,
        expected_version: int | None = None,
    ) -> Teacher:
        await teachers.update_teacher(
            info.context.table, id, optional_name(input.name), expected_version
        )
        return written(info, Teacher, id)

    @strawberry.mutation
    async def delete_teacher(self, info: Info, id: strawberry.ID) -> strawberry.ID:
        await teachers.delete_teacher(info.context.table, id)
        return id

    # -- classes -------------------------------------------------------------------------
    @strawberry.mutation
    async def create_class(self, info: Info, input: CreateClassInput) -> Class:
        id_ = await classes.create(
            info.context.table,
            input.id,
            validation.name(input.subject, "subject"),
            input.teacher_id,
        )
        return written(info, Class, id_)

    @strawberry.mutation
    async def update_class(
        self,
        info: Info,
        id: strawberry.ID,
        input: UpdateClassInput,
        expected_version: int | None = None,
    ) -> Class:
        await classes.update_class(
            info.context.table,
            id,
            optional_name(input.subject, "subject"),
            input.teacher_id,
            expected_version,
        )
        return written(info, Class, id)

    @strawberry.mutation
    async def delete_class(self, info: Info, id: strawberry.ID) -> strawberry.ID:
        await classes.delete_class(info.context.table, id)
        return id

    # -- sports --------------------------------------------------------------------------
    @strawberry.mutation
    async def create_sport(self, info: Info, input: CreateSportInput) -> Sport:
        id_ = await sports.create(
            info.context.table,
            input.id,
            validation.name(input.name),
            optional_name(input.coach, "coach"),
        )
        return written(info, Sport, id_)

    @strawberry.mutation
    async def update_sport(
        self,
        info: Info,
        id: strawberry.ID,
        input: UpdateSportInput,
        expected_version: int | None = None,
    ) -> Sport:
        coach = (
            sports.UNSET if input.coach is strawberry.UNSET else optional_name(input.coach, "coach")
        )
        await sports.update_sport(
            info.context.table, id, optional_name(input.name), coach, expected_version
        )
        return written(info, Sport, id)

    @strawberry.mutation
    async def delete_sport(self, info: Info, id: strawberry.ID) -> strawberry.ID:
        await sports.delete_sport(info.context.table, id)
        return id

    # -- edges ---------------------------------------------------------------------------
    @strawberry.mutation
    async def enroll_student(
        self, info: Info, student_id: strawberry.ID, class_id: strawberry.ID
    ) -> Class:
        await edges.link(info.context.table, ENROLMENT, student_id, class_id)
        return written(info, Class, class_id)

    @strawberry.mutation
    async def unenroll_student(
        self, info: Info, student_id: strawberry.ID, class_id: strawberry.ID
    ) -> Class:
        await edges.unlink(info.context.table, ENROLMENT, student_id, class_id)
        return written(info, Class, class_id)

    @strawberry.mutation
    async def join_sport(
        self, info: Info, student_id: strawberry.ID, sport_id: strawberry.ID
    ) -> Sport:
        await edges.link(info.context.table, MEMBERSHIP, student_id, sport_id)
        return written(info, Sport, sport_id)

    @strawberry.mutation
    async def leave_sport(
        self, info: Info, student_id: strawberry.ID, sport_id: strawberry.ID
    ) -> Sport:
        await edges.unlink(info.context.table, MEMBERSHIP, student_id, sport_id)
        return written(info, Sport, sport_id)
