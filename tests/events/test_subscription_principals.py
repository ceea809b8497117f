"""Subscriptions and who holds them: a caller's share of the process's slots (per token
subject, or per address for anonymous clients), and a subscription that ends with its
token (a websocket closed with 4401, an SSE stream ended UNAUTHENTICATED). Both backends."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from subscription_writes import SSE
from support import AUTH, bearer, hs256, live, mutate, refusal, subscriber, until

from graph_api.graph.auth.tokens import LEEWAY
from graph_api.http.websocket import EXPIRED_CLOSE

WATCH = 'subscription { teacherChanged(id: "t1") { kind teacher { name } } }'
CREATE_T1 = 'mutation { createTeacher(input: {id: "t1", name: "Ada"}) { teacher { id } } }'


def staff() -> dict[str, str]:
    """An admin's token, made when used (a token made at import expires in a long run)."""
    return bearer(hs256())


# A token already past its `exp`, accepted for LEFT seconds more (the leeway): generous, for
# a busy machine, to connect, subscribe and hear one event; then its subscriptions end.
LEFT = 15


def nearly_expired(form: Callable[[int], Any] = int) -> tuple[dict[str, str], float]:
    """An admin's token past its `exp` (written as `form` writes it), and when it stops
    being accepted."""
    exp = int(time.time()) - LEEWAY + LEFT
    return bearer(hs256(exp=form(exp))), float(exp + LEEWAY)


def watch(n: int) -> str:
    return f'subscription {{ studentChanged(id: "s{n}") {{ kind }} }}'


def test_anonymous_sockets_from_one_address_share_one_callers_slots(endpoint: str) -> None:
    limits = {"max_subscriptions_per_principal": 3, "max_subscriptions_per_connection": 2}
    with (
        live(endpoint, **AUTH, **limits) as (client, services),
        subscriber(client, services) as first,
        subscriber(client, services) as second,
    ):
        hub = services.events.hub
        first.subscribe("1", watch(1))
        first.subscribe("2", watch(2))
        second.subscribe("3", watch(3))
        second.send("4", watch(4))  # a fourth from the same address, on another socket
        _, error = refusal(second, "4")
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "limit": 3}
        assert "GRAPH_API_MAX_SUBSCRIPTIONS_PER_PRINCIPAL" in error["message"]
        stream = SSE(client, watch(5))  # the same caller over SSE
        stream.join()
        assert [e["extensions"]["code"] for e in stream.data[0]["errors"]] == ["BAD_USER_INPUT"]
        assert hub.size == 3
        # Someone else (a signed-in caller) is not locked out by them.
        with subscriber(client, services, staff()) as other:
            other.subscribe("a", WATCH)
            other.subscribe("b", watch(6))
            assert hub.size == 5
            mutate(client, CREATE_T1, headers=staff())
            assert other.event("a")["teacherChanged"]["kind"] == "CREATED"
        first.complete("1")  # a slot freed is the caller's again
        until(lambda: hub.size == 2, "the completed subscription and the other caller's to end")
        second.subscribe("4", watch(4))


# PyJWT accepts `exp` as a JSON number or as a string of one: a string's subscription lived on
# forever, read only as a number.
@pytest.mark.parametrize("form", [int, str], ids=["exp a number", "exp a string"])
def test_subscriptions_end_when_their_token_stops_being_accepted(
    endpoint: str, form: Callable[[int], Any]
) -> None:
    """A websocket and an SSE stream at once (the wait is paid once), with a token past its
    `exp` but within the leeway: accepted over HTTP and by both streams, which hear events
    until the token stops being accepted, then end (4401; UNAUTHENTICATED), as HTTP stops
    accepting it."""
    token, ends = nearly_expired(form)
    with live(endpoint, **AUTH) as (client, services):
        hub = services.events.hub
        stream = SSE(client, WATCH, token)
        with subscriber(client, services, token) as sub:
            sub.subscribe("t", WATCH)
            until(lambda: hub.size == 2, "the SSE subscription")
            mutate(client, CREATE_T1, headers=token)  # HTTP accepts it too
            assert sub.event("t")["teacherChanged"]["kind"] == "CREATED"
            closed = sub.closed()
            assert closed.code == EXPIRED_CLOSE and "expired" in closed.reason
            assert time.time() > ends - 1  # not before: at once would be 15 s early
        stream.join()  # it ends by itself too
        first, last = stream.data
        assert first["data"]["teacherChanged"]["kind"] == "CREATED"
        assert [e["extensions"]["code"] for e in last["errors"]] == ["UNAUTHENTICATED"]
        until(lambda: hub.size == 0, "the subscriptions to end")
        # ... and HTTP no longer accepts it either.
        refused = client.post("/graphql", json={"query": CREATE_T1}, headers=token).json()
        assert [e["extensions"]["code"] for e in refused["errors"]] == ["UNAUTHENTICATED"]
