"""Content negotiation for `/graphql` (GraphQL over HTTP, "Accept"): which JSON type a
response is in, and whether it is a stream (GraphQL over SSE) instead.

Each type's quality is that of the most specific media range naming it (RFC 9110, 12.5.1):
`application/json;q=0, */*` does not accept `application/json`. Wildcards stand for
`application/json` only: `*/*` never means a stream, nor the newer
`application/graphql-response+json`.

- JSON: `application/graphql-response+json` when the client accepts it at least as much as
  `application/json`; otherwise `application/json`, which also answers a client that
  accepts neither (as the spec allows instead of a 406).
- A stream: a subscription whenever the client accepts `text/event-stream`; a query or a
  mutation only when the client prefers `text/event-stream` to every JSON type (a higher
  quality), as graphql-sse's client does, naming nothing else. urql's default Accept names
  the JSON types and `text/event-stream` alike: its queries and mutations get JSON.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

GRAPHQL_RESPONSE_JSON = "application/graphql-response+json"
JSON = "application/json"
EVENT_STREAM = "text/event-stream"


class Stream(enum.Enum):
    NEVER = "never"  # text/event-stream not accepted: JSON only, a subscription refused
    SUBSCRIPTIONS = "subscriptions"  # accepted, JSON preferred at least as much
    ALWAYS = "always"  # preferred: every operation answers as a stream


@dataclass(frozen=True, slots=True)
class Negotiated:
    media_type: str  # the JSON type of a response that is not a stream
    stream: Stream


# The media ranges that name each type, most specific first.
_RANGES = {
    GRAPHQL_RESPONSE_JSON: (GRAPHQL_RESPONSE_JSON,),
    JSON: (JSON, "application/*", "*/*"),
    EVENT_STREAM: (EVENT_STREAM,),
}


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value)))
            except ValueError:
                return 0.0
    return 1.0


def _qualities(accept: str) -> dict[str, float]:
    """The quality of each media range the header names (the highest, if named twice)."""
    named: dict[str, float] = {}
    for entry in accept.split(","):
        media_range, *params = entry.split(";")
        media_range = media_range.strip().lower()
        if media_range:
            named[media_range] = max(named.get(media_range, 0.0), _quality(params))
    return named


def _quality_of(media_type: str, named: dict[str, float]) -> float:
    for media_range in _RANGES[media_type]:
        if media_range in named:
            return named[media_range]
    return 0.0


# A process meets few distinct Accept headers (its clients' libraries'), and every request
# asks twice (its response's type, whether it streams): the answers of the short ones are
# kept, so a request's header is parsed once per process, not twice per request. A bound
# in entries and in bytes (at most CACHED_ACCEPTS x CACHED_ACCEPT_LENGTH characters).
CACHED_ACCEPTS = 64
CACHED_ACCEPT_LENGTH = 256


def negotiate(accept: str | None) -> Negotiated:
    """What a request with this Accept header is answered in (see the module)."""
    if accept is None or len(accept) <= CACHED_ACCEPT_LENGTH:
        return _negotiate_cached(accept)
    return _negotiate(accept)


def _negotiate(accept: str | None) -> Negotiated:
    named = _qualities(accept or "")
    response_json = _quality_of(GRAPHQL_RESPONSE_JSON, named)
    json = _quality_of(JSON, named)
    media_type = GRAPHQL_RESPONSE_JSON if response_json > 0 and response_json >= json else JSON
    events = _quality_of(EVENT_STREAM, named)
    if events <= 0:
        stream = Stream.NEVER
    elif events > max(response_json, json):
        stream = Stream.ALWAYS
    else:
        stream = Stream.SUBSCRIPTIONS
    return Negotiated(media_type, stream)


_negotiate_cached = functools.lru_cache(maxsize=CACHED_ACCEPTS)(_negotiate)


def response_media_type(accept: str | None) -> str:
    """The JSON type to answer in (refusals, errors and results that are not streams)."""
    return negotiate(accept).media_type
