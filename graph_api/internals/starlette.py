"""Starlette's undocumented attributes that graph_api relies on (`graph_api.internals`).

Starlette documents a response's `headers` argument and a mutable `headers` mapping, but not
the list of raw header fields under them, which keeps repeated fields and their order: the
rate limit's `RateLimit-Policy` and `RateLimit` fields go there (graph/engine/throttle.py), and the
sub-response's fields are carried over to the answer (http/endpoint.py), as Strawberry's own view
carries them.
"""

from __future__ import annotations

from starlette.responses import Response

__all__ = ["header_fields"]


def header_fields(response: Response) -> list[tuple[bytes, bytes]]:
    """The response's header fields, as the (name, value) byte pairs it will send: the live
    list (`MutableHeaders.raw`), which an append or extend changes."""
    return response.headers.raw
