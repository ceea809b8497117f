"""Input rules for writes, and the sizes a read may ask for; each violation is BAD_USER_INPUT
naming the field."""

from __future__ import annotations

import re
import unicodedata

from graph_api.errors import BadUserInput
from graph_api.model.keys import normalize_place

MAX_NAME = 200
MAX_PLACE = 100
MAX_EMAIL = 254
# A place's key part (case-folded, escaped UTF-8) must leave room in GSI1's 1,024-byte sort
# key for the state, the city and the student: 100 characters can fold to 1,200 bytes.
MAX_PLACE_KEY_BYTES = 300
# A page's size (`first`/`last`) and a list by ids' length: the fields refuse more, and the
# operation's plan prices by them before any field runs.
DEFAULT_FIRST = 20
MAX_FIRST = 100
MAX_IDS = 100  # ids a list by ids takes (`students(ids:)`, `nodes(ids:)`)
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")


def text(value: str, field: str, maximum: int = MAX_NAME) -> str:
    """Trimmed text of 1..maximum characters: valid Unicode, no control characters."""
    trimmed = unicode_text(value, field).strip()
    if not 1 <= len(trimmed) <= maximum:
        raise BadUserInput(f"{field} must be 1-{maximum} characters", field=field)
    if any(unicodedata.category(c) == "Cc" for c in trimmed):
        raise BadUserInput(f"{field} must not contain control characters", field=field)
    return trimmed


def name(value: str, field: str = "name") -> str:
    return text(value, field, MAX_NAME)


def name_prefix(value: str, field: str = "prefix") -> str:
    """The start of a name or subject to search by: at most as long as a name, and no
    control character but blanks (tabs and newlines fold to one blank; no name holds any
    other); that it holds a letter or a digit is `keys.name_prefix`'s to say, folded."""
    if len(unicode_text(value, field)) > MAX_NAME:
        raise BadUserInput(f"{field} must be at most {MAX_NAME} characters", field=field)
    if any(unicodedata.category(c) == "Cc" and not c.isspace() for c in value):
        raise BadUserInput(f"{field} must not contain control characters", field=field)
    return value


def place(value: str, field: str) -> str:
    return _fits_a_key(text(value, field, MAX_PLACE), field)


def place_filter(value: str, field: str) -> str:
    """A place to search by: any blanks (tabs, newlines too) fold away in the key."""
    if not 1 <= len(unicode_text(value, field).strip()) <= MAX_PLACE:
        raise BadUserInput(f"{field} must be 1-{MAX_PLACE} characters", field=field)
    return _fits_a_key(value, field)


def _fits_a_key(value: str, field: str) -> str:
    if len(normalize_place(value).encode()) > MAX_PLACE_KEY_BYTES:
        raise BadUserInput(f"{field} is too long once written as a key", field=field)
    return value


def email(value: str, field: str = "email") -> str:
    """A trimmed email address in NFC (stored so; its case as sent): "jose\u0301@x.org"
    is stored as "jos\u00e9@x.org", the address it looks like."""
    trimmed = unicodedata.normalize("NFC", unicode_text(value, field).strip())
    if (
        len(trimmed) > MAX_EMAIL
        or not _EMAIL.fullmatch(trimmed)
        or any(unicodedata.category(c) == "Cc" for c in trimmed)
    ):
        raise BadUserInput(f"{field} must be an email address like name@example.org", field=field)
    return trimmed


def is_unicode_text(value: str) -> bool:
    """Whether `value` can be stored: no lone surrogate (JSON's "\\ud800" decodes to one;
    UTF-8, and so DynamoDB, cannot hold it)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def unicode_text(value: str, field: str) -> str:
    if not is_unicode_text(value):
        raise BadUserInput(f"{field} is not valid Unicode text (a lone surrogate?)", field=field)
    return value
