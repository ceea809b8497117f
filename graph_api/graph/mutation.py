"""The root Mutation: validate, write in one transaction, answer from a consistent read.

Each mutation answers a payload (`graph/payloads.py`): the node written, or user errors.
"""

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
from graph_api.graph.payloads import (
    CreateClassPayload,
    CreateSportPayload,
    CreateStudentPayload,
    CreateTeacherPayload,
    DeleteClassPayload,
    DeleteSportPayload,
    DeleteStudentPayload,
    DeleteTeacherPayload,
    EnrollStudentPayload,
    JoinSportPayload,
    LeaveSportPayload,
    SetHomePayload,
    UnenrollStudentPayload,
    UpdateClassPayload,
    UpdateSportPayload,
    UpdateStudentPayload,
    UpdateTeacherPayload,
    payload_mutation,
)
from graph_api.graph.school_class import Class
from graph_api.graph.sport import Sport
from graph_api.graph.student import Student
from graph_api.graph.teacher import Teacher
from graph_api.items import ENROLMENT, MEMBERSHIP
from graph_api.writes import classes, edges, sports, students, teachers

N = TypeVar("N", bound=NodeBase)


def written(info: Info, node_type: type[N], id_: str) -> N:
    """The node just written, read back strongly consistent (never from GSI1)."""
    loaders = info.context.loaders
    loaders.after_write()
    return node_type.of(id_, {}, loaders)


