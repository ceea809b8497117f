"""What every node type shares: an id, what is known of it, and a batched full read.

A node object may be built from its own item or from an edge's copies. Fields the copies
hold resolve at once; any other field loads the node item through the request's batched
item loader, so asking for one more field of 50 nodes costs one BatchGetItem, not 50 reads.

A page whose nodes' selection reads more than their copies hold gives them their items
before they resolve (`with_items`): the same one BatchGetItem, but each field then answers
from the item at once instead of awaiting the loader on its own (a coroutine, a future and
a task per field were most of such a page's execution time). Every read of a node type's
items in a request, those and a field's own, asks for the attributes its fields selected
anywhere in the operation read (`parts_of`), whole items when one of them is not known.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import CoroutineType
from typing import Any, ClassVar, Self, TypeVar

import strawberry

from graph_api.errors import BadUserInput, NotFound
from graph_api.graph.engine import prefetch
from graph_api.graph.engine.context import Info
from graph_api.graph.types import paging
from graph_api.model import keys
from graph_api.model.items import COUNT, TYPE, Relation
from graph_api.model.keys import Kind
from graph_api.store.codec import Item
from graph_api.store.loaders import Loaders

T = TypeVar("T")
# A node type's fields read without a resolver: Python name → item attribute, or a function
# of the node (a field built from several attributes).
Attributes = Mapping[str, str | Callable[[Any], Any]]
# A node type's fields → every item attribute each may read (`NodeBase.field_attributes`).
FieldAttributes = Mapping[str, tuple[str, ...]]


def reads_of(field_attributes: FieldAttributes, *, lazy: Iterable[str] = ()) -> Mapping[str, str]:
    """A node type's `reads` (GraphQL field → the item attribute it reads): the first
    attribute of each field of `field_attributes`, but for the fields that read theirs only
    when asked (`lazy`: a roster's `totalCount`, an email behind its check), which a page
    does not load its nodes' items for."""
    skipped = set(lazy)
    return {
        name: attributes[0]
        for name, attributes in field_attributes.items()
        if attributes and name not in skipped
    }


GLOBAL_ID_SEPARATOR = ":"  # never in an id (`[A-Za-z0-9_-]`): splitting is unambiguous


def type_name(kind: Kind) -> str:
    """The GraphQL type of a node kind: `STUDENT` → `Student`."""
    return kind.capitalize()


def global_id(kind: Kind, id_: str) -> str:
    """A node's global id (`nodeId`): its GraphQL type and its id, `Student:stu-0001`."""
    return f"{type_name(kind)}{GLOBAL_ID_SEPARATOR}{id_}"


def parse_global_id(value: str, field: str = "id") -> tuple[Kind, str]:
    """The kind and id a global id names; BAD_USER_INPUT naming `field` if it names none."""
    name, separator, id_ = str(value).partition(GLOBAL_ID_SEPARATOR)
    kind = next((k for k in Kind if type_name(k) == name), None)
    if not separator or kind is None:
        raise BadUserInput(
            f"{field} takes node ids as `nodeId` gives them: the type, ':' and the id, as in"
            f" Student:stu-0001 ({', '.join(type_name(k) for k in Kind)})",
            field=field,
        )
    return kind, keys.check_id(id_, field=field)


ID_DESCRIPTION = (
    "The object's id: unique among objects of its type only (a student and a teacher may"
    " share one); what `student(id:)`, `teacher(id:)`, `class(id:)` and `sport(id:)` take."
    " For an id unique across types, use `nodeId`."
)


@strawberry.interface(
    description="An object that `node(id:)` refetches by its `nodeId` (Relay's Node"
    " interface): a student, a teacher, a class or a sport."
)
class Node:
    id: strawberry.ID = strawberry.field(description=ID_DESCRIPTION)

    @strawberry.field(
        description="The global id: unique across all types, what `node(id:)` and"
        " `nodes(ids:)` take. It spells the type and the id, as in `Student:stu-0001`, and"
        " never changes; treat it as opaque. Relay: set the compiler's"
        " `nodeInterfaceIdField` and `nodeInterfaceIdVariableName` to `nodeId`, and the"
        " runtime's `getDataID` to read it."
    )
    def node_id(self) -> strawberry.ID:
        return strawberry.ID(global_id(self.kind, self.id))  # type: ignore[attr-defined]


class NodeBase:
    """A node: its id, what is known of it, and the request's loaders to read the rest.

    Its fields that need neither arguments nor `Info` (`attributes`: Python name → the item
    attribute, or a function of the node) are declared without a resolver, so Strawberry
    reads them with `getattr`, far cheaper than a resolver call: `@node_fields` makes each
    a property that answers from `known`, or with an awaitable that loads the node.
    """

    kind: ClassVar[Kind]
    attributes: ClassVar[Attributes] = {}
    # GraphQL field -> the item attribute it reads (what `with_items` looks for in copies):
    # `reads_of(field_attributes)`, the one table each type declares.
    reads: ClassVar[Mapping[str, str]] = {}
    # GraphQL field -> every item attribute it may read once selected, lazily too (a
    # roster's `totalCount`, an email behind its access check): what reads of the type's
    # items ask for (`parts_of`). Every field of the type is named
    # (`tests/store/test_item_parts.py`); a field left out would make the type read whole items.
    field_attributes: ClassVar[FieldAttributes] = {}
    id: strawberry.ID
    known: dict[str, Any]
    loaders: Loaders
    # Object types the node's item carries (a student's `Home`): GraphQL type → what each
    # field of theirs reads of the node's item. Selected anywhere in the operation, those
    # attributes are read with the node's (`parts_of`).
    carried: ClassVar[Mapping[str, FieldAttributes]] = {}
    # Each node type by its kind: a relation's targets are built without importing their
    # module in every call (the node modules import each other).
    by_kind: ClassVar[dict[Kind, type[NodeBase]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind is not None:
            known = NodeBase.by_kind.setdefault(kind, cls)
            if known is not cls:  # a relation's targets would be built as one of them
                raise TypeError(f"{kind} has two node types: {known.__name__}, {cls.__name__}")

    @classmethod
    def of(cls, id_: str, known: dict[str, Any], loaders: Loaders) -> Self:
        # Not the dataclass __init__ Strawberry writes, which would want every field's
        # value: the scalar fields stay unset and read `known` through their properties.
        node = cls.__new__(cls)
        node.id = id_  # type: ignore[assignment]  # strawberry.ID is a NewType of str
        node.known = known
        node.loaders = loaders
        return node

    @classmethod
    def from_item(cls, item: Item, loaders: Loaders) -> Self:
        """The node from its own item: every field is known."""
        return cls.of(item["id"], item, loaders)

    @classmethod
    def from_view(cls, view: tuple[str, dict[str, Any]], loaders: Loaders) -> Self:
        """The node as an edge sees it: its id and the edge's copies of its fields."""
        return cls.of(view[0], view[1], loaders)

    @classmethod
    def from_entry(cls, id_: str, entry: Mapping[str, Any], loaders: Loaders) -> Self:
        """The node as an entry of another node's map sees it (a student's class). Nothing
        writes to `known` (a load replaces it), so a dict entry is shared, not copied."""
        return cls.of(id_, entry if type(entry) is dict else dict(entry), loaders)

    def map_page(
        self,
        info: Info,
        field: str,
        relation: Relation,
        page: paging.Window,
        to_node: Callable[[str, Mapping[str, Any], Loaders], T] | None = None,
        *,
        whole: bool = True,
    ) -> Any:
        """A page of a relation carried on this node's item as a map (`map_pages`)."""
        return map_pages(info, field, relation, page, to_node, whole=whole)(self)

    async def roster_page(
        self,
        info: Info,
        field: str,
        relation: Relation,
        page: paging.Window,
        to_node: Callable[[tuple[str, dict[str, Any]], Loaders], T],
    ) -> paging.Connection[T]:
        """A page of the edge items in this node's partition (a class's students), counted
        by the node's own counter of them."""
        found = await paging.from_range(
            info,
            field,
            keys.roster(relation.target, self.id, relation.owner),
            page,
            lambda edge, loaders: to_node(relation.owner_view(edge), loaders),
        )
        await _give_items(info, found.edges)
        return paging.Connection.of(found, lambda: self.roster_count(relation))

    def roster_count(self, relation: Relation) -> Any:
        """How many `relation`s point at this node (a class's `studentCount`): on its item,
        and for a sharded relation in its roster counter's shards too (a class made before
        the shards keeps its count on its item until `graph-api migrate` moves it). The
        shards are read only when this is resolved, in the BatchGetItem of its wave."""
        count = relation.target_count
        assert count is not None
        known = self.known
        own = known.get(count) if count in known or TYPE in known else None
        if not relation.sharded or type(own) is int:  # an old layout's class: no shards
            return self.get(count)
        shards = keys.roster_shards(self.kind, self.id)
        # The node's item (if not known) and its shards asked for now: one batch for both.
        item = None if count in known or TYPE in known else self._found(self._item_load())
        # Whole: a shard is its count and the class's copies, a few bytes either way.
        return _summed(count, item, self.loaders.item.load_each((key, None) for key in shards))

    def get(self, name: str) -> Any:
        """The item attribute's value when known, else an awaitable of it (graphql-core
        awaits it).

        Returning plain values keeps the common case free of a coroutine and a task per
        field, which dominated the cost of wide lists.
        """
        known = self.known
        if name in known:
            return known[name]
        if TYPE in known:  # the whole item: an attribute it lacks is absent, not unread
            return None
        return self._load(name)

    def attributes_of(self, names: Iterable[str]) -> Any:
        """What is known of the node when that holds `names` (or is its whole item), else an
        awaitable of its item, read as `get` reads it (`_item`)."""
        known = self.known
        if TYPE in known or all(name in known for name in names):
            return known
        return self._item()

    async def _load(self, name: str) -> Any:
        return (await self._item()).get(name)

    def _item_load(self) -> Awaitable[Item | None]:
        """The read of the node's item, asked for now (`_item`)."""
        key = keys.node(self.kind, self.id)
        parts = self.loaders.parts
        part = parts.get(self.kind) if parts is not None else None
        return (
            self.loaders.item.load(key) if part is None else self.loaders.item.load_part(key, part)
        )

    async def _item(self) -> Item:
        """The node's item, as the request's reads of its kind ask for it (`parts_of`): one
        batched read, shared by every field that asks."""
        return await self._found(self._item_load())

    async def _found(self, read: Awaitable[Item | None]) -> Item:
        """The node's item from its read (`_item_load`); NOT_FOUND when there is none."""
        item = await read
        if item is None:
            raise NotFound(f"{self.kind.lower()} {self.id} does not exist", id=self.id)
        return item


async def _summed(
    count: str, item: Awaitable[Item] | None, shards: Awaitable[list[Item | None]]
) -> int:
    """The shards' counts, plus the node item's `count` (a class of the layout before) when
    `item` is its read (asked for with the shards: one BatchGetItem). A total below 0
    (drift, which check reports) says 0."""
    if item is None:
        own, found = None, await shards
    else:  # both reads asked for already: awaited together, so a failed one leaves none behind
        node, found = await asyncio.gather(item, shards)
        own = node.get(count)
    total = int(own or 0) + sum(int(shard.get(COUNT, 0)) for shard in found if shard)
    return max(total, 0)


def map_pages(
    info: Info,
    field: str,
    relation: Relation,
    page: paging.Window,
    to_node: Callable[[str, Mapping[str, Any], Loaders], Any] | None = None,
    *,
    whole: bool = True,
) -> Callable[[NodeBase], Any]:
    """The pages of a relation carried on its owners' items as maps (a student's classes),
    for one field of the document: what every owner shares is worked out here, once (the
    node builder, the request's context, what the nodes' selection reads), the page of each
    owner by the function returned. A page is built now when its owner's item is read,
    after one batched load when it is not; with `whole`, its nodes get their items first
    when their selection reads more than the entries hold (`with_items`). Its nodes are the
    target kind's `from_entry`, unless `to_node` says otherwise."""
    target_type = NodeBase.by_kind[relation.target]  # what `to_node` builds too
    build = to_node if to_node is not None else target_type.from_entry
    context = info.context
    wanted = prefetch.reads(info, target_type.reads) if whole else None
    part = parts_of(info, relation.target) if wanted else None
    owner_kind, target, attribute = relation.owner, relation.target, relation.field

    def page_of(owner: NodeBase) -> Any:
        rng = keys.entries(owner_kind, owner.id, target)
        known = owner.known
        if attribute in known:  # the item is read (`get`'s common case, no `then`)
            connection = paging.from_map(context, field, rng, page, known[attribute] or {}, build)
        else:
            connection = then(
                owner.get(attribute),
                lambda entries: paging.from_map(context, field, rng, page, entries or {}, build),
            )
        if not wanted:
            return connection
        return _with_wanted(context.loaders, wanted, part, connection)

    return page_of


N = TypeVar("N", bound=type[NodeBase])


def node_fields(cls: N) -> N:
    """Give a node type its `attributes` as properties: reading one (graphql-core's
    `getattr`) answers from `known`, or is an awaitable of the attribute that loads the
    node's item (`get`). Applied over `@strawberry.type`, whose dataclass would take a
    property declared in the class body for a field's default value."""
    for name, attribute in cls.attributes.items():
        read = _reader(attribute) if isinstance(attribute, str) else attribute
        setattr(cls, name, property(read))
    return cls


def _reader(attribute: str) -> Callable[[NodeBase], Any]:
    def read(node: NodeBase) -> Any:
        known = node.known  # `get`, with its common case inline: a field a call
        return known[attribute] if attribute in known else node.get(attribute)

    return read


def with_items(info: Info, connection: Any) -> Any:
    """The connection, or an awaitable of it once its nodes whose selection reads more than
    their copies hold have their items (module docstring)."""
    partial, part = _partial(info, connection.edges)
    if not partial:
        return connection
    return _loaded(info.context.loaders, partial, part, connection)


def _with_wanted(
    loaders: Loaders, wanted: frozenset[str], part: frozenset[str] | None, connection: Any
) -> Any:
    """`with_items`, what the nodes' selection reads (`wanted`) and the attributes their
    items are read for (`part`; None: whole) known beforehand."""
    if isinstance(connection, CoroutineType):
        pending = connection

        async def later() -> Any:
            found = await pending
            await _load_items(loaders, _lacking(wanted, found.edges), part)
            return found

        return later()
    partial = _lacking(wanted, connection.edges)
    if not partial:
        return connection
    return _loaded(loaders, partial, part, connection)


async def _loaded(
    loaders: Loaders, partial: list[NodeBase], part: frozenset[str] | None, connection: Any
) -> Any:
    await _load_items(loaders, partial, part)
    return connection


def _partial(
    info: Info, edges: Sequence[paging.Edge[Any]]
) -> tuple[list[NodeBase], frozenset[str] | None]:
    """The page's nodes that lack an attribute their selection reads, and the attributes
    their items are read for (None: whole)."""
    first = next((edge.node for edge in edges if TYPE not in edge.node.known), None)
    if first is None:  # every node read from its own item
        return [], None
    node_type = type(first)
    partial = _lacking(prefetch.reads(info, node_type.reads), edges)
    if not partial:
        return [], None
    return partial, parts_of(info, node_type.kind)


def _lacking(wanted: frozenset[str], edges: Sequence[paging.Edge[Any]]) -> list[NodeBase]:
    """The nodes of `edges` that lack an attribute of `wanted`; none when it is empty (the
    selection reads only what every node has: its id)."""
    if not wanted:
        return []
    return [
        edge.node
        for edge in edges
        if TYPE not in edge.node.known and not wanted <= edge.node.known.keys()
    ]


async def _give_items(info: Info, edges: Sequence[paging.Edge[Any]]) -> None:
    await _load_items(info.context.loaders, *_partial(info, edges))


async def _load_items(
    loaders: Loaders, partial: list[NodeBase], part: frozenset[str] | None
) -> None:
    """Give the nodes their items: whole, or (`part`) those attributes of them, what the
    node knew besides kept and an attribute the item lacks known as absent (None)."""
    if not partial:
        return
    found = await loaders.item.load_each((keys.node(n.kind, n.id), part) for n in partial)
    absent = dict.fromkeys(part or ())
    for node, item in zip(partial, found, strict=True):
        if item is not None:  # none: its fields say NOT_FOUND, as they would have
            node.known = _read_into(node.known, item, absent)


async def by_id(info: Info, named: Sequence[tuple[Kind, str]]) -> list[NodeBase | None]:
    """Nodes by kind and id, in order, None for each with no item: one read of the level's
    BatchGetItem, for the attributes the operation's fields of each type read (`parts_of`),
    whole items for a type where one of them is not known."""
    loaders = info.context.loaders
    parts = {kind: parts_of(info, kind) for kind in dict.fromkeys(kind for kind, _ in named)}
    found = await loaders.item.load_each((keys.node(k, id_), parts[k]) for k, id_ in named)
    absent = {kind: dict.fromkeys(part or ()) for kind, part in parts.items()}
    by_kind = NodeBase.by_kind
    return [
        by_kind[kind].of(id_, _read_into({}, item, absent[kind]), loaders)
        if item is not None
        else None
        for (kind, id_), item in zip(named, found, strict=True)
    ]


def _read_into(known: dict[str, Any], item: Item, absent: dict[str, None]) -> dict[str, Any]:
    """What a node knows once its item is read: a whole item (asked for whole, or another
    read's from the cache) as it is; a part over what it knew, each attribute of the part
    that the item lacks known as absent (None)."""
    return item if TYPE in item else {**known, **absent, **item}


def parts_of(info: Info, kind: Kind) -> frozenset[str] | None:
    """What the request's reads of `kind`'s items ask for (None: whole items), worked out
    once a request for every kind (`prefetch.operation_parts`) and kept on its loaders, where
    a field's own load (`NodeBase._load`) finds it too."""
    loaders = info.context.loaders
    parts = loaders.parts
    if parts is None:
        by_kind = NodeBase.by_kind
        tables = {type_name(k): t.field_attributes for k, t in by_kind.items()}
        for node_type in by_kind.values():
            tables.update(node_type.carried)
        by_type = prefetch.operation_parts(info, tables)
        parts = loaders.parts = {
            kind: _with_carried(by_type, type_name(kind), node_type.carried)
            for kind, node_type in by_kind.items()
        }
    return parts.get(kind)


def _with_carried(
    by_type: prefetch.Parts, name: str, carried: Mapping[str, FieldAttributes]
) -> frozenset[str] | None:
    """What reads of a node type's items ask for: its own fields' attributes and those its
    carried types' fields read (None, whole items, when either is not known)."""
    part = by_type.get(name)
    for carried_name in carried:
        extra = by_type.get(carried_name)
        if part is None or extra is None:
            return None
        part |= extra
    return part


def then(value: Any, apply: Callable[[Any], T]) -> Any:
    """`apply(value)`, now if `value` is plain, later if it is a coroutine (`NodeBase.get`'s
    awaitables are; the exact type check is far cheaper than `inspect.isawaitable`)."""
    if isinstance(value, CoroutineType):
        awaitable = value

        async def later() -> T:
            return apply(await awaitable)

        return later()
    return apply(value)
