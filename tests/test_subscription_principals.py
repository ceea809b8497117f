"""Subscriptions and who holds them: a caller's share of the process's slots (per token
subject, or per address for anonymous clients), and a subscription that ends with its
token (a websocket closed with 4401, an SSE stream ended UNAUTHENTICATED). Both backends."""

from __future__ import annotations

import time

from support import (
    AUTH,
    SSE,
    bearer,
    hs256,
    live,
    mutate,
    refusal,
    subscriber,
    until,
)

from graph_api.http.app import EXPIRED_CLOSE

WATCH = 'subscription { teacherChanged(id: "t1") { kind teacher { name } } }'
CREATE_T1 = 'mutation { createTeacher(input: {id: "t1", name: "Ada"}) { teacher { id } } }'


def staff() -> dict[str, str]:
    """An admin's token, made when used (a token made at import expires in a long run)."""
    return bearer(hs256())


LIFETIME = 6  # seconds a short-lived token lives: time to subscribe and hear one event


def short_lived() -> dict[str, str]:
    return bearer(hs256(exp=int(time.time()) + LIFETIME))


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


def test_a_websocket_is_closed_when_its_token_expires(endpoint: str) -> None:
    with (
        live(endpoint, **AUTH) as (client, services),
        subscriber(client, services, short_lived()) as sub,
    ):
        sub.subscribe("t", WATCH)
        mutate(client, CREATE_T1, headers=staff())
        assert sub.event("t")["teacherChanged"]["kind"] == "CREATED"  # while the token lives
        closed = sub.closed()  # then the server closes, at `exp`
        assert closed.code == EXPIRED_CLOSE and "expired" in closed.reason
        until(lambda: services.events.hub.size == 0, "the subscription to end")


def test_an_sse_subscription_ends_when_its_token_expires(endpoint: str) -> None:
    with live(endpoint, **AUTH) as (client, services):
        stream = SSE(client, WATCH, short_lived())
        until(lambda: services.events.hub.size == 1, "the SSE subscription")
        mutate(client, CREATE_T1, headers=staff())
        stream.join()  # it ends by itself, at `exp`
        first, last = stream.data
        assert first["data"]["teacherChanged"]["kind"] == "CREATED"
        assert [e["extensions"]["code"] for e in last["errors"]] == ["UNAUTHENTICATED"]
        assert services.events.hub.size == 0
