"""What a mutation answers: a payload with the node it wrote, or the user errors that say
why it wrote nothing (GitHub's and Shopify's shape).

A document may hold several mutations; they run in order and each reports its own outcome.
An error the client can fix (BAD_USER_INPUT, NOT_FOUND, ALREADY_EXISTS, CONFLICT; FORBIDDEN:
the caller's token does not allow it) is a `UserError` in its mutation's payload: the other
mutations' results stay in `data`. What the
client cannot fix (UNAVAILABLE, INTERNAL_SERVER_ERROR) stays a GraphQL error with
`extensions.code`, and nulls only its own mutation's field: every mutation field is nullable.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Any, ParamSpec, TypeVar

import strawberry

from graph_api.errors import AlreadyExists, ApiError, BadUserInput, Conflict, Forbidden, NotFound
from graph_api.graph.types.school_class import Class
from graph_api.graph.types.sport import Sport
from graph_api.graph.types.student import Student
from graph_api.graph.types.teacher import Teacher

# The errors a payload reports; every other exception stays a GraphQL error.
CLIENT_ERRORS: tuple[type[ApiError], ...] = (
    BadUserInput,
    NotFound,
    AlreadyExists,
    Conflict,
    Forbidden,
)


@strawberry.enum(description="Why a mutation wrote nothing; the same codes as extensions.code.")
class UserErrorCode(Enum):
    BAD_USER_INPUT = strawberry.enum_value(
        "BAD_USER_INPUT", description="An argument is malformed or out of range."
    )
    NOT_FOUND = strawberry.enum_value(
        "NOT_FOUND", description="A node (or edge) the mutation names does not exist."
    )
    ALREADY_EXISTS = strawberry.enum_value(
        "ALREADY_EXISTS", description="The id, email or edge to create is taken."
    )
    CONFLICT = strawberry.enum_value(
        "CONFLICT",
        description="A stale expectedVersion, or a node that still has edges to delete.",
    )
    FORBIDDEN = strawberry.enum_value(
        "FORBIDDEN",
        description="The caller's token does not allow this mutation on these nodes (the"
        " policy table in the README).",
    )


@strawberry.type(
    description="A problem with one mutation's input or with the graph's state, that the"
    " client can fix: that mutation wrote nothing."
)
class UserError:
    code: UserErrorCode = strawberry.field(description="What kind of problem it is.")
    message: str = strawberry.field(description="What is wrong, for a person to read.")
    field: str | None = strawberry.field(
        default=None,
        description="The argument or input field at fault: `id`, `studentId`, `email`,"
        " `home.city`, `expectedVersion`, ...",
    )
    current_version: int | None = strawberry.field(
        default=None,
        description="For a CONFLICT on expectedVersion: the node's version now, to read and"
        " send again.",
    )

    @classmethod
    def of(cls, error: ApiError) -> UserError:
        field = error.extensions.get("field")
        version = error.extensions.get("version")
        return cls(
            code=UserErrorCode(error.code),
            message=error.message,
            field=field if isinstance(field, str) else None,
            current_version=version if isinstance(version, int) else None,
        )


USER_ERRORS_DESCRIPTION = "Empty when the mutation was written; else why nothing was."


class Payload:
    """What every payload type has (each declares its fields for Strawberry)."""

    user_errors: list[UserError]

    def __init__(
        self, *, user_errors: list[UserError]
    ) -> None: ...  # replaced by the dataclass __init__ strawberry.type writes for each subclass


def user_errors() -> Any:
    """The `userErrors` field every payload ends with."""
    return strawberry.field(default_factory=list, description=USER_ERRORS_DESCRIPTION)


P = TypeVar("P", bound=Payload)
Params = ParamSpec("Params")


def payload_mutation(
    payload: type[P], description: str | None = None
) -> Callable[[Callable[Params, Awaitable[P]]], Any]:
    """A mutation answering `payload` (nullable), with client errors in its `userErrors`."""

    def decorate(resolver: Callable[Params, Awaitable[P]]) -> Any:
        @functools.wraps(resolver)  # Strawberry reads the arguments through __wrapped__
        async def resolve(*args: Params.args, **kwargs: Params.kwargs) -> P:
            try:
                return await resolver(*args, **kwargs)
            except CLIENT_ERRORS as error:
                return payload(user_errors=[UserError.of(error)])

        return strawberry.mutation(resolve, graphql_type=payload | None, description=description)

    return decorate


# -- one payload per mutation, so that each may grow fields without touching the others --


def _written(what: str, name: str | None = None) -> Any:
    return strawberry.field(
        name=name,
        default=None,
        description=f"The {what} as written (read back strongly); null if nothing was.",
    )


def _deleted() -> Any:
    return strawberry.field(default=None, description="The id deleted; null if nothing was.")


@strawberry.type(
    description="What `createStudent` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class CreateStudentPayload(Payload):
    student: Student | None = _written("student")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `updateStudent` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class UpdateStudentPayload(Payload):
    student: Student | None = _written("student")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `deleteStudent` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class DeleteStudentPayload(Payload):
    deleted_id: strawberry.ID | None = _deleted()
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `setHome` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class SetHomePayload(Payload):
    student: Student | None = _written("student")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `createTeacher` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class CreateTeacherPayload(Payload):
    teacher: Teacher | None = _written("teacher")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `updateTeacher` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class UpdateTeacherPayload(Payload):
    teacher: Teacher | None = _written("teacher")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `deleteTeacher` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class DeleteTeacherPayload(Payload):
    deleted_id: strawberry.ID | None = _deleted()
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `createClass` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class CreateClassPayload(Payload):
    class_: Class | None = _written("class", name="class")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `updateClass` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class UpdateClassPayload(Payload):
    class_: Class | None = _written("class", name="class")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `deleteClass` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class DeleteClassPayload(Payload):
    deleted_id: strawberry.ID | None = _deleted()
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `createSport` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class CreateSportPayload(Payload):
    sport: Sport | None = _written("sport")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `updateSport` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class UpdateSportPayload(Payload):
    sport: Sport | None = _written("sport")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `deleteSport` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class DeleteSportPayload(Payload):
    deleted_id: strawberry.ID | None = _deleted()
    user_errors: list[UserError] = user_errors()


# Edge mutations answer both ends: the list a client shows may be either's.


@strawberry.type(
    description="What `enrollStudent` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class EnrollStudentPayload(Payload):
    class_: Class | None = _written("class", name="class")
    student: Student | None = _written("student")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `unenrollStudent` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class UnenrollStudentPayload(Payload):
    class_: Class | None = _written("class", name="class")
    student: Student | None = _written("student")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `joinSport` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class JoinSportPayload(Payload):
    sport: Sport | None = _written("sport")
    student: Student | None = _written("student")
    user_errors: list[UserError] = user_errors()


@strawberry.type(
    description="What `leaveSport` answers: what it wrote, or the user errors that say why"
    " it wrote nothing."
)
class LeaveSportPayload(Payload):
    sport: Sport | None = _written("sport")
    student: Student | None = _written("student")
    user_errors: list[UserError] = user_errors()
