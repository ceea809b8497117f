"""Relay connections over key ranges: exact `hasNextPage`/`hasPreviousPage`, HMAC'd cursors.

A page is asked for forward (`first`, `after`) or backward (`last`, `before`), never both.
Either way it reads one item more than it returns, in its direction (a range: one Query with
`Limit = n + 1`, `ScanIndexForward: false` backward; a map: the sorted entries, reversed), so
the flag of its own direction is exact: no page that claims another is followed by an empty
one. The flag of the other direction is `false` (Relay's spec allows it: knowing it would
cost a second read). A cursor is a position, not a direction: `before: endCursor` of a page
reads what lies before that page's last edge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Generic, NamedTuple, Self, TypeVar

import strawberry

from graph_api.errors import BadUserInput
from graph_api.graph.engine.context import Context, Info
from graph_api.model.cursors import Cursors
from graph_api.model.keys import SK, Range
from graph_api.model.validation import DEFAULT_FIRST, MAX_FIRST
from graph_api.store.codec import Item
from graph_api.store.loaders import Loaders, PageRequest, start_key
from graph_api.store.table import key_names

T = TypeVar("T")

# The arguments every connection field takes (their descriptions are GraphiQL's docs).
First = Annotated[
    int | None,
    strawberry.argument(
        description=f"Page forward: the first 1-{MAX_FIRST} items (after `after`, if given)."
        f" {DEFAULT_FIRST} when neither `first` nor `last` is given. Not with `last`/`before`."
    ),
]
After = Annotated[
    str | None,
    strawberry.argument(
        description="Page forward from this cursor (an edge's `cursor`, a page's `endCursor`"
        " or `startCursor`) of the same field and parent. Not with `last`/`before`."
    ),
]
Last = Annotated[
    int | None,
    strawberry.argument(
        description=f"Page backward: the last 1-{MAX_FIRST} items (before `before`, if"
        " given), in the list's order. Not with `first`/`after`; one read like `first`."
    ),
]
Before = Annotated[
    str | None,
    strawberry.argument(
        description="Page backward from this cursor of the same field and parent: the items"
        f" before it. `last` defaults to {DEFAULT_FIRST}. Not with `first`/`after`."
    ),
]


@dataclass(frozen=True, slots=True)
class CursorOf:
    """What the cursors of one page are bound to: the field and the list (`rng`) it walks.
    An edge's position is worked out only when its cursor is selected: its item's key with
    the list's partition key in place of its partition's, so that one cursor resumes every
    partition of a list kept in several (a country's location shards) at the same sort key."""

    cursors: Cursors
    field: str
    rng: Range

    def encode(self, position: Any) -> str:
        return self.cursors.encode(self.field, self.rng, self.key(position))

    def key(self, position: Any) -> Mapping[str, str]:
        """A range's edge: its item, whose key (the range index's names) is its position."""
        key = {name: position[name] for name in key_names(self.rng.index)}
        key[self.rng.pk_name] = self.rng.pk
        return key


class EntryCursorOf(CursorOf):
    """The cursors of a page of a map carried on its owner (a student's classes)."""

    __slots__ = ()

    def key(self, position: Any) -> Mapping[str, str]:
        """A map's edge: its entry's id, whose position is its `SK` in the range."""
        return self.rng.at(position).as_item()


_new = object.__new__


def _cursor(root: Edge[Any]) -> str:
    return root.encoded()


@strawberry.type(description="One item of a page, with its position in the list.")
class Edge(Generic[T]):
    # Encoded (an HMAC) only when `cursor` is selected, not for every edge of every page.
    cursor: str = strawberry.field(
        resolver=_cursor,
        description="This item's position, for `after` or `before` of the same field and"
        " parent (opaque and signed: a cursor edited or used elsewhere is BAD_USER_INPUT).",
    )
    node: T = strawberry.field(description="The item.")
    page: strawberry.Private[CursorOf]
    # Where `page` places the edge (a range's item, a map entry's id): only a cursor needs it.
    position: strawberry.Private[Any]

    def encoded(self) -> str:
        """This edge's cursor."""
        return self.page.encode(self.position)

    @classmethod
    def of(cls, node: T, page: CursorOf, position: Any) -> Edge[T]:
        """An edge, built as `NodeBase.of` builds a node: its three attributes set, without
        the keyword-only `__init__` Strawberry writes (a third of the time; Q1 builds 174)."""
        edge = _new(cls)
        edge.node = node
        edge.page = page
        edge.position = position
        return edge


@strawberry.type(
    description="Where a page lies in its list (Relay's PageInfo). The flag of the page's own"
    " direction is exact; the other one is false (see hasPreviousPage, hasNextPage)."
)
class PageInfo:
    has_next_page: bool = strawberry.field(
        description="Paging forward (`first`): whether items follow this page; exact, so a"
        " page that says true is never followed by an empty one. Paging backward: false."
    )
    has_previous_page: bool = strawberry.field(
        description="Paging backward (`last`): whether items precede this page; exact. Paging"
        " forward: false (Relay's spec allows it; knowing it would cost another read)."
    )
    first: strawberry.Private[Edge[Any] | None]
    last: strawberry.Private[Edge[Any] | None]

    @classmethod
    def of(cls, edges: list[Edge[Any]], forward: bool, more: bool) -> PageInfo:
        """A page's info, its four attributes set without Strawberry's keyword-only
        `__init__`, as `Edge.of` builds an edge (Q1 builds 60 pages)."""
        info = _new(cls)
        info.has_next_page = more and forward
        info.has_previous_page = more and not forward
        info.first = edges[0] if edges else None
        info.last = edges[-1] if edges else None
        return info

    @strawberry.field(
        description="The cursor of the page's first edge (null if the page is empty): pass it"
        " as `before` to read the page before this one."
    )
    def start_cursor(self) -> str | None:
        return self.first.encoded() if self.first else None

    @strawberry.field(
        description="The cursor of the page's last edge (null if the page is empty): pass it"
        " as `after` to read the page after this one."
    )
    def end_cursor(self) -> str | None:
        return self.last.encoded() if self.last else None


EDGES = "The page's items with their cursors, in the list's order (also when paging backward)."
TOTAL = "How many items the whole list holds (all pages), from the list's counter."
COUNTED = (
    " totalCount sums the list's counter, kept in 16 shard items by the transactions that"
    " change the list: their keys batched with the other items read beside them (eventually"
    " consistent in a query, strongly in a mutation's answer); none read when not selected."
    " Selected alone (with __typename), it sends no Query for the page."
)
UNCOUNTED = (
    " No totalCount: the table keeps no counter for it, and counting would read every item"
    " of the list (a Scan of it); walk the pages to count."
)


@strawberry.type
class Listing(Generic[T]):
    """The fields every connection has; each GraphQL connection type below is one of these
    with its own description (and totalCount where the table counts the list)."""

    edges: list[Edge[T]] = strawberry.field(description=EDGES)
    page_info: PageInfo = strawberry.field(description="Where this page lies in the list.")
    # The list's size (an int, or an awaitable of one), asked only when totalCount is selected.
    count: strawberry.Private[Callable[[], Any]]

    @classmethod
    def of(cls, page: PageRead[T], count: Callable[[], Any] = int) -> Self:
        """The connection of a page read, its attributes set without the keyword-only
        `__init__` Strawberry writes, as `PageInfo.of` builds its info. `count` is called
        only for a selected totalCount (a type without one never calls it)."""
        connection = _new(cls)
        connection.edges, connection.page_info = page
        connection.count = count
        return connection


@strawberry.type
class Counted(Listing[T]):
    """A connection whose list the table counts: totalCount calls the page's `count`."""

    @strawberry.field(description=TOTAL)
    def total_count(self) -> int:
        return self.count()  # type: ignore[no-any-return]  # an int, or an awaitable of one


@strawberry.type(
    description="A page of a list whose size the table keeps on the parent item (a roster's"
    " studentCount, the size of a student's or a teacher's map): totalCount costs no request."
)
class Connection(Counted[T]):
    @strawberry.field(
        description="How many items the whole list holds (all pages), from the counter the"
        " table keeps with the list: no request when the parent is already read."
    )
    def total_count(self) -> int:
        return self.count()  # type: ignore[no-any-return]  # an int, or an awaitable of one


@strawberry.type(
    description="A page of a catalog (all teachers, classes or sports), ordered by id." + COUNTED
)
class CatalogConnection(Counted[T]):
    pass


@strawberry.type(
    description="A page of the students whose home is in a place, ordered by state, city and"
    " id." + COUNTED
)
class LocationConnection(Counted[T]):
    pass


@strawberry.type(
    description="A page of the nodes whose name (a class: subject) starts with a prefix,"
    " ordered by that name with case and accents ignored, then by id." + UNCOUNTED
)
class SearchConnection(Listing[T]):
    pass


@dataclass(frozen=True, slots=True)
class Window:
    """Which page a connection field asks for: `count` items forward after `cursor`, or
    backward before it."""

    count: int
    forward: bool
    cursor: str | None


def _check_count(value: int | None, name: str) -> int:
    if value is None:
        return DEFAULT_FIRST
    if not 1 <= value <= MAX_FIRST:
        raise BadUserInput(f"{name} must be between 1 and {MAX_FIRST}", field=name)
    return value


def check_first(first: int | None) -> int:
    """`first` as given, or the default when null; BAD_USER_INPUT outside 1..100."""
    return _check_count(first, "first")


def window(first: int | None, after: str | None, last: int | None, before: str | None) -> Window:
    """The page asked for; BAD_USER_INPUT when the arguments mix the two directions."""
    if first is None and after is None and last is None and before is None:
        return _FIRST_PAGE  # most fields: no arguments at all
    if first is not None and last is not None:
        raise BadUserInput(
            "first and last cannot be combined: page forward with first (and after) or"
            " backward with last (and before)",
            field="last",
        )
    if after is not None and before is not None:
        raise BadUserInput(
            "after and before cannot be combined: page forward with first and after, or"
            " backward with last and before",
            field="before",
        )
    if last is not None or before is not None:
        if first is not None or after is not None:
            raise BadUserInput(
                "first and after page forward, last and before backward: use one pair",
                field="first" if first is not None else "after",
            )
        return Window(_check_count(last, "last"), False, before)
    return Window(check_first(first), True, after)


_FIRST_PAGE = Window(DEFAULT_FIRST, True, None)


def _start(context: Context, field: str, rng: Range, page: Window) -> dict[str, str] | None:
    if page.cursor is None:
        return None
    argument = "after" if page.forward else "before"
    return context.cursors.decode(page.cursor, field, rng, argument)


class PageRead(NamedTuple, Generic[T]):
    """A page read, before it becomes its field's connection (`Listing.of`)."""

    edges: list[Edge[T]]
    page_info: PageInfo


def from_map(
    context: Context,
    field: str,
    rng: Range,
    page: Window,
    entries: Mapping[str, Mapping[str, Any]],
    to_node: Callable[[str, Mapping[str, Any], Loaders], T],
) -> Connection[T]:
    """A page of a bounded relation carried on its owner's item as a map keyed by id (a
    student's classes and sports, a teacher's classes): no request beyond the owner's item.
    Its totalCount is the map's size.

    Entries are ordered by id, and a cursor is the entry's position in `rng` (its `SK`), so
    cursors look and check like the cursors of a range read from the table.
    """
    ids = sorted(entries)  # the order of their positions: one prefix, then the id
    count = page.count
    start = _start(context, field, rng, page)
    if start:
        if page.forward:
            ids = [id_ for id_ in ids if rng.at(id_).sk > start[SK]]
        else:
            ids = [id_ for id_ in ids if rng.at(id_).sk < start[SK]]
    chosen = ids if len(ids) <= count else ids[:count] if page.forward else ids[-count:]
    cursor_of = EntryCursorOf(context.cursors, field, rng)
    loaders = context.loaders
    edges: list[Edge[T]] = []
    for id_ in chosen:  # `Edge.of`, written out: Q1 builds 137 such edges in 60 pages
        edge = _new(Edge)
        edge.node = to_node(id_, entries[id_], loaders)
        edge.page = cursor_of
        edge.position = id_
        edges.append(edge)
    total = len(entries)
    more = len(ids) > count
    return Connection.of(PageRead(edges, PageInfo.of(edges, page.forward, more)), lambda: total)


async def from_range(
    info: Info,
    field: str,
    rng: Range,
    page: Window,
    to_node: Callable[[Item, Loaders], T],
    *,
    partitions: list[Range] | None = None,
    ascending: bool = True,
    read: bool = True,
) -> PageRead[T]:
    """A page of a range `rng` (unbounded: a class's students, a catalog, a city): one Query
    with `Limit = n + 1`. A list in descending order (`ascending` false) is its range read
    from the other end. `read` false (only the list's totalCount is selected): no Query, an
    empty page that nothing shows; a cursor is checked all the same.

    A list kept in several `partitions` of an index with one sort key order (a country's
    location shards: `keys.location_ranges`): each partition's Query after the cursor's
    position, `Limit = n + 1`, all in one wave, merged by sort key. Each partition returns
    its first n + 1 items past the position, so the merged first n + 1 are the list's: the
    page and its flag are exact, in both directions. A cursor is a position in the list
    (`CursorOf`) and starts every partition there: its sort key lies under the list's prefix
    (`Cursors.decode` checks it), so each partition's ExclusiveStartKey meets that
    partition's key condition, as DynamoDB requires. An item found in two partitions at once
    (a student whose entry moves between shards, seen through the index's lag) is shown once.
    """
    start = _start(info.context, field, rng, page)
    if not read:
        return PageRead([], PageInfo.of([], page.forward, False))
    count = page.count
    # One item more than asked tells whether another page exists, without an empty page.
    # The Queries read in the list's order paging forward, against it paging backward.
    reading = page.forward == ascending  # `ScanIndexForward`
    requests = [
        PageRequest(
            part, count + 1, start_key({**start, rng.pk_name: part.pk} if start else None), reading
        )
        for part in partitions or [rng]
    ]
    loaders = info.context.loaders
    found = await loaders.page.load_many(requests)
    if len(found) == 1:
        items = found[0]
    else:
        sk_name = rng.sk_name
        by_position = {item[sk_name]: item for part in found for item in part}
        ordered = sorted(by_position, reverse=not reading)
        items = [by_position[position] for position in ordered[: count + 1]]
    # Backward, the Queries read from the end: their first `count` items, in the list's order.
    chosen = items[:count] if page.forward else items[:count][::-1]
    cursor_of = CursorOf(info.context.cursors, field, rng)
    edges = [Edge.of(to_node(item, loaders), cursor_of, item) for item in chosen]
    return PageRead(edges, PageInfo.of(edges, page.forward, len(items) > count))
