"""The root Query: each field is one row of the access-pattern table in schema/table.md."""

from __future__ import annotations

import strawberry

from graph_api import keys, validation
from graph_api.errors import BadUserInput
from graph_api.graph import paging, prefetch
from graph_api.graph.context import Info
from graph_api.graph.paging import Connection
from graph_api.graph.school_class import Class
from graph_api.graph.sport import Sport
from graph_api.graph.student import Student
from graph_api.graph.teacher import Teacher
from graph_api.keys import Kind

MAX_IDS = 100


@strawberry.type
class Query:
    @strawberry.field
    async def student(self, info: Info, id: strawberry.ID) -> Student | None:
        item = await info.context.loaders.item.load(keys.node(Kind.STUDENT, id))
        return Student.from_item(item, info.context.loaders) if item else None

    @strawberry.field
    async def teacher(self, info: Info, id: strawberry.ID) -> Teacher | None:
        item = await info.context.loaders.item.load(keys.node(Kind.TEACHER, id))
        return Teacher.from_item(item, info.context.loaders) if item else None

    @strawberry.field(name="class")
    async def class_(self, info: Info, id: strawberry.ID) -> Class | None:
        item = await prefetch.node_with_roster(info, Kind.CLASS, id)
        return Class.from_item(item, info.context.loaders) if item else None

    @strawberry.field
    async def sport(self, info: Info, id: strawberry.ID) -> Sport | None:
        item = await prefetch.node_with_roster(info, Kind.SPORT, id)
        return Sport.from_item(item, info.context.loaders) if item else None

    @strawberry.field(
        description=f"Students by id, in order; null for unknown ids. At most {MAX_IDS}."
    )
    async def students(self, info: Info, ids: list[strawberry.ID]) -> list[Student | None]:
        if len(ids) > MAX_IDS:
            raise BadUserInput(f"ids takes at most {MAX_IDS} ids", field="ids")
        node_keys = [keys.node(Kind.STUDENT, keys.check_id(i, field="ids")) for i in ids]
        found = await info.context.loaders.item.load_many(node_keys)
        loaders = info.context.loaders
        return [Student.from_item(item, loaders) if item else None for item in found]

    @strawberry.field
    async def teachers(
        self, info: Info, first: int | None = 20, after: str | None = None
    ) -> Connection[Teacher]:
        rng = keys.catalog(Kind.TEACHER)
        return await paging.from_range(info, "Query.teachers", rng, first, after, Teacher.from_item)

    @strawberry.field
    async def classes(
        self, info: Info, first: int | None = 20, after: str | None = None
    ) -> Connection[Class]:
        rng = keys.catalog(Kind.CLASS)
        return await paging.from_range(info, "Query.classes", rng, first, after, Class.from_item)

    @strawberry.field
    async def sports(
        self, info: Info, first: int | None = 20, after: str | None = None
    ) -> Connection[Sport]:
        rng = keys.catalog(Kind.SPORT)
        return await paging.from_range(info, "Query.sports", rng, first, after, Sport.from_item)

    @strawberry.field(description="Students whose home is in a country, a state of it, or a city.")
    async def students_by_location(
        self,
        info: Info,
        country: str,
        state: str | None = None,
        city: str | None = None,
        first: int | None = 20,
        after: str | None = None,
    ) -> Connection[Student]:
        rng = keys.location(
            validation.place_filter(country, "country"),
            None if state is None else validation.place_filter(state, "state"),
            None if city is None else validation.place_filter(city, "city"),
        )
        return await paging.from_range(
            info,
            "Query.studentsByLocation",
            rng,
            first,
            after,
            Student.from_item,  # whole students: their classes and sports come along
        )
