"""The key layout of the single table: the only module that composes or parses a key.

Every item has `PK`/`SK`; items that need a second access path also carry `GSI1PK`/`GSI1SK`,
and searchable nodes `GSI2PK`/`GSI2SK` (`schema/table.md` has the access-pattern table).
Templates are data: each entity names its prefix once, and the helpers below build keys from
validated parts only.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import NamedTuple

from graph_api.errors import BadUserInput

SEP = "#"
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")

# Attribute names of the table and its indexes.
PK, SK, GSI1PK, GSI1SK = "PK", "SK", "GSI1PK", "GSI1SK"
GSI1 = "GSI1"
GSI2PK, GSI2SK = "GSI2PK", "GSI2SK"
GSI2 = "GSI2"  # search by name: students' and teachers' names, classes' subjects
# An index's partition and sort key attributes (None: the base table's).
INDEX_KEYS: dict[str | None, tuple[str, str]] = {
    None: (PK, SK),
    GSI1: (GSI1PK, GSI1SK),
    GSI2: (GSI2PK, GSI2SK),
}


class Kind(StrEnum):
    """Node kinds; the value is the key prefix and the item's `type`."""

    STUDENT = "STUDENT"
    TEACHER = "TEACHER"
    CLASS = "CLASS"
    SPORT = "SPORT"


EMAIL = "EMAIL"
CATALOG = "CATALOG"
LEASE = "LEASE"
TODO = "TODO"
COUNT = "COUNT"
LAYOUT = "LAYOUT"
COUNTRY, STATE, CITY = "COUNTRY", "STATE", "CITY"


class Key(NamedTuple):
    """A primary key (`PK`, `SK`) of the base table. A named tuple: a read hashes each of
    its keys five times (the loader's cache and batch, the request, the answer), in C here.
    It equals a plain tuple, or an `IndexKey`, of the same two strings: keep each kind in
    containers of its own (every loader and lookup does), and write `as_item()`, not the
    key, wherever a key is serialized."""

    pk: str
    sk: str

    def as_item(self) -> dict[str, str]:
        return {PK: self.pk, SK: self.sk}


class IndexKey(NamedTuple):
    """A key of the inverted index GSI1."""

    pk: str
    sk: str

    def as_item(self) -> dict[str, str]:
        return {GSI1PK: self.pk, GSI1SK: self.sk}


class SearchKey(NamedTuple):
    """A key of the search index GSI2: where a node is found by its name's prefix."""

    pk: str
    sk: str

    def as_item(self) -> dict[str, str]:
        return {GSI2PK: self.pk, GSI2SK: self.sk}


@dataclass(frozen=True, slots=True)
class Range:
    """A key condition on one partition: `pk = :pk AND begins_with(sk, :prefix)`."""

    index: str | None  # None: the base table
    pk: str
    prefix: str

    @property
    def pk_name(self) -> str:
        return INDEX_KEYS[self.index][0]

    @property
    def sk_name(self) -> str:
        return INDEX_KEYS[self.index][1]

    def at(self, id_: str) -> Key:
        """The position of node `id_` in this base-table range: its `SK` in the partition."""
        return Key(self.pk, f"{self.prefix}{check_id(id_)}")

    @property
    def label(self) -> str:
        """A stable name of the range, used to bind cursors to it."""
        return f"{self.index or 'table'}:{self.pk}:{self.prefix}"


def check_id(value: str, field: str = "id") -> str:
    """Return `value` if it is a valid id, else raise BAD_USER_INPUT naming `field`."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise BadUserInput(
            f"{field} must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'", field=field
        )
    return value


def _ref(kind: Kind, id_: str) -> str:
    if type(id_) is str:  # hashable: the cache can hold it
        return _checked_ref(kind, id_)
    return f"{kind}{SEP}{check_id(id_)}"  # raises BAD_USER_INPUT


@lru_cache(maxsize=4096)
def _checked_ref(kind: Kind, id_: str) -> str:
    # Cached: a page of 30 students builds each student's reference for each of its maps.
    # An invalid id raises, and a raise is never cached.
    return f"{kind}{SEP}{check_id(id_)}"


def node(kind: Kind, id_: str) -> Key:
    """The node item of `kind` `id_`; nodes live at the top of their own partition."""
    ref = _ref(kind, id_)
    return Key(ref, ref)


def node_catalog(kind: Kind, id_: str) -> IndexKey:
    """Where a teacher, class or sport node is listed in its kind's catalog."""
    return IndexKey(f"{CATALOG}{SEP}{kind}", _ref(kind, id_))


