"""The root Mutation: authorize, validate, write in one transaction, answer from a
consistent read.

Each mutation first asks the policy (`graph/auth/authorize.py`) on the token and its arguments,
before any read: FORBIDDEN is a `userErrors` entry, and nothing is written.

Each mutation answers a payload (`graph/types/payloads.py`): the node written, or user errors.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

import strawberry

from graph_api.graph.auth.authorize import authorize, authorize_guarded, class_teacher
from graph_api.graph.engine.context import Info
from graph_api.graph.types.inputs import (
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
from graph_api.graph.types.nodes import NodeBase
from graph_api.graph.types.payloads import (
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
from graph_api.graph.types.school_class import Class
from graph_api.graph.types.sport import Sport
from graph_api.graph.types.student import Student
from graph_api.graph.types.teacher import Teacher
from graph_api.model import validation
from graph_api.model.items import ENROLMENT, MEMBERSHIP
from graph_api.writes import classes, memberships, sports, students, teachers

N = TypeVar("N", bound=NodeBase)

# The arguments mutations share (their descriptions are GraphiQL's docs).
StudentId = Annotated[strawberry.ID, strawberry.argument(description="The student's id.")]
TeacherId = Annotated[strawberry.ID, strawberry.argument(description="The teacher's id.")]
ClassId = Annotated[strawberry.ID, strawberry.argument(description="The class's id.")]
SportId = Annotated[strawberry.ID, strawberry.argument(description="The sport's id.")]
ExpectedVersion = Annotated[
    int | None,
    strawberry.argument(
        description="The `version` you read: if the node has another now, nothing is written"
        " (CONFLICT, with `currentVersion`). Leave out to write over any version."
    ),
]
Fields = strawberry.argument(description="The fields to change; those left out keep their value.")


def written(info: Info, node_type: type[N], id_: str) -> N:
    """The node just written, read back strongly consistent (never from GSI1)."""
    loaders = info.context.loaders
    loaders.after_write()
    return node_type.of(id_, {}, loaders)


@strawberry.type(
    description="What the API writes. Each mutation validates its input, reads what it must"
    " check, writes in one DynamoDB transaction (a rename also rewrites the name's copies, in"
    " further transactions when they do not fit in one) and answers the nodes written, read"
    " back strongly consistent. A client error is a `userErrors` entry, not a GraphQL error."
)
class Mutation:
    # -- students ------------------------------------------------------------------------
    @payload_mutation(
        CreateStudentPayload,
        description="Create a student, with its home if given. ALREADY_EXISTS when the id or the"
        " email (compared trimmed and case-folded) is taken.",
    )
    async def create_student(
        self,
        info: Info,
        input: Annotated[CreateStudentInput, strawberry.argument(description="The new student.")],
    ) -> CreateStudentPayload:
        authorize(info, "createStudent")
        id_ = await students.create(
            info.context.table,
            input.id,
            validation.name(input.name),
            validation.email(input.email),
            input.home.place() if input.home else None,
        )
        return CreateStudentPayload(student=written(info, Student, id_))

    @payload_mutation(
        UpdateStudentPayload,
        description="Change a student's name or email (the email is staff's to change). A new"
        " name reaches every roster entry that copies it.",
    )
    async def update_student(
        self,
        info: Info,
        id: StudentId,
        input: Annotated[UpdateStudentInput, Fields],
        expected_version: ExpectedVersion = None,
    ) -> UpdateStudentPayload:
        authorize(info, "updateStudent", student=id)
        if input.email is not None:  # the address is staff's to change: no "taken" oracle
            authorize(info, "updateStudent.email", student=id)
        email = None if input.email is None else validation.email(input.email)
        await students.update(
            info.context.table, id, optional_name(input.name), email, expected_version
        )
        return UpdateStudentPayload(student=written(info, Student, id))

    @payload_mutation(
        DeleteStudentPayload,
        description="Delete a student with its email and its enrolments and memberships.",
    )
    async def delete_student(self, info: Info, id: StudentId) -> DeleteStudentPayload:
        authorize(info, "deleteStudent")
        await students.delete(info.context.table, id)
        return DeleteStudentPayload(deleted_id=id)

    @payload_mutation(SetHomePayload, description="Set the student's home; null clears it.")
    async def set_home(
        self,
        info: Info,
        student_id: StudentId,
        home: Annotated[
            HomeInput | None, strawberry.argument(description="The new home; null clears it.")
        ],
    ) -> SetHomePayload:
        authorize(info, "setHome", student=student_id)
        await students.set_home(info.context.table, student_id, home.place() if home else None)
        return SetHomePayload(student=written(info, Student, student_id))

    # -- teachers ------------------------------------------------------------------------
    @payload_mutation(
        CreateTeacherPayload,
        description="Create a teacher. ALREADY_EXISTS when the id is taken.",
    )
    async def create_teacher(
        self,
        info: Info,
        input: Annotated[CreateTeacherInput, strawberry.argument(description="The new teacher.")],
    ) -> CreateTeacherPayload:
        authorize(info, "createTeacher")
        id_ = await teachers.create(info.context.table, input.id, validation.name(input.name))
        return CreateTeacherPayload(teacher=written(info, Teacher, id_))

    @payload_mutation(
        UpdateTeacherPayload,
        description="Rename a teacher; the name reaches every class (and class entry) that copies"
        " it.",
    )
    async def update_teacher(
        self,
        info: Info,
        id: TeacherId,
        input: Annotated[UpdateTeacherInput, Fields],
        expected_version: ExpectedVersion = None,
    ) -> UpdateTeacherPayload:
        authorize(info, "updateTeacher", teacher=id)
        await teachers.update(info.context.table, id, optional_name(input.name), expected_version)
        return UpdateTeacherPayload(teacher=written(info, Teacher, id))

    @payload_mutation(
        DeleteTeacherPayload,
        description="Delete a teacher; CONFLICT while it still teaches a class.",
    )
    async def delete_teacher(self, info: Info, id: TeacherId) -> DeleteTeacherPayload:
        authorize(info, "deleteTeacher")
        await teachers.delete(info.context.table, id)
        return DeleteTeacherPayload(deleted_id=id)

    # -- classes -------------------------------------------------------------------------
    @payload_mutation(
        CreateClassPayload,
        description="Create a class taught by an existing teacher. ALREADY_EXISTS when the id is"
        " taken; a teacher teaches at most 200 classes.",
    )
    async def create_class(
        self,
        info: Info,
        input: Annotated[CreateClassInput, strawberry.argument(description="The new class.")],
    ) -> CreateClassPayload:
        authorize(info, "createClass", teacher=input.teacher_id)  # created for oneself
        id_ = await classes.create(
            info.context.table,
            input.id,
            validation.name(input.subject, "subject"),
            input.teacher_id,
        )
        return CreateClassPayload(class_=written(info, Class, id_))

    @payload_mutation(
        UpdateClassPayload,
        description="Change a class's subject or teacher; the change reaches every entry that"
        " copies it.",
    )
    async def update_class(
        self,
        info: Info,
        id: ClassId,
        input: Annotated[UpdateClassInput, Fields],
        expected_version: ExpectedVersion = None,
    ) -> UpdateClassPayload:
        guard = authorize_guarded(info, "updateClass")
        class_teacher("updateClass", guard, input.teacher_id)
        await classes.update(
            info.context.table,
            id,
            optional_name(input.subject, "subject"),
            input.teacher_id,
            expected_version,
            guard,
        )
        return UpdateClassPayload(class_=written(info, Class, id))

    @payload_mutation(
        DeleteClassPayload,
        description="Delete a class; CONFLICT while students are enrolled in it.",
    )
    async def delete_class(self, info: Info, id: ClassId) -> DeleteClassPayload:
        authorize(info, "deleteClass")
        await classes.delete(info.context.table, id)
        return DeleteClassPayload(deleted_id=id)

    # -- sports --------------------------------------------------------------------------
    @payload_mutation(
        CreateSportPayload,
        description="Create a sport. ALREADY_EXISTS when the id is taken.",
    )
    async def create_sport(
        self,
        info: Info,
        input: Annotated[CreateSportInput, strawberry.argument(description="The new sport.")],
    ) -> CreateSportPayload:
        authorize(info, "createSport")
        id_ = await sports.create(
            info.context.table,
            input.id,
            validation.name(input.name),
            optional_name(input.coach, "coach"),
        )
        return CreateSportPayload(sport=written(info, Sport, id_))

    @payload_mutation(
        UpdateSportPayload,
        description="Change a sport's name or coach; a new name reaches every member's entry.",
    )
    async def update_sport(
        self,
        info: Info,
        id: SportId,
        input: Annotated[UpdateSportInput, Fields],
        expected_version: ExpectedVersion = None,
    ) -> UpdateSportPayload:
        authorize(info, "updateSport")
        coach = (
            sports.UNSET if input.coach is strawberry.UNSET else optional_name(input.coach, "coach")
        )
        await sports.update(
            info.context.table, id, optional_name(input.name), coach, expected_version
        )
        return UpdateSportPayload(sport=written(info, Sport, id))

    @payload_mutation(
        DeleteSportPayload,
        description="Delete a sport; CONFLICT while students play it.",
    )
    async def delete_sport(self, info: Info, id: SportId) -> DeleteSportPayload:
        authorize(info, "deleteSport")
        await sports.delete(info.context.table, id)
        return DeleteSportPayload(deleted_id=id)

    # -- edges ---------------------------------------------------------------------------
    @payload_mutation(
        EnrollStudentPayload,
        description="Enroll a student in a class (at most 100 classes a student); ALREADY_EXISTS"
        " if enrolled. Answers both.",
    )
    async def enroll_student(
        self, info: Info, student_id: StudentId, class_id: ClassId
    ) -> EnrollStudentPayload:
        guard = authorize_guarded(info, "enrollStudent", student=student_id)
        await memberships.link(info.context.table, ENROLMENT, student_id, class_id, guard)
        klass, student = written(info, Class, class_id), written(info, Student, student_id)
        return EnrollStudentPayload(class_=klass, student=student)

    @payload_mutation(
        UnenrollStudentPayload,
        description="Take a student out of a class; NOT_FOUND if not enrolled. Answers both.",
    )
    async def unenroll_student(
        self, info: Info, student_id: StudentId, class_id: ClassId
    ) -> UnenrollStudentPayload:
        guard = authorize_guarded(info, "unenrollStudent", student=student_id)
        await memberships.unlink(info.context.table, ENROLMENT, student_id, class_id, guard)
        klass, student = written(info, Class, class_id), written(info, Student, student_id)
        return UnenrollStudentPayload(class_=klass, student=student)

    @payload_mutation(
        JoinSportPayload,
        description="Make a student a member of a sport (at most 50 sports a student);"
        " ALREADY_EXISTS if a member. Answers both.",
    )
    async def join_sport(
        self, info: Info, student_id: StudentId, sport_id: SportId
    ) -> JoinSportPayload:
        authorize(info, "joinSport", student=student_id)
        await memberships.link(info.context.table, MEMBERSHIP, student_id, sport_id)
        sport, student = written(info, Sport, sport_id), written(info, Student, student_id)
        return JoinSportPayload(sport=sport, student=student)

    @payload_mutation(
        LeaveSportPayload,
        description="Take a student out of a sport; NOT_FOUND if not a member. Answers both.",
    )
    async def leave_sport(
        self, info: Info, student_id: StudentId, sport_id: SportId
    ) -> LeaveSportPayload:
        authorize(info, "leaveSport", student=student_id)
        await memberships.unlink(info.context.table, MEMBERSHIP, student_id, sport_id)
        sport, student = written(info, Sport, sport_id), written(info, Student, student_id)
        return LeaveSportPayload(sport=sport, student=student)
