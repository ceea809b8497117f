"""Mutation inputs, and their validation into the values the write path takes."""

from __future__ import annotations

import strawberry

from graph_api.model import validation
from graph_api.model.items import Place


@strawberry.input(description="A student's address. Each part is 1-100 characters, trimmed.")
class HomeInput:
    country: str = strawberry.field(description="The country, as it will be shown.")
    state: str = strawberry.field(description="The state, region or province, as it will be shown.")
    city: str = strawberry.field(description="The city, as it will be shown.")
    street: str | None = strawberry.field(
        default=None, description="The street address (personal data), or null for none."
    )

    def place(self, prefix: str = "home") -> Place:
        return Place(
            country=validation.place(self.country, f"{prefix}.country"),
            state=validation.place(self.state, f"{prefix}.state"),
            city=validation.place(self.city, f"{prefix}.city"),
            street=None
            if self.street is None
            else validation.place(self.street, f"{prefix}.street"),
        )


@strawberry.input(description="A new student.")
class CreateStudentInput:
    name: str = strawberry.field(
        description="The name: 1-200 characters, trimmed; no control characters."
    )
    email: str = strawberry.field(
        description="An email address like name@example.org (at most 254 characters),"
        " unique among students regardless of case."
    )
    id: strawberry.ID | None = strawberry.field(
        default=None,
        description="Optional (`[A-Za-z0-9_-]{1,64}`); a sortable id is generated when left out.",
    )
    home: HomeInput | None = strawberry.field(
        default=None, description="Where the student lives; leave out for no home."
    )


@strawberry.input(description="A student's new fields; those left out (or null) keep their value.")
class UpdateStudentInput:
    name: str | None = strawberry.field(
        default=None, description="The new name: 1-200 characters, trimmed; no control characters."
    )
    email: str | None = strawberry.field(
        default=None,
        description="The new email address, unique among students regardless of case. Staff's"
        " to change: anyone else sending it is FORBIDDEN, whether or not the address is taken.",
    )


@strawberry.input(description="A new teacher.")
class CreateTeacherInput:
    name: str = strawberry.field(
        description="The name: 1-200 characters, trimmed; no control characters."
    )
    id: strawberry.ID | None = strawberry.field(
        default=None,
        description="Optional (`[A-Za-z0-9_-]{1,64}`); a sortable id is generated when left out.",
    )


@strawberry.input(description="A teacher's new fields; those left out (or null) keep their value.")
class UpdateTeacherInput:
    name: str | None = strawberry.field(
        default=None, description="The new name: 1-200 characters, trimmed; no control characters."
    )


@strawberry.input(description="A new class.")
class CreateClassInput:
    subject: str = strawberry.field(
        description="The subject: 1-200 characters, trimmed; no control characters."
    )
    teacher_id: strawberry.ID = strawberry.field(
        description="The id of the teacher who teaches it (NOT_FOUND if none)."
    )
    id: strawberry.ID | None = strawberry.field(
        default=None,
        description="Optional (`[A-Za-z0-9_-]{1,64}`); a sortable id is generated when left out.",
    )


@strawberry.input(description="A class's new fields; those left out (or null) keep their value.")
class UpdateClassInput:
    subject: str | None = strawberry.field(
        default=None,
        description="The new subject: 1-200 characters, trimmed; no control characters.",
    )
    teacher_id: strawberry.ID | None = strawberry.field(
        default=None, description="The id of the new teacher of the class (NOT_FOUND if none)."
    )


@strawberry.input(description="A new sport.")
class CreateSportInput:
    name: str = strawberry.field(
        description="The name: 1-200 characters, trimmed; no control characters."
    )
    coach: str | None = strawberry.field(
        default=None, description="Who coaches it (1-200 characters); leave out for no coach."
    )
    id: strawberry.ID | None = strawberry.field(
        default=None,
        description="Optional (`[A-Za-z0-9_-]{1,64}`); a sortable id is generated when left out.",
    )


@strawberry.input(description="A sport's new fields; those left out keep their value.")
class UpdateSportInput:
    name: str | None = strawberry.field(
        default=None,
        description="The new name (null keeps it): 1-200 characters, trimmed; no control"
        " characters.",
    )
    coach: str | None = strawberry.field(
        default=strawberry.UNSET, description="null clears the coach; leave out to keep it."
    )


def optional_name(value: str | None, field: str = "name") -> str | None:
    return None if value is None else validation.name(value, field)
