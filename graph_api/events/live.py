"""The event pipeline of one API instance, started and stopped with the app."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from graph_api.errors import Unavailable
from graph_api.events.changes import Change
from graph_api.events.derive import derive
from graph_api.events.hub import Group, Hub, Pace, Subscription
from graph_api.settings import Settings
from graph_api.store.client import Dynamo

if TYPE_CHECKING:  # imported by `running`: a server that never runs the pipeline (Lambda)
    # does not load the stream reader, nor Redis's client for the broker
    from graph_api.events.broker import Broker
    from graph_api.events.reader import StreamReader

# Why a server without a running pipeline refuses subscriptions (no lifespan ran: Lambda).
NOT_RUNNING = (
    "this server does not run the event pipeline, so it serves no subscriptions (on Lambda"
    " behind an HTTP API a connection cannot stay open: run the API in a container)"
)

# Why several worker processes with the in-process broker refuse subscriptions: only the
# process holding the stream's lease would hear anything.
NO_SHARED_BROKER = (
    "this server runs several worker processes, which share events only through a broker:"
    " set GRAPH_API_EVENTS_BROKER=redis://... or serve with --workers 1"
)

# Why an instance with the in-process broker refuses subscriptions while another instance
# reads the table's stream: none of its events would reach this process.
ANOTHER_READER = (
    "another server instance reads this table's change stream, and this one shares events"
    " only within its process (GRAPH_API_EVENTS_BROKER=memory), so no event would reach"
    " this subscription: run one instance, or set GRAPH_API_EVENTS_BROKER=redis://... for"
    " several; subscribe again later (this instance reads once the other stops)"
)


# Why subscriptions are refused while the stream reader is down (it stopped on an error this
# server did not expect, and starts again after a pause).
READER_DOWN = (
    "this server's change stream reader stopped on an unexpected error and is starting"
    " again, so no event would reach this subscription; subscribe again shortly"
)
# The reader starts again after this, doubling up to the most while it keeps failing.
RESTART_SECONDS = 1.0
RESTART_MOST_SECONDS = 60.0

log = logging.getLogger(__name__)


class LiveEvents:
    """Stream reader (when this instance holds the lease) -> broker -> this hub.

    Every instance listens to the broker; the one that holds the stream's lease publishes.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.reader: StreamReader | None = None  # while running
        self.hub = Hub(
            max_subscriptions=settings.max_subscriptions,
            queue_limit=settings.subscription_queue,
            max_per_holder=settings.max_subscriptions_per_principal,
        )
        self.broker: Broker | None = None  # while running
        self._refusal: str | None = NOT_RUNNING
        # Whether this server runs a reader (`running`, not with several workers and the
        # in-process broker), and why it is down when it is (None: it runs).
        self.reads = False
        self.reader_down: str | None = None
        self._standby_refuses = False  # the in-process broker: a standby reader refuses

    def subscribe(
        self,
        topics: Sequence[str],
        group: Group | None = None,
        pace: Pace | None = None,
        holder: str | None = None,
    ) -> Subscription:
        """A subscription to `topics` (one of `group`'s, a websocket's; its operation's
        `pace`; `holder`'s, counted against its limit), or UNAVAILABLE saying why this
        server has none."""
        if self._refusal is not None:
            raise Unavailable(self._refusal)
        return self.hub.subscribe(topics, group, pace, holder)

    def _standby(self, standby: bool) -> None:
        """The reader found another instance holding the lease (True), or took it (False):
        subscriptions are refused, and those held ended with the reason, while no event
        can reach them."""
        if standby:
            self._refusal = ANOTHER_READER
            self.hub.end_all(Unavailable(ANOTHER_READER))
        elif self._refusal == ANOTHER_READER:
            self._refusal = None

    async def publish(self, changes: Sequence[Change]) -> None:
        """What the stream reader hands over: the events of a batch of changes."""
        events = derive(changes)
        if events and self.broker is not None:
            await self.broker.publish(events)

    def reader_problem(self) -> str | None:
        """Why this server's stream reader is not doing its job, or None (`/readyz`)."""
        reader = self.reader
        if not self.reads or reader is None:
            return None  # no reader here (Lambda, several workers without a broker)
        if self.reader_down is not None:
            return self.reader_down
        if reader.holding and not reader.reading.is_set():
            return "the change stream reader holds the lease but is not reading (see the log)"
        silent = reader.silent_for()
        if silent > reader.stale_after:
            return (
                f"the change stream reader has not heard DynamoDB answer for {silent:.0f} s"
                " (see the log)"
            )
        return None

    async def _keep_reading(self, reader: StreamReader) -> None:
        """Run the reader; when it dies of an error it did not expect, log it (with its
        traceback the first time only), refuse subscriptions and end those held (no event
        would reach them), and start it again after a pause that grows while it keeps dying."""
        pause, crashes = RESTART_SECONDS, 0
        while True:
            started = time.monotonic()
            try:
                await reader.run()
                return
            except Exception as error:  # cancellation (the app stopping) is not caught
                if time.monotonic() - started > RESTART_MOST_SECONDS:
                    pause = RESTART_SECONDS  # it had been running well: a fresh failure
                crashes += 1
                log.error(
                    "the change stream reader stopped (its lease is released): %s: %s;"
                    " starting it again in %g s",
                    type(error).__name__,
                    error,
                    pause,
                    exc_info=crashes == 1,
                )
                self.reader_down = (
                    f"the change stream reader stopped on {type(error).__name__};"
                    f" it starts again in {pause:g} s (see the log)"
                )
                self._refusal = READER_DOWN
                self.hub.end_all(Unavailable(READER_DOWN))
                await asyncio.sleep(pause)
                pause = min(2 * pause, RESTART_MOST_SECONDS)
                self.reader_down = None
                self._refusal = ANOTHER_READER if reader.standby and self._standby_refuses else None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[LiveEvents]:
        """The pipeline while the app serves: the broker, and the stream reader, which
        reads while this instance holds the lease. Subscriptions complete when it stops."""
        from graph_api.events.broker import make_broker
        from graph_api.events.reader import StreamReader
        from graph_api.store.streams_client import Streams  # the reader's own: off the request path

        # A broker for each run: an app's lifespan may run more than once (tests, reloads).
        broker = self.broker = make_broker(self.settings)
        broker.listen(self.hub.deliver, self.hub.gap)
        await broker.start()
        alone = self.settings.workers > 1 and self.settings.events_broker == "memory"
        # Clients of its own: the reader's polls and lease writes never take a thread or a
        # connection a GraphQL request waits for.
        streams, dynamo = Streams(self.settings), Dynamo(self.settings)
        # With the in-process broker, only the lease holder's subscribers hear events.
        standby = self._standby if self.settings.events_broker == "memory" else None
        self._standby_refuses = standby is not None
        reader = StreamReader(self.settings, dynamo, streams, self.publish, on_standby=standby)
        task = None
        if not alone:
            task = asyncio.create_task(self._keep_reading(reader), name="stream reader")
        self.reader, self.reads, self.reader_down = reader, not alone, None
        self._refusal = NO_SHARED_BROKER if alone else None
        try:
            yield self
        finally:
            self._refusal = NOT_RUNNING
            self.hub.end_all()
            if task is not None:
                task.cancel()  # releases the lease: another instance takes over at once
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self.reader, self.reads = None, False
            await streams.aclose()
            await dynamo.aclose()
            await broker.close()
            self.broker = None
