"""The probes: `/healthz` (liveness: the process answers) and `/readyz` (readiness: it can
serve, so a load balancer, ECS or Kubernetes sends it traffic).

Ready is 200 `{"status": "ready"}` when the table answers a GetItem of a key that never
holds an item (one read capacity unit at most, allowed by the function's IAM policy) within
`TABLE_SECONDS`, and, where this server runs a change stream reader, the reader runs and
is not stuck: holding the lease but not reading, or silent too long (`stream_problem`).
Otherwise 503 with `{"status": "unavailable", "reason": ...}`. The table's answer is kept
`CACHE_SECONDS`, and probes that arrive meanwhile share one call: probes cannot load
DynamoDB.
"""

from __future__ import annotations

import asyncio
import logging
import time

from botocore.exceptions import ClientError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from graph_api.errors import Unavailable
from graph_api.events.live import LiveEvents
from graph_api.graph.engine.context import Services

log = logging.getLogger(__name__)

CACHE_SECONDS = 1.5
TABLE_SECONDS = 2.0
# No item has this key: the model's keys are `TYPE#id` pairs (graph_api/model/keys.py).
_PROBE_KEY = {"PK": {"S": "readyz"}, "SK": {"S": "readyz"}}
_NO_STORE = {"cache-control": "no-store"}


async def healthz(_: Request) -> Response:
    return JSONResponse({"status": "ok"}, headers=_NO_STORE)


def stream_problem(events: LiveEvents) -> str | None:
    """Why this server's subscriptions would not hear events, or None: its stream reader
    died and is starting again, holds the lease but does not read, or has not heard
    DynamoDB answer for a while (`LiveEvents.reader_problem`). A reader on standby (another
    instance holds the lease) is fine while it keeps trying the lease."""
    return events.reader_problem()


class Readiness:
    """`/readyz` of one app (see the module)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._checked_at = -CACHE_SECONDS
        self._table_problem: str | None = None
        self._pending: asyncio.Task[str | None] | None = None

    async def respond(self, _: Request) -> Response:
        reason = await self.table_problem() or stream_problem(self.services.events)
        if reason is None:
            return JSONResponse({"status": "ready"}, headers=_NO_STORE)
        return JSONResponse(
            {"status": "unavailable", "reason": reason}, status_code=503, headers=_NO_STORE
        )

    async def table_problem(self) -> str | None:
        """Why the table does not answer (None: it does), at most `CACHE_SECONDS` old."""
        if time.monotonic() - self._checked_at < CACHE_SECONDS:
            return self._table_problem
        pending = self._pending
        if (
            pending is None
            or pending.done()
            or pending.get_loop() is not asyncio.get_running_loop()
        ):
            pending = self._pending = asyncio.create_task(self._ask_table())
        problem = await asyncio.shield(pending)
        self._table_problem, self._checked_at = problem, time.monotonic()
        return problem

    async def _ask_table(self) -> str | None:
        table = self.services.settings.table
        params = {"TableName": table, "Key": _PROBE_KEY, "ProjectionExpression": "PK"}
        try:
            async with asyncio.timeout(TABLE_SECONDS):
                await self.services.dynamo.call("GetItem", params, None)
        except TimeoutError:
            return f"table {table}: DynamoDB did not answer within {TABLE_SECONDS:g} s"
        except Unavailable as error:
            return f"table {table}: {error}"
        except ClientError as error:  # refused: no such table, no permission
            return f"table {table}: {error.response.get('Error', {}).get('Code', 'refused')}"
        except Exception:
            log.exception("the readiness probe's GetItem failed unexpectedly")
            return f"table {table}: unexpected error (see the log)"
        return None
