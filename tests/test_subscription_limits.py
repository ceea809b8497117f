"""What bounds a subscription: the query limits on its document, subscriptions per process,
auth for reads, and a server without its event pipeline. Both backends.

Each refusal is a coded error (`extensions.code`) and leaves nothing subscribed on the
server (`hub.size`); each close of a websocket has a code and a reason that names the limit.
"""

from __future__ import annotations

import time
from typing import Any

import jwt
from live_support import SSE, Subscriber, live, mutate, subscriber
from starlette.testclient import TestClient
from write_support import fresh_services

from graph_api.app import create_app
from graph_api.graph.context import Services

CHEAP = 'subscription { teacherChanged(id: "t1") { kind teacher { name } } }'
CREATE_T1 = 'mutation { createTeacher(input: {id: "t1", name: "Ada"}) { teacher { id } } }'
SECRET, ISSUER, AUDIENCE = "k" * 32, "https://issuer.test", "graph-api"
AUTH = {"jwt_secret": SECRET, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}


def refusal(sub: Subscriber, id_: str) -> tuple[str, dict[str, Any]]:
    """How the server refused operation `id_`: the message type (`error` before execution,
    `next` with errors then `complete` once it started) and the one error."""
    message = sub.next()
    assert message["id"] == id_, message
    if message["type"] == "error":
        (error,) = message["payload"]
    else:
        assert message["type"] == "next" and message["payload"]["data"] is None, message
        (error,) = message["payload"]["errors"]
        assert sub.next() == {"id": id_, "type": "complete"}
    return message["type"], error


def still_serves(client: TestClient, sub: Subscriber, services: Services) -> None:
    """The connection works after a refusal: a subscription within the limits gets events."""
    sub.subscribe("ok", CHEAP)
    mutate(client, CREATE_T1)
    assert sub.event("ok") == {"teacherChanged": {"kind": "CREATED", "teacher": {"name": "Ada"}}}


# -- the document's limits ----------------------------------------------------------------------


def test_the_depth_limit_refuses_a_subscription_before_it_subscribes(endpoint: str) -> None:
    with live(endpoint, max_depth=2) as (client, services), subscriber(client, services) as sub:
        sub.send("deep", 'subscription { classChanged(id: "c1") { class { teacher { name } } } }')
        kind, error = refusal(sub, "deep")
        assert (kind, error["extensions"]) == ("error", {"code": "BAD_USER_INPUT", "limit": 2})
        assert services.events.hub.size == 0
        still_serves(client, sub, services)


def test_the_cost_limit_refuses_a_subscription_before_it_subscribes(endpoint: str) -> None:
    with live(endpoint, max_cost=10) as (client, services), subscriber(client, services) as sub:
        # Each event would read the class and 50 students: 1 + 50.
        sub.send(
            "costly",
            'subscription { classChanged(id: "c1")'
            " { class { students(first: 50) { edges { node { name } } } } } }",
        )
        _, error = refusal(sub, "costly")
        assert error["extensions"] == {
            "code": "QUERY_TOO_COSTLY",
            "cost": {"requested": 51, "limit": 10},
        }
        assert services.events.hub.size == 0
        still_serves(client, sub, services)


def test_a_bad_id_is_bad_user_input(endpoint: str) -> None:
    with live(endpoint) as (client, services), subscriber(client, services) as sub:
        sub.send("bad", 'subscription { studentChanged(id: "no spaces!") { kind } }')
        _, error = refusal(sub, "bad")
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "id"}
        sub.send("bad-class", 'subscription { rosterChanged(classId: "") { kind } }')
        _, error = refusal(sub, "bad-class")
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "classId"}
        assert services.events.hub.size == 0


# -- how many ----------------------------------------------------------------------------------


def test_the_per_process_limit_is_unavailable(endpoint: str) -> None:
    with (
        live(endpoint, max_subscriptions=1) as (client, services),
        subscriber(client, services) as first,
        subscriber(client, services) as second,
    ):
        first.subscribe("1", CHEAP)
        second.send("2", CHEAP)
        _, error = refusal(second, "2")
        assert error["extensions"] == {"code": "UNAVAILABLE"}
        assert "limit of 1 subscriptions" in error["message"]
        stream = SSE(client, CHEAP)
        stream.join()
        (refused,) = stream.data
        assert refused["errors"][0]["extensions"] == {"code": "UNAVAILABLE"}
        assert services.events.hub.size == 1
        mutate(client, CREATE_T1)  # the one held still hears
        assert first.event("1")["teacherChanged"]["kind"] == "CREATED"


def test_a_server_without_its_pipeline_refuses_subscriptions(endpoint: str) -> None:
    """No lifespan ran (as on Lambda): nothing reads the stream, nothing is subscribed."""
    with fresh_services(endpoint) as services:
        client = TestClient(create_app(services))  # not entered: no lifespan
        with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
            sub = Subscriber(ws, services)
            sub.send("1", CHEAP)
            _, error = refusal(sub, "1")
            assert error["extensions"] == {"code": "UNAVAILABLE"}
            assert "does not run the event pipeline" in error["message"]
        stream = SSE(client, CHEAP)
        stream.join()
        assert stream.data[0]["errors"][0]["extensions"] == {"code": "UNAVAILABLE"}


# -- auth for reads ---------------------------------------------------------------------------


def token() -> str:
    now = int(time.time())
    claims = {"sub": "user-1", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    return jwt.encode(claims, SECRET, algorithm="HS256")


def test_with_auth_for_reads_a_subscription_needs_a_token(endpoint: str) -> None:
    bearer = {"Authorization": f"Bearer {token()}"}
    with live(endpoint, **AUTH, auth_reads=True) as (client, services):
        hub = services.events.hub
        with subscriber(client, services) as anonymous:
            anonymous.send("1", CHEAP)
            _, error = refusal(anonymous, "1")
            assert error["extensions"] == {"code": "UNAUTHENTICATED"}
            assert hub.size == 0
        stream = SSE(client, CHEAP)
        stream.join()
        assert stream.data[0]["errors"][0]["extensions"] == {"code": "UNAUTHENTICATED"}
        assert hub.size == 0

        # A browser cannot set headers on a websocket: the token in `connection_init`.
        with subscriber(client, services, payload=bearer) as signed_in:
            signed_in.subscribe("1", CHEAP)
            mutate(client, CREATE_T1, headers=bearer)
            assert signed_in.event("1") == {
                "teacherChanged": {"kind": "CREATED", "teacher": {"name": "Ada"}}
            }