def catalog(kind: Kind) -> Range:
    return Range(GSI1, f"{CATALOG}{SEP}{kind}", f"{kind}{SEP}")


def partition(kind: Kind, id_: str) -> str:
    """The partition (item collection) of a node: the node and the edges that point at it."""
    return _ref(kind, id_)


def edge(owner: Kind, owner_id: str, target: Kind, target_id: str) -> tuple[Key, IndexKey]:
    """An edge item: stored in its target's partition (beside the target node, so a roster
    and its node are one Query) and inverted under its owner in GSI1."""
    owner_ref, target_ref = _ref(owner, owner_id), _ref(target, target_id)
    return Key(target_ref, owner_ref), IndexKey(owner_ref, target_ref)


def roster(target: Kind, target_id: str, owner: Kind) -> Range:
    """The edges pointing at `target` from `owner` nodes: a class's or a sport's students."""
    return Range(None, _ref(target, target_id), f"{owner}{SEP}")


@lru_cache(maxsize=4096)
def entries(owner: Kind, owner_id: str, target: Kind) -> Range:
    """An owner's map of `target` entries (a student's classes), named as a range of the
    owner's partition: it binds cursors, whose positions are the entries' `SK`s.

    Cached: each map page names its range, and a frozen Range costs a microsecond to build
    (Q1 of `make bench`: 60 a request)."""
    return Range(None, _ref(owner, owner_id), f"{target}{SEP}")


def entry(owner: Kind, owner_id: str, target: Kind, target_id: str) -> Key:
    """Where an entry of an owner's map sits in its `entries` range (a cursor position)."""
    return Key(_ref(owner, owner_id), _ref(target, target_id))


def id_of(key_value: str) -> str:
    """The id in a node reference such as `STUDENT#abc`."""
    return key_value.rsplit(SEP, 1)[1]


def kind_of(key_value: str) -> str:
    return key_value.split(SEP, 1)[0]


def normalize_place(value: str) -> str:
    """A location as a key part: NFC, trimmed, case-folded, blanks to `_`, `#` and `%` escaped.

    Escaping keeps a place name from forging a deeper level of the hierarchy; NFC makes a
    decomposed "Que\u0301bec" the same key as "Québec".
    """
    folded = "_".join(unicodedata.normalize("NFC", value).strip().casefold().split())
    return folded.replace("%", "%25").replace(SEP, "%23")


# -- the location index in shards ----------------------------------------------------------
# Every write of a student rewrites its GSI1 entry (the index projects ALL), so one country's
# partition took all its students' writes: 96 % of a partition's write limit at 10 M
# students (schema/table.md, *Hot partitions*). A country's students are split by *state*
# over LOCATION_SHARDS partitions `COUNTRY#<c>#<n>` (n = crc32 of the normalized state, mod
# N): a state's and a city's students stay in one partition, so their pages are one Query;
# a country's page reads the N shards and merges them in `GSI1SK` order.
LOCATION_SHARDS = 4


def location_shard(country: str, state: str) -> str:
    """The GSI1 partition of the students whose home is in `state` of `country`."""
    shard = zlib.crc32(normalize_place(state).encode()) % LOCATION_SHARDS
    return f"{COUNTRY}{SEP}{normalize_place(country)}{SEP}{shard}"


def home_location(student_id: str, country: str, state: str, city: str) -> IndexKey:
    """A student's place in the location hierarchy (GSI1 keys of the student item, present
    only when the student has a home): its state's shard of the country, state → city sort
    key (unique in the country: it ends with the student)."""
    return IndexKey(
        location_shard(country, state),
        f"{STATE}{SEP}{normalize_place(state)}{SEP}{CITY}{SEP}{normalize_place(city)}"
        f"{SEP}{_ref(Kind.STUDENT, student_id)}",
    )


