"""The key layout of the single table: the only module that composes or parses a key.

Every item has `PK`/`SK`; items that need a second access path also carry `GSI1PK`/`GSI1SK`
(see `schema/table.md` for the access-pattern table). Templates are data: each entity names
its prefix once, and the helpers below build keys from validated parts only.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import NamedTuple

from graph_api.errors import BadUserInput

SEP = "#"
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")

# Attribute names of the table and its one index.
PK, SK, GSI1PK, GSI1SK = "PK", "SK", "GSI1PK", "GSI1SK"
GSI1 = "GSI1"


class Kind(StrEnum):
    """Node kinds; the value is the key prefix and the item's `type`."""

    STUDENT = "STUDENT"
    TEACHER = "TEACHER"
    CLASS = "CLASS"
    SPORT = "SPORT"


EMAIL = "EMAIL"
CATALOG = "CATALOG"
LEASE = "LEASE"
COUNT = "COUNT"
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


@dataclass(frozen=True, slots=True)
class Range:
    """A key condition on one partition: `pk = :pk AND begins_with(sk, :prefix)`."""

    index: str | None  # None: the base table
    pk: str
    prefix: str

    @property
    def pk_name(self) -> str:
        return GSI1PK if self.index else PK

    @property
    def sk_name(self) -> str:
        return GSI1SK if self.index else SK

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


def home_location(student_id: str, country: str, state: str, city: str) -> IndexKey:
    """A student's place in the location hierarchy (GSI1 keys of the student item, present
    only when the student has a home): country partition, state → city sort key."""
    return IndexKey(
        f"{COUNTRY}{SEP}{normalize_place(country)}",
        f"{STATE}{SEP}{normalize_place(state)}{SEP}{CITY}{SEP}{normalize_place(city)}"
        f"{SEP}{_ref(Kind.STUDENT, student_id)}",
    )


def location(country: str, state: str | None = None, city: str | None = None) -> Range:
    """Students whose home is in a country, a state of it, or a city of that state."""
    prefix = ""
    if state is not None:
        prefix = f"{STATE}{SEP}{normalize_place(state)}{SEP}"
        if city is not None:
            prefix += f"{CITY}{SEP}{normalize_place(city)}{SEP}"
    elif city is not None:
        raise BadUserInput("city needs its state", field="state")
    return Range(GSI1, f"{COUNTRY}{SEP}{normalize_place(country)}", prefix)


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
