"""Rate limits by cost, per caller (graph_api/graph/engine/budgets.py, throttle.py): a token bucket
of cost points per token subject or client address, sized per role; an operation takes its
requested cost before it runs and gets back what it did not use; a refusal is a 429 with
RATE_LIMITED and Retry-After, before any DynamoDB request; a subscription's events spend.

The process's buckets run on a clock the tests move (`Clock`): counts, not timings."""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import (
    AUTH,
    bearer,
    hs256,
    live,
    mutate,
    running_redis,
    serving_two_workers,
    subscriber,
)
from worker_sockets import accepting_worker

from graph_api.graph.auth.policy import BUDGETS, Budget, Role
from graph_api.graph.engine.budgets import Limiter, LocalBuckets
from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.settings import Settings, SettingsError

# 30 classes by `first`: requested 30, and it reads them (one Query).
COSTLIEST = "{ classes(first: 30) { edges { node { id subject } } } }"
CHEAP = "{ sports(first: 1) { edges { cursor } } }"  # requested 1


class Clock:
    """The buckets' clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def frozen(services: Services) -> Clock:
    clock = Clock()
    assert services.limiter is not None
    services.limiter.local.clock = clock
    return clock


MakeClient = Callable[..., tuple[TestClient, Services]]


@pytest.fixture
def client_with(services_with: Callable[..., Services]) -> Iterator[MakeClient]:
    """Apps over the seeded read table, with auth on and other settings."""
    with contextlib.ExitStack() as stack:

        def make(**overrides: Any) -> tuple[TestClient, Services]:
            services = services_with(**AUTH, **overrides)
            return stack.enter_context(TestClient(create_app(services))), services

        yield make


def post(client: TestClient, query: str, headers: dict[str, str] | None = None) -> Any:
    return client.post("/graphql", json={"query": query}, headers=headers or {})


def codes(body: Any) -> list[str]:
    return [e["extensions"]["code"] for e in body.get("errors", [])]


def points_used(body: Any) -> int:
    """What the rate limit charges an operation once it ran: its DynamoDB requests and
    capacity units, at most its requested cost."""
    dynamodb = body["extensions"]["dynamodb"]
    used = dynamodb["requests"] + -(-dynamodb["consumedCapacity"] // 1)
    return int(min(body["extensions"]["cost"]["requested"], used))


# -- the budgets -----------------------------------------------------------------------------


def test_budgets_by_role_admin_highest_anonymous_lowest() -> None:
    anonymous, admin = BUDGETS[Role.ANONYMOUS], BUDGETS[Role.ADMIN]
    assert all(anonymous.maximum <= b.maximum for b in BUDGETS.values())
    assert all(admin.maximum >= b.maximum for b in BUDGETS.values())
    # The costliest query the limits allow runs from a full anonymous bucket, once.
    assert anonymous.maximum == Settings().max_cost


def test_settings_override_rows_or_turn_the_limits_off_and_refuse_bad_ones() -> None:
    settings = Settings.from_env({"GRAPH_API_RATE_LIMITS": "anonymous=10/2, admin=99/9"})
    limiter = Limiter.from_settings(settings)
    assert limiter is not None
    assert (
        limiter.budgets[Role.ANONYMOUS].maximum,
        limiter.budgets[Role.ANONYMOUS].restore_rate,
    ) == (10, 2)
    assert limiter.budgets[Role.TEACHER] == BUDGETS[Role.TEACHER]
    assert Limiter.from_settings(Settings.from_env({"GRAPH_API_RATE_LIMITS": "off"})) is None
    for bad in ("nobody=1/1", "anonymous=10", "anonymous=0/1", "anonymous=ten/1"):
        with pytest.raises(SettingsError, match="GRAPH_API_RATE_LIMITS"):
            Settings.from_env({"GRAPH_API_RATE_LIMITS": bad})


def test_the_process_keeps_a_bounded_number_of_buckets_dropping_full_ones_first() -> None:
    clock = Clock()
    buckets = LocalBuckets(size=4, clock=clock)
    budget = Budget(10, 1)
    assert buckets.take("spender", budget, 10).available == 0
    for n in range(3):
        buckets.take(f"light-{n}", budget, 1)
    clock.now += 2  # the light ones are full again; the spender is not
    for n in range(3):
        buckets.take(f"new-{n}", budget, 1)
        assert len(buckets) <= 4
    # The spender's bucket was kept while full ones could go: it is still short.
    assert buckets.take("spender", budget, 10).retry_after > 0
    for n in range(100):  # none full: the oldest half goes, the count stays bounded
        buckets.take(f"more-{n}", budget, 1)
        assert len(buckets) <= 4


# -- over HTTP -------------------------------------------------------------------------------


def test_an_anonymous_caller_sending_the_costliest_query_back_to_back_is_refused(
    client_with: MakeClient,
) -> None:
    """The defaults' shape, scaled down: the anonymous maximum is the cost limit, restored
    at a 50th of it a second. Back to back at one a second (slower than they run), the
    costliest query is refused within a minute of them."""
    client, services = client_with(max_cost=30, rate_limits="anonymous=30/1")
    clock = frozen(services)
    served = 0
    for _ in range(60):
        response = post(client, COSTLIEST)
        if response.status_code == 429:
            break
        body = response.json()
        assert "errors" not in body and body["extensions"]["cost"]["requested"] == 30, body
        assert points_used(body) > 1  # it costs more than a second restores
        served += 1
        clock.now += 1.0
    else:
        pytest.fail("served for a minute")
    assert served == 1  # the second needs the full bucket back


def test_past_its_budget_a_caller_gets_429_with_retry_after_and_no_dynamodb_request(
    client_with: MakeClient,
) -> None:
    client, services = client_with(rate_limits="anonymous=3/1,admin=3/1")
    clock = frozen(services)
    sent: list[str] = []
    services.dynamo.register("before-call.dynamodb", lambda model, **_: sent.append(model.name))
    for _ in range(3):
        assert post(client, CHEAP).status_code == 200
    sent.clear()
    refused = post(client, CHEAP)
    assert refused.status_code == 429
    body = refused.json()
    assert codes(body) == ["RATE_LIMITED"] and "data" not in body
    assert refused.headers["retry-after"] == "1"
    assert body["errors"][0]["extensions"]["retryAfter"] == 1
    assert body["extensions"]["cost"]["throttleStatus"] == {
        "maximumAvailable": 3,
        "currentlyAvailable": 0,
        "restoreRate": 1,
    }
    assert body["extensions"]["dynamodb"]["requests"] == 0
    assert sent == []  # nothing reached DynamoDB
    # Another caller (a token's subject) is served at once.
    other = post(client, CHEAP, bearer(hs256(sub="someone-else")))
    assert other.status_code == 200 and "errors" not in other.json()
    assert sent  # and read
    # After the time it was told, the first caller is served again.
    clock.now += int(refused.headers["retry-after"])
    again = post(client, CHEAP)
    assert again.status_code == 200 and "errors" not in again.json()


def test_every_answer_carries_the_bucket_and_gets_back_what_it_did_not_use(
    client_with: MakeClient,
) -> None:
    client, services = client_with(rate_limits="anonymous=1000/10")
    frozen(services)
    # Asks for 100 sports; the school has fewer, read in one Query.
    response = post(client, "{ sports(first: 100) { edges { cursor } } }")
    body = response.json()
    status = body["extensions"]["cost"]["throttleStatus"]
    used = points_used(body)
    assert 0 < used < body["extensions"]["cost"]["requested"] == 100, body
    assert status == {
        "maximumAvailable": 1000,
        "currentlyAvailable": 1000 - used,
        "restoreRate": 10,
    }
    assert response.headers["ratelimit-policy"] == '"cost";q=1000;w=100'
    assert response.headers["ratelimit"] == f'"cost";r={1000 - used};t={-(-used // 10)}'
    assert "retry-after" not in response.headers


def test_a_query_costlier_than_the_bucket_runs_from_a_full_one(client_with: MakeClient) -> None:
    client, services = client_with(rate_limits="anonymous=10/1")
    clock = frozen(services)
    first = post(client, COSTLIEST)  # requested 30: takes the whole bucket, then the rest back
    assert first.status_code == 200 and "errors" not in first.json()
    assert post(client, COSTLIEST).status_code == 429
    clock.now += 10
    assert post(client, COSTLIEST).status_code == 200


def test_rate_limits_off_add_nothing(client_with: MakeClient) -> None:
    client, _ = client_with(rate_limits="off")
    response = post(client, CHEAP)
    assert "throttleStatus" not in response.json()["extensions"]["cost"]
    assert "ratelimit" not in response.headers


# -- subscriptions -------------------------------------------------------------------------

WATCH = 'subscription { teacherChanged(id: "t1") { kind teacher { name } } }'  # 1 an event


def rename(name: str) -> str:
    return (
        f'mutation {{ updateTeacher(id: "t1", input: {{name: "{name}"}}) {{ teacher {{ id }} }} }}'
    )


def test_a_subscriptions_events_spend_and_at_zero_it_ends_rate_limited(endpoint: str) -> None:
    staff = bearer(hs256())  # writes from another caller's budget
    with live(endpoint, (), **AUTH, rate_limits="anonymous=3/1") as (client, services):
        clock = frozen(services)
        mutate(
            client,
            'mutation { createTeacher(input: {id: "t1", name: "A"}) { teacher { id } } }',
            headers=staff,
        )
        with subscriber(client, services) as sub:  # anonymous: this address's bucket
            sub.subscribe("w", WATCH)
            for name in "BCDEF":  # five changes, five events or more
                mutate(client, rename(name), headers=staff)
            heard = 0
            while (message := sub.next())["type"] == "next" and "errors" not in message["payload"]:
                heard += 1
            assert heard == 3  # one point each; then the bucket is empty
            assert message["id"] == "w" and message["payload"]["data"] is None, message
            (error,) = message["payload"]["errors"]
            assert error["extensions"] == {"code": "RATE_LIMITED", "retryAfter": 1}
            assert sub.next() == {"id": "w", "type": "complete"}  # an end, not a stall
            # The caller spent it: its queries wait too, until the bucket refills.
            assert post(client, CHEAP).status_code == 429
            clock.now += 1
            assert post(client, CHEAP).status_code == 200


# -- shared through Redis ------------------------------------------------------------------


def test_with_redis_two_processes_share_one_bucket_per_caller(
    services_with: Callable[..., Services], tmp_path: Path
) -> None:
    """Two apps over one table, each with services of its own (two workers' worth), one
    Redis: what a caller spends on one is what the other sees. Redis's clock restores a
    point a second meanwhile: the checks allow a few (`SLACK`)."""
    with running_redis(tmp_path) as redis:
        settings = {**AUTH, "events_broker": redis.url, "rate_limits": "anonymous=20/1"}
        with (
            TestClient(create_app(services_with(**settings))) as one,
            TestClient(create_app(services_with(**settings))) as two,
        ):
            for _ in range(10):  # a point each
                assert post(one, CHEAP).status_code == 200
            seen = post(two, CHEAP).json()["extensions"]["cost"]["throttleStatus"]
            assert seen["currentlyAvailable"] <= 20 - 11 + SLACK, seen  # alone: 19
            # The costliest query needs the whole bucket: spent on one, refused by both.
            refused = post(one, COSTLIEST)
            assert refused.status_code == 429, refused.json()
            assert post(two, COSTLIEST).status_code == 429


SLACK = 5  # points Redis's clock may restore while a busy machine runs a few requests


def test_with_redis_down_each_process_limits_on_its_own_buckets(
    services_with: Callable[..., Services], tmp_path: Path
) -> None:
    """A Redis that stops answering refuses nobody and slows nobody for long: the process's
    buckets stand in (still limiting)."""
    with running_redis(tmp_path) as redis:
        settings = {**AUTH, "events_broker": redis.url, "rate_limits": "anonymous=3/1"}
        services = services_with(**settings)
        with TestClient(create_app(services)) as client:
            assert post(client, CHEAP).status_code == 200
            redis.kill()
            clock = frozen(services)
            answers = [post(client, CHEAP).status_code for _ in range(4)]
            assert answers == [200, 200, 200, 429]  # a fresh bucket of 3 in this process
            clock.now += 1
            assert post(client, CHEAP).status_code == 200


# -- two workers of `graph-api serve`, one Redis --------------------------------------------

BUCKET = 60  # points, restored 1 a second (the slowest rate there is); CHEAP takes 1 and uses 1


def connection_to_each(port: int, workers: list[int]) -> dict[int, http.client.HTTPConnection]:
    """A kept-alive connection that each worker accepted (found in /proc, before any
    request): the test picks the worker of every request."""
    found: dict[int, http.client.HTTPConnection] = {}
    spare: list[http.client.HTTPConnection] = []
    deadline = time.monotonic() + 120
    while len(found) < len(workers):
        assert time.monotonic() < deadline, f"no connection accepted by each of {workers}"
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.connect()
        assert connection.sock is not None
        owner = None
        while owner is None and time.monotonic() < deadline:
            owner = accepting_worker(connection.sock, workers)
            time.sleep(0 if owner else 0.01)
        if owner is None or owner in found:
            spare.append(connection)
        else:
            found[owner] = connection
    for connection in spare:
        connection.close()
    return found


def ask(connection: http.client.HTTPConnection, query: str) -> tuple[int, dict[str, str], Any]:
    body = json.dumps({"query": query})
    connection.request("POST", "/graphql", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    return response.status, {k.lower(): v for k, v in response.getheaders()}, answer


def test_with_redis_two_workers_of_serve_spend_from_one_bucket(tmp_path: Path) -> None:
    """Requests alternate between the two workers of one `serve`; each spends a point from
    the caller's one bucket in Redis. Two buckets would admit about twice BUCKET before a
    refusal; one admits BUCKET and what a second restored meanwhile (measured, so a slow
    machine loosens the bound and fails nothing)."""
    rows = f"open={BUCKET}/1,anonymous={BUCKET}/1"  # no sign-in here: callers are `open`
    with (
        running_redis(tmp_path) as redis,
        serving_two_workers(
            tmp_path, GRAPH_API_EVENTS_BROKER=redis.url, GRAPH_API_RATE_LIMITS=rows
        ) as (port, workers, _),
    ):
        connections = connection_to_each(port, workers)
        served: list[tuple[int, int]] = []  # the worker, the points it said were left
        started = time.monotonic()
        for n in range(3 * BUCKET):
            status, headers, body = ask(connections[workers[n % 2]], CHEAP)
            if status == 429:
                break
            assert status == 200 and "errors" not in body, body
            left = body["extensions"]["cost"]["throttleStatus"]["currentlyAvailable"]
            served.append((workers[n % 2], left))
            # Whichever worker answers counts what both spent before: a point a request,
            # less what was restored since the first (at most one a second).
            assert left <= served[0][1] - n + math.ceil(time.monotonic() - started), served
        else:
            pytest.fail(f"{3 * BUCKET} requests served")
        restored = math.ceil(time.monotonic() - started)
        assert {worker for worker, _ in served} == set(workers)
        assert BUCKET <= len(served) <= BUCKET + restored, (len(served), restored)
        assert codes(body) == ["RATE_LIMITED"] and int(headers["retry-after"]) >= 1

        # The costliest query (30) is refused by both workers, each told the wait its
        # bucket's level gives, and the same level give or take what was restored between.
        asked = time.monotonic()
        levels = []
        for worker in workers:
            status, headers, body = ask(connections[worker], COSTLIEST)
            assert status == 429 and codes(body) == ["RATE_LIMITED"], body
            left = body["extensions"]["cost"]["throttleStatus"]["currentlyAvailable"]
            assert int(headers["retry-after"]) == 30 - left, (headers, body)
            levels.append(left)
        assert abs(levels[0] - levels[1]) <= math.ceil(time.monotonic() - asked), levels
        for connection in connections.values():
            connection.close()