@strawberry.type
class Mutation:
    # -- students ------------------------------------------------------------------------
    @payload_mutation(CreateStudentPayload)
    async def create_student(self, info: Info, input: CreateStudentInput) -> CreateStudentPayload:
        id_ = await students.create(
            info.context.table,
            input.id,
            validation.name(input.name),
            validation.email(input.email),
            input.home.place() if input.home else None,
        )
        return CreateStudentPayload(student=written(info, Student, id_))

    @payload_mutation(UpdateStudentPayload)
    async def update_student(
        self,
        info: Info,
        id: strawberry.ID,
        input: UpdateStudentInput,
        expected_version: int | None = None,
    ) -> UpdateStudentPayload:
        email = None if input.email is None else validation.email(input.email)
        await students.update_student(
            info.context.table, id, optional_name(input.name), email, expected_version
        )
        return UpdateStudentPayload(student=written(info, Student, id))

    @payload_mutation(DeleteStudentPayload)
    async def delete_student(self, info: Info, id: strawberry.ID) -> DeleteStudentPayload:
        await students.delete_student(info.context.table, id)
        return DeleteStudentPayload(deleted_id=id)

    @payload_mutation(SetHomePayload, description="Set the student's home; null clears it.")
    async def set_home(
        self, info: Info, student_id: strawberry.ID, home: HomeInput | None
    ) -> SetHomePayload:
        await students.set_home(info.context.table, student_id, home.place() if home else None)
        return SetHomePayload(student=written(info, Student, student_id))

    # -- teachers ------------------------------------------------------------------------
    @payload_mutation(CreateTeacherPayload)
    async def create_teacher(self, info: Info, input: CreateTeacherInput) -> CreateTeacherPayload:
        id_ = await teachers.create(info.context.table, input.id, validation.name(input.name))
        return CreateTeacherPayload(teacher=written(info, Teacher, id_))

    @payload_mutation(UpdateTeacherPayload)
    async def update_teacher(
        self,
        info: Info,
        id: strawberry.ID,
        input: UpdateTeacherInput,
        expected_version: int | None = None,
    ) -> UpdateTeacherPayload:
        await teachers.update_teacher(
            info.context.table, id, optional_name(input.name), expected_version
        )
        return UpdateTeacherPayload(teacher=written(info, Teacher, id))

    @payload_mutation(DeleteTeacherPayload)
    async def delete_teacher(self, info: Info, id: strawberry.ID) -> DeleteTeacherPayload:
        await teachers.delete_teacher(info.context.table, id)
        return DeleteTeacherPayload(deleted_id=id)

    # -- classes -------------------------------------------------------------------------
    @payload_mutation(CreateClassPayload)
    async def create_class(self, info: Info, input: CreateClassInput) -> CreateClassPayload:
        id_ = await classes.create(
            info.context.table,
            input.id,
            validation.name(input.subject, "subject"),
            input.teacher_id,
        )
        return CreateClassPayload(class_=written(info, Class, id_))

    @payload_mutation(UpdateClassPayload)
    async def update_class(
        self,
        info: Info,
        id: strawberry.ID,
        input: UpdateClassInput,
        expected_version: int | None = None,
    ) -> UpdateClassPayload:
        await classes.update_class(
            info.context.table,
            id,
            optional_name(input.subject, "subject"),
            input.teacher_id,
            expected_version,
        )
        return UpdateClassPayload(class_=written(info, Class, id))

    @payload_mutation(DeleteClassPayload)
    async def delete_class(self, info: Info, id: strawberry.ID) -> DeleteClassPayload:
        await classes.delete_class(info.context.table, id)
        return DeleteClassPayload(deleted_id=id)

    # -- sports --------------------------------------------------------------------------
    @payload_mutation(CreateSportPayload)
    async def create_sport(self, info: Info, input: CreateSportInput) -> CreateSportPayload:
        id_ = await sports.create(
            info.context.table,
            input.id,
            validation.name(input.name),
            optional_name(input.coach, "coach"),
        )
        return CreateSportPayload(sport=written(info, Sport, id_))

    @payload_mutation(UpdateSportPayload)
    async def update_sport(
        self,
        info: Info,
        id: strawberry.ID,
        input: UpdateSportInput,
        expected_version: int | None = None,
    ) -> UpdateSportPayload:
        coach = (
            sports.UNSET if input.coach is strawberry.UNSET else optional_name(input.coach, "coach")
        )
        await sports.update_sport(
            info.context.table, id, optional_name(input.name), coach, expected_version
        )
        return UpdateSportPayload(sport=written(info, Sport, id))

    @payload_mutation(DeleteSportPayload)
    async def delete_sport(self, info: Info, id: strawberry.ID) -> DeleteSportPayload:
        await sports.delete_sport(info.context.table, id)
        return DeleteSportPayload(deleted_id=id)

    # -- edges ---------------------------------------------------------------------------
    @payload_mutation(EnrollStudentPayload)
    async def enroll_student(
        self, info: Info, student_id: strawberry.ID, class_id: strawberry.ID
    ) -> EnrollStudentPayload:
        await edges.link(info.context.table, ENROLMENT, student_id, class_id)
        klass, student = written(info, Class, class_id), written(info, Student, student_id)
        return EnrollStudentPayload(class_=klass, student=student)

    @payload_mutation(UnenrollStudentPayload)
    async def unenroll_student(
        self, info: Info, student_id: strawberry.ID, class_id: strawberry.ID
    ) -> UnenrollStudentPayload:
        await edges.unlink(info.context.table, ENROLMENT, student_id, class_id)
        klass, student = written(info, Class, class_id), written(info, Student, student_id)
        return UnenrollStudentPayload(class_=klass, student=student)

    @payload_mutation(JoinSportPayload)
    async def join_sport(
        self, info: Info, student_id: strawberry.ID, sport_id: strawberry.ID
    ) -> JoinSportPayload:
        await edges.link(info.context.table, MEMBERSHIP, student_id, sport_id)
        sport, student = written(info, Sport, sport_id), written(info, Student, student_id)
        return JoinSportPayload(sport=sport, student=student)

    @payload_mutation(LeaveSportPayload)
    async def leave_sport(
        self, info: Info, student_id: strawberry.ID, sport_id: strawberry.ID
    ) -> LeaveSportPayload:
        await edges.unlink(info.context.table, MEMBERSHIP, student_id, sport_id)
        sport, student = written(info, Sport, sport_id), written(info, Student, student_id)
        return LeaveSportPayload(sport=sport, student=student)