def location(country: str, state: str | None = None, city: str | None = None) -> Range:
    """Students whose home is in a country, a state of it, or a city of that state, as one
    list: `COUNTRY#<c>` and the place's sort key prefix. It names the list (its cursors are
    bound to it, a position is a `GSI1SK`); the partitions read are `location_ranges`'."""
    prefix = ""
    if state is not None:
        prefix = f"{STATE}{SEP}{normalize_place(state)}{SEP}"
        if city is not None:
            prefix += f"{CITY}{SEP}{normalize_place(city)}{SEP}"
    elif city is not None:
        raise BadUserInput("city needs its state", field="state")
    return Range(GSI1, f"{COUNTRY}{SEP}{normalize_place(country)}", prefix)


def location_ranges(
    country: str, state: str | None = None, city: str | None = None, *, unsharded: bool = False
) -> list[Range]:
    """The GSI1 ranges that hold `location(country, state, city)`: a state's (a city's)
    shard, or every shard of the country; with `unsharded`, also the country's partition
    of the layout before shards (`COUNTRY#<c>`, while `graph-api migrate` moves students
    out of it: `Layout`)."""
    listed = location(country, state, city)
    if state is not None:
        pks = [location_shard(country, state)]
    else:
        pks = [f"{listed.pk}{SEP}{n}" for n in range(LOCATION_SHARDS)]
    if unsharded:
        pks.append(listed.pk)
    return [Range(GSI1, pk, listed.prefix) for pk in pks]


def location_migration() -> Key:
    """The item that says `graph-api migrate` is moving students' location entries into
    shards: while it exists, location pages read the country's unsharded partition too."""
    return Key(f"{LAYOUT}{SEP}location", LAYOUT)


def _place_path(country: str, state: str | None = None, city: str | None = None) -> str:
    """`COUNTRY#c[#STATE#s[#CITY#c]]`, the levels of `location` as one string."""
    path = f"{COUNTRY}{SEP}{normalize_place(country)}"
    if state is not None:
        path += f"{SEP}{STATE}{SEP}{normalize_place(state)}"
        if city is not None:
            path += f"{SEP}{CITY}{SEP}{normalize_place(city)}"
    elif city is not None:
        raise BadUserInput("city needs its state", field="state")
    return path


def catalog_counter(kind: Kind) -> Key:
    """The item counting a catalog's nodes (`teachers { totalCount }`): `COUNT#CATALOG#<kind>`."""
    return Key(f"{COUNT}{SEP}{CATALOG}{SEP}{kind}", COUNT)


def location_counter(country: str, state: str | None = None, city: str | None = None) -> Key:
    """The item counting the students whose home is in a country, a state of it or a city
    of that state (`studentsByLocation { totalCount }`): one partition a place, named by
    the place names `location` normalizes."""
    return Key(f"{COUNT}{SEP}{_place_path(country, state, city)}", COUNT)


# -- counter shards: no item that every write of a kind touches -------------------------
# A counter above (catalog or place) names a *list*; its count lives in COUNTER_SHARDS items
# `<counter PK>#<n>` / `SHARD`, each node's +1 and -1 on the shard its id picks (crc32, so
# stable across processes), so the writes of one country meet on 1/N of its items, each in a
# partition of its own. `totalCount` sums the shards (and the counter's own item: the one
# item of the layout before shards, until `graph-api migrate` folds it into shard 0).
COUNTER_SHARDS = 16
SHARD = "SHARD"


def counter_shard(counter: Key, node_id: str) -> Key:
    """The shard of `counter` that node `node_id` moves: the same one for its whole life."""
    return Key(f"{counter.pk}{SEP}{zlib.crc32(node_id.encode()) % COUNTER_SHARDS}", SHARD)


def counter_shards(counter: Key) -> list[Key]:
    """Every shard of `counter`, in shard order: what `totalCount` reads and sums."""
    return [Key(f"{counter.pk}{SEP}{n}", SHARD) for n in range(COUNTER_SHARDS)]


