"""The root Query: each field is one row of the access-pattern table in schema/table.md."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar, cast

import strawberry

from graph_api.errors import BadUserInput
from graph_api.graph.engine import prefetch
from graph_api.graph.engine.context import Info
from graph_api.graph.types import ordering, paging
from graph_api.graph.types.nodes import Node, by_id, parse_global_id
from graph_api.graph.types.ordering import IdOrder, NameOrder, PlaceOrder
from graph_api.graph.types.paging import (
    After,
    Before,
    CatalogConnection,
    First,
    Last,
    LocationConnection,
    SearchConnection,
)
from graph_api.graph.types.school_class import Class
from graph_api.graph.types.sport import Sport
from graph_api.graph.types.student import Student
from graph_api.graph.types.teacher import Teacher
from graph_api.model import items, keys, validation
from graph_api.model.keys import Key, Kind
from graph_api.model.validation import MAX_IDS
from graph_api.store.codec import Item
from graph_api.store.loaders import Loaders

log = logging.getLogger(__name__)

T = TypeVar("T")


ID_RULE = "`[A-Za-z0-9_-]{1,64}`; anything else is BAD_USER_INPUT"
# `id` of student(id:), teacher(id:), class(id:), sport(id:).
NodeId = Annotated[
    strawberry.ID, strawberry.argument(description=f"The id ({ID_RULE}; case-sensitive).")
]
PLACE = "1-100 characters, matched trimmed and case-folded"
Prefix = Annotated[
    str,
    strawberry.argument(
        description="The start of the name (a class: its subject): at least one letter or"
        " digit, of any script (`o'` finds `O'Brien`, `3` finds `3D Art`; punctuation alone"
        " is refused), no control characters, at most 200 characters; matched with case and"
        " accents ignored and blanks as one (`jose m` finds `José María`); a trailing blank"
        " ends a word (`ana ` does not find `Anabel`)."
    ),
]
OrderBy = Annotated[
    NameOrder | None,
    strawberry.argument(
        description="The list's order: by name ascending (the default) or descending."
    ),
]
CatalogOrderBy = Annotated[
    IdOrder | None,
    strawberry.argument(
        description="The list's order: by id ascending (the default) or descending."
    ),
]
LocationOrderBy = Annotated[
    PlaceOrder | None,
    strawberry.argument(
        description="The list's order: by state, city and id, ascending (the default) or"
        " descending."
    ),
]
SEARCH = (
    ": one Query of GSI2 a page (the partition of the prefix's first letter, `begins_with`"
    " on the folded name), exact pages, no filter. Null, with an error, for arguments it"
    " refuses."
)


@strawberry.type(
    description="What the API reads. Each field is one DynamoDB access pattern: a node by id"
    " is one BatchGetItem shared by every node read at its level, a list page is one Query,"
    " and nothing is a Scan. `extensions.dynamodb` counts a response's requests (when the"
    " server's accounting is on)."
)
class Query:
    @strawberry.field(
        description="The student with this id, or null if there is none: one BatchGetItem,"
        " shared with every other node read at this level."
    )
    async def student(self, info: Info, id: NodeId) -> Student | None:
        (found,) = await by_id(info, [(Kind.STUDENT, id)])
        return cast(Student | None, found)

    @strawberry.field(
        description="The teacher with this id, or null if there is none: one BatchGetItem,"
        " shared with every other node read at this level."
    )
    async def teacher(self, info: Info, id: NodeId) -> Teacher | None:
        (found,) = await by_id(info, [(Kind.TEACHER, id)])
        return cast(Teacher | None, found)

    @strawberry.field(
        name="class",
        description="The class with this id, or null if there is none: one BatchGetItem,"
        " shared with every other node read at this level; with a forward first page of"
        " `students`, one Query reads the class and that page together.",
    )
    async def class_(self, info: Info, id: NodeId) -> Class | None:
        item = await prefetch.node_with_roster(info, Kind.CLASS, id)
        return Class.from_item(item, info.context.loaders) if item else None

    @strawberry.field(
        description="The sport with this id, or null if there is none: one BatchGetItem,"
        " shared with every other node read at this level; with a forward first page of"
        " `students`, one Query reads the sport and that page together."
    )
    async def sport(self, info: Info, id: NodeId) -> Sport | None:
        item = await prefetch.node_with_roster(info, Kind.SPORT, id)
        return Sport.from_item(item, info.context.loaders) if item else None

    @strawberry.field(
        description=f"Students by id, in order; null for unknown ids. At most {MAX_IDS} ids:"
        " one BatchGetItem, shared with every other node read at this level."
    )
    async def students(
        self,
        info: Info,
        ids: Annotated[
            list[strawberry.ID],
            strawberry.argument(
                description=f"Up to {MAX_IDS} student ids ({ID_RULE}); repeats allowed."
            ),
        ],
    ) -> list[Student | None]:
        if len(ids) > MAX_IDS:
            raise BadUserInput(f"ids takes at most {MAX_IDS} ids", field="ids")
        named = [(Kind.STUDENT, keys.check_id(i, field="ids")) for i in ids]
        return cast(list[Student | None], await by_id(info, named))

    @strawberry.field(
        description="Every teacher, ordered by id (either way: `orderBy`): one Query of GSI1 a"
        " page. Null, with an error, for arguments it refuses."
    )
    async def teachers(
        self,
        info: Info,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
        order_by: CatalogOrderBy = None,
    ) -> CatalogConnection[Teacher] | None:
        page = paging.window(first, after, last, before)
        rng = keys.catalog(Kind.TEACHER)
        count = counted(info, keys.catalog_counter(Kind.TEACHER))
        found = await paging.from_range(
            info,
            "Query.teachers",
            rng,
            page,
            Teacher.from_item,
            ascending=ordering.ascending(order_by),
            read=paged(info),
        )
        return CatalogConnection.of(found, count)

    @strawberry.field(
        description="Every class, ordered by id (either way: `orderBy`): one Query of GSI1 a"
        " page. Null, with an error, for arguments it refuses."
    )
    async def classes(
        self,
        info: Info,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
        order_by: CatalogOrderBy = None,
    ) -> CatalogConnection[Class] | None:
        page = paging.window(first, after, last, before)
        rng = keys.catalog(Kind.CLASS)
        count = counted(info, keys.catalog_counter(Kind.CLASS))
        found = await paging.from_range(
            info,
            "Query.classes",
            rng,
            page,
            Class.from_item,
            ascending=ordering.ascending(order_by),
            read=paged(info),
        )
        return CatalogConnection.of(found, count)

    @strawberry.field(
        description="Every sport, ordered by id (either way: `orderBy`): one Query of GSI1 a"
        " page. Null, with an error, for arguments it refuses."
    )
    async def sports(
        self,
        info: Info,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
        order_by: CatalogOrderBy = None,
    ) -> CatalogConnection[Sport] | None:
        page = paging.window(first, after, last, before)
        rng = keys.catalog(Kind.SPORT)
        count = counted(info, keys.catalog_counter(Kind.SPORT))
        found = await paging.from_range(
            info,
            "Query.sports",
            rng,
            page,
            Sport.from_item,
            ascending=ordering.ascending(order_by),
            read=paged(info),
        )
        return CatalogConnection.of(found, count)

    @strawberry.field(
        description="Students whose home is in a country, a state of it, or a city, whole"
        " (their classes and sports come along): a state's or a city's page is one Query of"
        f" GSI1, a country's {keys.LOCATION_SHARDS} (its shards, in one wave, merged)."
    )
    async def students_by_location(
        self,
        info: Info,
        country: Annotated[
            str, strawberry.argument(description=f"The country of the students' home ({PLACE}).")
        ],
        state: Annotated[
            str | None,
            strawberry.argument(description=f"Only this state of the country ({PLACE})."),
        ] = None,
        city: Annotated[
            str | None,
            strawberry.argument(
                description=f"Only this city of the state ({PLACE}); needs `state`."
            ),
        ] = None,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
        order_by: LocationOrderBy = None,
    ) -> LocationConnection[Student] | None:
        page = paging.window(first, after, last, before)
        place = (
            validation.place_filter(country, "country"),
            None if state is None else validation.place_filter(state, "state"),
            None if city is None else validation.place_filter(city, "city"),
        )
        rng = keys.location(*place)
        count = counted(info, keys.location_counter(*place))
        read = paged(info)
        # While `graph-api migrate` moves students into shards, their old partition too.
        migrating = read and await info.context.services.layout.migrating(info.context.table)
        found = await paging.from_range(
            info,
            "Query.studentsByLocation",
            rng,
            page,
            Student.from_item,  # whole students: their classes and sports come along
            partitions=keys.location_ranges(*place, unsharded=migrating),
            ascending=ordering.ascending(order_by),
            read=read,
        )
        return LocationConnection.of(found, count)

    @strawberry.field(
        description="Students whose name starts with `prefix`, whole (their classes and"
        " sports come along)" + SEARCH
    )
    async def students_by_name(
        self,
        info: Info,
        prefix: Prefix,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
        order_by: OrderBy = None,
    ) -> SearchConnection[Student] | None:
        return await _search(
            info,
            "Query.studentsByName",
            Kind.STUDENT,
            prefix,
            Student.from_item,
            paging.window(first, after, last, before),
            order_by,
        )

    @strawberry.field(description="Teachers whose name starts with `prefix`" + SEARCH)
    async def teachers_by_name(
        self,
        info: Info,
        prefix: Prefix,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
        order_by: OrderBy = None,
    ) -> SearchConnection[Teacher] | None:
        return await _search(
            info,
            "Query.teachersByName",
            Kind.TEACHER,
            prefix,
            Teacher.from_item,
            paging.window(first, after, last, before),
            order_by,
        )

    @strawberry.field(description="Classes whose subject starts with `prefix`" + SEARCH)
    async def classes_by_subject(
        self,
        info: Info,
        prefix: Prefix,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
        order_by: OrderBy = None,
    ) -> SearchConnection[Class] | None:
        return await _search(
            info,
            "Query.classesBySubject",
            Kind.CLASS,
            prefix,
            Class.from_item,
            paging.window(first, after, last, before),
            order_by,
        )

    @strawberry.field(
        description="The student, teacher, class or sport a global id (`nodeId`) names, or"
        " null if there is none (Relay's refetch): one BatchGetItem, shared with every other"
        " node read at this level."
    )
    async def node(
        self,
        info: Info,
        id: Annotated[
            strawberry.ID,
            strawberry.argument(
                description="A global id, as `nodeId` gives it: `Student:stu-0001`."
            ),
        ],
    ) -> Node | None:
        (found,) = await _nodes(info, [id], "id")
        return found

    @strawberry.field(
        description=f"The nodes global ids name, in their order; null for each that names"
        f" none. At most {MAX_IDS} ids, of any mix of types: one BatchGetItem."
    )
    async def nodes(
        self,
        info: Info,
        ids: Annotated[
            list[strawberry.ID],
            strawberry.argument(
                description=f"Up to {MAX_IDS} global ids, as `nodeId` gives them (repeats allowed)."
            ),
        ],
    ) -> list[Node | None]:
        if len(ids) > MAX_IDS:
            raise BadUserInput(f"ids takes at most {MAX_IDS} ids", field="ids")
        return await _nodes(info, ids, "ids")


_COUNT = frozenset({items.COUNT})
_COUNT_ONLY = frozenset({"totalCount", "__typename"})


def paged(info: Info) -> bool:
    """Whether a catalog's or a place's page is wanted: anything but its totalCount (and
    __typename) is selected, or not totalCount (fragments flattened, `@skip`/`@include`
    as the variables say: the plan's collection). A selection without totalCount reads as
    it always did."""
    names = {field.name.value for field in prefetch.selected(info)}
    return "totalCount" not in names or not names <= _COUNT_ONLY


def counted(info: Info, counter: Key) -> Callable[[], Awaitable[int]]:
    """A list's totalCount: the sum of its counter's shards (`keys.counter_shards`) and of
    the counter's single item of the layout before shards (gone once `graph-api migrate`
    folded it, until then still counted), read through the item loader (keys in the
    BatchGetItem of its wave, at the loader's consistency) when `totalCount` is resolved, so
    only when selected. No item yet: nothing was ever counted there, 0. A drifted total
    below 0 (which `graph-api check` reports) says 0, and a warning names it."""
    loaders = info.context.loaders

    async def count() -> int:
        found = await loaders.item.load_parts([counter, *keys.counter_shards(counter)], _COUNT)
        held = sum(int(item.get(items.COUNT, 0)) for item in found if item)
        if held < 0:
            log.warning("counter %s / %s holds %d: run graph-api check", *counter, held)
        return max(held, 0)

    return count


async def _nodes(info: Info, ids: list[strawberry.ID], field: str) -> list[Node | None]:
    """Nodes by global id through the item loader: one BatchGetItem for any mix of types."""
    named = [parse_global_id(value, field) for value in ids]
    return cast(list[Node | None], await by_id(info, named))


async def _search(
    info: Info,
    field: str,
    kind: Kind,
    prefix: str,
    to_node: Callable[[Item, Loaders], T],
    page: paging.Window,
    order_by: NameOrder | None,
) -> SearchConnection[T]:
    """A page of a search by name: the prefix's range of GSI2, in the order asked."""
    rng = keys.name_prefix(kind, validation.name_prefix(prefix))
    ascending = ordering.ascending(order_by)
    found = await paging.from_range(info, field, rng, page, to_node, ascending=ascending)
    return SearchConnection.of(found)
