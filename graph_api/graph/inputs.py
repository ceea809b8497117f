"""Mutation inputs, and their validation into the values the write path takes."""

from __future__ import annotations

import strawberry

from graph_api import validation
from graph_api.items import Place


@strawberry.input
class HomeInput:
    country: str
    state: str
    city: str
    street: str | None = None

    def place(self, prefix: str = "home") -> Place:
        return Place(
            country=validation.place(self.country, f"{prefix}.country"),
            state=validation.place(self.state, f"{prefix}.state"),
            city=validation.place(self.city, f"{prefix}.city"),
            street=None
            if self.street is None
            else validation.place(self.street, f"{prefix}.street"),
        )


@strawberry.input
class CreateStudentInput:
    name: str
    email: str
    id: strawberry.ID | None = strawberry.field(
        default=None, description="Optional; a sortable id is generated when left out."
    )
    home: HomeInput | None = None


@strawberry.input
class UpdateStudentInput:
    name: str | None = None
    email: str | None = None


@strawberry.input
class CreateTeacherInput:
    name: str
    id: strawberry.ID | None = None


@strawberry.input
class UpdateTeacherInput:
    name: str | None = None


@strawberry.input
class CreateClassInput:
    subject: str
    teacher_id: strawberry.ID
    id: strawberry.ID | None = None


@strawberry.input
class UpdateClassInput:
    subject: str | None = None
    teacher_id: strawberry.ID | None = None


@strawberry.input
class CreateSportInput:
    name: str
    coach: str | None = None
    id: strawberry.ID | None = None


@strawberry.input
class UpdateSportInput:
    name: str | None = None
    coach: str | None = strawberry.field(
        default=strawberry.UNSET, description="null clears the coach; leave out to keep it."
    )


def optional_name(value: str | None, field: str = "name") -> str | None:
    return None if value is None else validation.name(value, field)
