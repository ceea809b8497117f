"""The legacy `graphql-ws` subprotocol (Apollo's `subscriptions-transport-ws`), refused in its
own words.

Strawberry speaks that protocol too, but the websocket's guarantees here (per-connection
auth and expiry, the operation limit with a code, trusted documents, the idle close, a slow
reader shed: `websocket.WebSocketHandler`) are written on graphql-transport-ws's handler; serving
the legacy one would be a second implementation of all of them, for a client library
deprecated by its authors. Offered alone, it used to get a 101 with no subprotocol, which
such clients report as a failed connection with no reason. It now gets the protocol it
asked for, one `connection_error` that says what to use instead, and a close (4406, the
code graphql-transport-ws gives an unacceptable subprotocol) with the same reason.
"""

from __future__ import annotations

import contextlib
from typing import Any

from starlette.websockets import WebSocketDisconnect

LEGACY_CLOSE = 4406
# Also the close frame's reason, which holds at most 123 bytes (RFC 6455): one byte more
# and uvicorn's websockets fails the close, the client hearing 1006 and no reason.
REFUSAL = (
    "graphql-ws (subscriptions-transport-ws) is not served:"
    " use graphql-transport-ws (graphql-ws library) or GraphQL over SSE"
)


class LegacyProtocolRefusal:
    """Strawberry's `graphql_ws_handler_class`, which it builds for a websocket that chose the
    legacy subprotocol (its arguments are ignored): refuses the connection, with a reason."""

    def __init__(self, *, websocket: Any, **_: Any) -> None:
        self.websocket = websocket

    async def handle(self) -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):  # already gone
            await self.websocket.send_json(
                {"type": "connection_error", "payload": {"message": REFUSAL}}
            )
            await self.websocket.close(LEGACY_CLOSE, REFUSAL)