def shard_number(counter: Key, n: int) -> Key:
    """Shard `n` of `counter` (`graph-api migrate` folds the old single item into shard 0)."""
    return Key(f"{counter.pk}{SEP}{n % COUNTER_SHARDS}", SHARD)


def counter_of(key: Key) -> Key:
    """The counter a counter item belongs to: a shard's counter, or the item itself when it
    is the counter's single item of the layout before shards (`SK = COUNT`)."""
    if key.sk == SHARD:
        return Key(key.pk.rsplit(SEP, 1)[0], COUNT)
    return key


# -- a class's (a sport's) roster count in shards ------------------------------------------
# A class's `studentCount` is ROSTER_SHARDS items in the class's own partition, between the
# node and its roster (`CLASS#c` < `CLASS#c#COUNT#<n>` < `STUDENT#…`), each enrolment on the
# shard its student's id picks: the enrolments of one class meet on 1/ROSTER_SHARDS of them
# and never on the class item, and the Query that reads a class with its roster's first page
# reads its count too. A sport's the same (`SPORT#s#COUNT#<n>`). Fewer than a list's
# counter: they are read per class a page shows.
# Eight take one class's enrolments in eight lanes (bench/README.md, `make bench-scale`). Each
# shard also carries the class's copied fields (`writes/roster_shards.py` says why).
ROSTER_SHARDS = 8


def _roster_shard_at(target: Kind, target_id: str, n: int) -> Key:
    ref = _ref(target, target_id)
    return Key(ref, f"{ref}{SEP}{COUNT}{SEP}{n}")


def roster_shard(target: Kind, target_id: str, owner_id: str) -> Key:
    """The roster shard that the relation of `owner_id` with the target moves, for its life."""
    return _roster_shard_at(target, target_id, zlib.crc32(owner_id.encode()) % ROSTER_SHARDS)


def roster_shards(target: Kind, target_id: str) -> list[Key]:
    """Every roster shard of the target, in key order: what `studentCount` reads and sums."""
    return [_roster_shard_at(target, target_id, n) for n in range(ROSTER_SHARDS)]


def roster_counted(counter: Key) -> tuple[Kind, str] | None:
    """The node whose roster a counter item counts (a roster shard's key), or None for a
    counter of a catalog or a place."""
    kind, _, id_ = counter.pk.partition(SEP)
    if kind not in (Kind.CLASS, Kind.SPORT) or not ID_PATTERN.fullmatch(id_):
        return None
    if not counter.sk.startswith(f"{counter.pk}{SEP}{COUNT}{SEP}"):
        return None
    return Kind(kind), id_


def home_counters(country: str, state: str, city: str) -> tuple[Key, Key, Key]:
    """The three counters a home moves: its country's, its state's and its city's."""
    return (
        location_counter(country),
        location_counter(country, state),
        location_counter(country, state, city),
    )


def normalize_email(email: str) -> str:
    """An email as a uniqueness key: trimmed, NFC, case-folded (and NFC again: folding can
    decompose). So "jos\u00e9@x.org", "jose\u0301@x.org" and "JOSÉ@X.ORG" are one address."""
    composed = unicodedata.normalize("NFC", email.strip())
    return unicodedata.normalize("NFC", composed.casefold())


def email_guard(email: str) -> Key:
    """The item that reserves an email address for one student (unique-field pattern)."""
    value = f"{EMAIL}{SEP}{normalize_email(email)}"
    return Key(value, EMAIL)


def stream_lease() -> Key:
    """The lease item of the table's change stream: whoever holds it is the one reader of
    the stream, and it carries the reader's checkpoints (`graph_api/events/lease.py`)."""
    return Key(f"{LEASE}{SEP}stream", LEASE)


# -- to-dos: writes whose copies are still to be finished -------------------------------
# A node whose copies did not all commit with it (a rename too large for one transaction)
# has a to-do item until its copies are written: `TODO#<shard>` / `<node ref>`. A few
# partitions, the node's reference picking one, so no partition is touched by every rename;
# the finisher reads them by Query (`todo_partitions`), never by Scan.
TODO_SHARDS = 4


def todo(kind: Kind, id_: str) -> Key:
    """The to-do item of node `id_`: at most one a node."""
    ref = _ref(kind, id_)
    return Key(f"{TODO}{SEP}{zlib.crc32(ref.encode()) % TODO_SHARDS}", ref)


