"""The event pipeline of one API instance, started and stopped with the app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from graph_api.events.changes import Change
from graph_api.events.derive import derive
from graph_api.events.hub import Hub
from graph_api.settings import Settings


class LiveEvents:
    """Stream reader (when this instance holds the lease) -> broker -> this hub."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.hub = Hub(
            max_subscriptions=settings.max_subscriptions,
            queue_limit=settings.subscription_queue,
        )

    async def publish(self, changes: Sequence[Change]) -> None:
        """What the stream reader hands over: the events of a batch of changes."""
        events = derive(changes)
        if events:
            self.hub.deliver(events)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[LiveEvents]:
        """The pipeline while the app serves; subscriptions end (complete) when it stops."""
        try:
            yield self
        finally:
            self.hub.end_all()
