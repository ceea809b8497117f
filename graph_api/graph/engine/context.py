"""Per-request context: the request's loaders, ledger and table handle."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from strawberry.types import Info as StrawberryInfo

from graph_api import telemetry
from graph_api.events.hub import Group, Pace
from graph_api.events.live import LiveEvents
from graph_api.graph.auth.tokens import Authenticator, AuthResult
from graph_api.graph.engine.budgets import Limiter, Throttle
from graph_api.model.cursors import Cursors
from graph_api.model.keys import Kind
from graph_api.settings import Settings
from graph_api.store.client import Dynamo
from graph_api.store.layout import Layout
from graph_api.store.ledger import Ledger
from graph_api.store.loaders import Loaders
from graph_api.store.table import Table

if TYPE_CHECKING:  # the plan's modules import the schema's types, which import this one
    from graph_api.graph.engine.plan.operation import OperationPlan

EVENT_SCOPES = 256  # events whose loaders are kept: those subscribers are resolving now


@dataclass(frozen=True)
class Services:
    """What lives as long as the process: settings, the DynamoDB client, the cursor key."""

    settings: Settings
    dynamo: Dynamo
    cursors: Cursors
    auth: Authenticator
    events: LiveEvents
    _event_scopes: OrderedDict[Hashable, tuple[Ledger, Table, Loaders]] = field(
        default_factory=OrderedDict, repr=False
    )
    # The callers' buckets of cost points (graph/engine/budgets.py); None: no rate limits.
    limiter: Limiter | None = None
    # Whether `graph-api migrate` is moving location entries into shards (store/layout.py).
    layout: Layout = field(default_factory=Layout, repr=False)

    @classmethod
    def create(cls, settings: Settings) -> Services:
        telemetry.enable(settings)
        dynamo = Dynamo(settings)
        return cls(
            settings,
            dynamo,
            Cursors(settings.cursor_secret),
            Authenticator(settings),
            LiveEvents(settings),
            limiter=Limiter.from_settings(settings),
        )

    def close(self) -> None:
        """Close what is not a loop's: each loop's DynamoDB client closes with its loop
        (store/client.py), or with `await dynamo.aclose()`."""
        self.auth.close()

    def event_scope(self, event: Hashable) -> tuple[Ledger, Table, Loaders]:
        """The loaders (and their ledger and table) that resolve `event` for every
        subscriber; the last EVENT_SCOPES events' are kept."""
        scope = self._event_scopes.get(event)
        if scope is None:
            scope = self._event_scopes[event] = _scope(self)
            scope[2].consistent = True
            # Its subscribers' operations differ, and what a read of a type asks for is one
            # operation's (`nodes.parts_of`): the event's reads are of whole items.
            scope[2].parts = dict.fromkeys(Kind)
            while len(self._event_scopes) > EVENT_SCOPES:
                self._event_scopes.popitem(last=False)
        return scope


@dataclass
class Context:
    request_id: str
    services: Services
    ledger: Ledger
    table: Table
    loaders: Loaders
    auth: AuthResult = field(default_factory=AuthResult)
    # A websocket's `connection_init` payload: Strawberry sets it only on a context that
    # has the attribute, and `on_ws_connect` reads the token from it.
    connection_params: dict[str, Any] | None = None
    # A websocket's subscriptions, which end together when one falls behind (`hub.Group`).
    subscriptions: Group | None = None
    # Where an operation's time goes: sending results, or resolving them (`hub.Pace`).
    pace: Pace = field(default_factory=Pace, repr=False)
    # The operation's plan (`graph/engine/plan/`), which the cost limit puts here once validated:
    # what every layer of the request reads of the operation.
    plan: OperationPlan | None = field(default=None, repr=False)
    # The client's address (the connection's peer), which anonymous callers are told apart by.
    client: str | None = None
    # The caller's W3C trace context (`traceparent`, `tracestate`) when tracing is on: the
    # operation's span continues the caller's trace.
    trace_headers: dict[str, str] | None = None
    # The caller's bucket as the rate limit left it; the HTTP sub-response, for its status
    # and header fields (None on a websocket).
    throttle: Throttle | None = None
    response: Any = None

    @classmethod
    def create(cls, services: Services, request_id: str, auth: AuthResult | None = None) -> Context:
        ledger, table, loaders = _scope(services)
        if auth is None:  # what no token means on this server (`Authenticator.authenticate`)
            auth = AuthResult(anonymous=services.auth.anonymous)
        return cls(request_id, services, ledger, table, loaders, auth)

    def for_operation(self) -> Context:
        """A context of its own for one operation of a connection (a websocket carries
        several subscriptions): same caller, its own loaders, ledger and deadline."""
        operation = Context.create(self.services, self.request_id, self.auth)
        operation.subscriptions = self.subscriptions
        operation.client = self.client
        operation.trace_headers = self.trace_headers
        return operation

    def renew(self, event: Hashable) -> None:
        """The scope of a subscription's next event: loaders that read the base table
        strongly (the event says the write is done), shared by every subscriber the event
        reaches, so a hundred subscribers of one class read it once."""
        self.ledger, self.table, self.loaders = self.services.event_scope(event)

    @property
    def holder(self) -> str:
        """Whom the caller's subscriptions count against: the token's subject, else the
        client's address (every anonymous client behind one address is one holder)."""
        principal = self.auth.principal
        if principal is not None and principal.subject:
            return f"sub:{principal.subject}"
        return f"addr:{self.client or '-'}"

    @property
    def requested_cost(self) -> int | None:
        """The operation's static cost, as its plan says (None: not planned), which the rate
        limit takes (`throttle`)."""
        return self.plan.cost.requested if self.plan is not None else None

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