def todo_partitions() -> list[Range]:
    """Every partition of to-do items, for the finisher's Queries."""
    return [Range(None, f"{TODO}{SEP}{n}", "") for n in range(TODO_SHARDS)]


# -- search by name ----------------------------------------------------------------------
# A node is found by the prefix of its name (a class: its subject) in GSI2, one partition a
# kind and first character: `NAME#STUDENT#m` / `maria$lopez#<id>`, folded (`fold_name`).
# The one table of what each kind is searched by: the node's attribute, whose name (upper
# case) also labels its GSI2 partitions. Items (`items.search_attributes`), `check` and
# `migrate` read it here.
SEARCHED = {Kind.STUDENT: "name", Kind.TEACHER: "name", Kind.CLASS: "subject"}
BLANK = "$"  # a run of blanks in a folded name: above `#` (the id follows), below the rest
# Bytes of a folded name kept in the key: the sort key (1,024 bytes) holds it and the id; a
# longer name is found by any prefix up to that length.
MAX_NAME_KEY_BYTES = 600


def _fold(value: str) -> str:
    """Case and accents away: NFKD, combining marks dropped, case-folded (folding can
    decompose again: "İ"), then NFC so that what is left (Hangul) composes again."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", value) if not unicodedata.combining(c))
    folded = unicodedata.normalize("NFKD", plain.casefold())
    return unicodedata.normalize("NFC", "".join(c for c in folded if not unicodedata.combining(c)))


def _units(folded: str) -> list[str]:
    """A folded text as key characters: each run of blanks one `$`, `%` and every other
    character at or below `$` escaped (`%23`), so that the separator `#` and the blank `$`
    sort below any character of a name."""
    units: list[str] = []
    for word in folded.split():
        if units:
            units.append(BLANK)
        units.extend(f"%{ord(c):02X}" if c <= BLANK or c == "%" else c for c in word)
    return units


def fold_name(value: str) -> str:
    """A name as a key part: folded (`_fold`), blanks trimmed and each run of them one `$`,
    escaped (`_units`), at most MAX_NAME_KEY_BYTES. "José  María" and "JOSE MARIA" are one
    key, `jose$maria`; "Ana" sorts before "Ana B", which sorts before "Anabel"."""
    units = _units(_fold(value))
    kept, size = [], 0
    for unit in units:
        size += len(unit.encode())
        if size > MAX_NAME_KEY_BYTES:
            break
        kept.append(unit)
    return "".join(kept)


def _shard(kind: Kind, folded: str) -> str:
    first = folded[:3] if folded.startswith("%") else folded[:1]
    return f"{SEARCHED[kind].upper()}{SEP}{kind}{SEP}{first}"


def name_key(kind: Kind, id_: str, name: str) -> SearchKey:
    """Where node `id_` of `kind` is found by the prefix of `name` (its subject, a class)."""
    folded = fold_name(name)
    return SearchKey(_shard(kind, folded), f"{folded}{SEP}{check_id(id_)}")


def name_prefix(kind: Kind, prefix: str) -> Range:
    """The nodes of `kind` whose name starts with `prefix`, folded as names are: one
    partition of GSI2 (the prefix's first character's). Leading blanks are ignored, trailing
    ones are kept ("ana " finds "Ana Maria", not "Anabel"). It must hold a letter or a digit
    once folded (any script: "o'" finds "O'Brien", "3" finds "3D Art"): punctuation or
    symbols alone ("%", "#", "'") are BAD_USER_INPUT, as what they would list is no search."""
    folded_text = _fold(prefix)
    if not any(c.isalnum() for c in folded_text):
        raise BadUserInput("prefix must hold at least one letter or digit", field="prefix")
    units = _units(folded_text)
    trailing = BLANK if _fold(prefix[-1:]).isspace() else ""
    folded = "".join(units) + trailing
    if len(folded.encode()) > MAX_NAME_KEY_BYTES:
        raise BadUserInput("prefix is too long once written as a key", field="prefix")
    return Range(GSI2, _shard(kind, folded), folded)
