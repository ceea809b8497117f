"""Per-request context: the request's loaders, ledger and table handle."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from strawberry.types import Info as StrawberryInfo

from graph_api.auth import Authenticator, AuthResult
from graph_api.cursors import Cursors
from graph_api.events.live import LiveEvents
from graph_api.settings import Settings
from graph_api.store.client import Dynamo
from graph_api.store.ledger import Ledger
from graph_api.store.loaders import Loaders
from graph_api.store.table import Table


@dataclass(frozen=True)
class Services:
    """What lives as long as the process: settings, the DynamoDB client, the cursor key."""

    settings: Settings
    dynamo: Dynamo
    cursors: Cursors
    auth: Authenticator
    events: LiveEvents

    @classmethod
    def create(cls, settings: Settings) -> Services:
        dynamo = Dynamo(settings)
        return cls(
            settings,
            dynamo,
            Cursors(settings.cursor_secret),
            Authenticator(settings),
            LiveEvents(settings, dynamo),
        )

    def close(self) -> None:
        self.dynamo.close()


@dataclass
class Context:
    request_id: str
    services: Services
    ledger: Ledger
    table: Table
    loaders: Loaders
    auth: AuthResult = field(default_factory=AuthResult)

    @classmethod
    def create(cls, services: Services, request_id: str, auth: AuthResult | None = None) -> Context:
        ledger, table, loaders = _scope(services)
        return cls(request_id, services, ledger, table, loaders, auth or AuthResult())

    def for_operation(self) -> Context:
        """A context of its own for one operation of a connection (a websocket carries
        several subscriptions): same caller, its own loaders, ledger and deadline."""
        return Context.create(self.services, self.request_id, self.auth)

    def renew(self) -> None:
        """A fresh scope for the next event of a subscription: loaders that read the base
        table strongly (the event says the write is done), a new ledger and deadline."""
        self.ledger, self.table, self.loaders = _scope(self.services)
        self.loaders.consistent = True

    @property
    def cursors(self) -> Cursors:
        return self.services.cursors


def _scope(services: Services) -> tuple[Ledger, Table, Loaders]:
    settings = services.settings
    ledger = Ledger()
    table = Table(
        services.dynamo,
        settings.table,
        ledger=ledger,
        max_in_flight=settings.max_concurrency,
        deadline=time.monotonic() + settings.deadline_seconds,
    )
    return ledger, table, Loaders(table, naive=settings.naive)


Info = StrawberryInfo[Context, None]
