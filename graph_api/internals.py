"""Every private attribute of a library that graph_api touches, each behind one accessor.

`tests/test_internals.py` pins each one: an upgrade that moves it fails there, not in a
request.
"""

from __future__ import annotations

from typing import Any

from graphql import GraphQLResolveInfo
from strawberry.types import Info
from strawberry.types.field import StrawberryField


def strawberry_info(raw: GraphQLResolveInfo[Any], field: StrawberryField) -> Info[Any, Any]:
    """Strawberry's `Info` for a resolver, built as its schema converter builds it."""
    return Info(_raw_info=raw, _field=field)
