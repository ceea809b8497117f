"""Sign-in against an issuer's JWKS that is slow or failing: tokens whose key is cached are
answered without waiting on it, unknown key ids share one fetch at a time, and a failing
issuer is asked a bounded number of times whatever the number of requests
(graph_api/graph/auth/jwks.py)."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.testclient import TestClient
from support import (
    AUDIENCE,
    ISSUER,
    WAIT,
    QuietHandler,
    bearer,
    claims,
    codes,
    fresh_services,
    post,
    until,
)

from graph_api.graph.auth.jwks import SigningKeys
from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
# Any operation needs a token (GRAPH_API_AUTH_READS), and this one reads nothing.
TYPENAME = "{ __typename }"


def token(kid: str = "k1") -> dict[str, str]:
    return bearer(jwt.encode(claims(), KEY, algorithm="RS256", headers={"kid": kid}))


def unknown() -> dict[str, str]:
    """A token signed by the key, naming a key id the issuer does not list."""
    return token(f"random-{uuid.uuid4().hex}")


class Issuer:
    """A JWKS endpoint on a loopback port listing the key as "k1": it counts its fetches
    and how many it answers at once, answers `status`, and holds every answer while `held`
    (a slow issuer)."""

    def __init__(self) -> None:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True)
        self.document = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig"}]}).encode()
        self.status = 200
        self.fetches = 0
        self.at_once = self.most_at_once = 0
        self.released = threading.Event()
        self.released.set()
        self._lock = threading.Lock()
        issuer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                with issuer._lock:
                    issuer.fetches += 1
                    issuer.at_once += 1
                    issuer.most_at_once = max(issuer.most_at_once, issuer.at_once)
                try:
                    issuer.released.wait(WAIT)
                    body = issuer.document if issuer.status == 200 else b"{}"
                    self.reply(body, "application/json", issuer.status)
                finally:
                    with issuer._lock:
                        issuer.at_once -= 1

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/.well-known/jwks.json"

    def hold(self) -> None:
        self.released.clear()


@contextlib.contextmanager
def serving(endpoint: str) -> Iterator[tuple[TestClient, Services, Issuer, SigningKeys]]:
    """An issuer, and the app signing in against it."""
    issuer = Issuer()
    thread = threading.Thread(target=issuer.server.serve_forever, daemon=True)
    thread.start()
    settings = {"jwks_url": issuer.url, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}
    try:
        with (
            fresh_services(endpoint, **settings, auth_reads=True) as services,
            TestClient(create_app(services)) as client,
        ):
            assert services.auth.keys is not None
            yield client, services, issuer, services.auth.keys
    finally:
        issuer.released.set()
        issuer.server.shutdown()
        issuer.server.server_close()
        thread.join()


def answered(body: Any) -> bool:
    return bool(body.get("data") == {"__typename": "Query"} and "errors" not in body)


def test_a_slow_issuer_does_not_delay_tokens_whose_key_is_known(endpoint: str) -> None:
    """While the issuer holds a fetch (slower than any timeout), 40 requests with unknown key
    ids wait for it, holding no thread; a token whose key is cached is answered meanwhile.
    (Each used to hold one of asyncio's default worker threads, all waiting in line for
    PyJWT's fetch lock: the known one waited for a free thread.)"""
    with serving(endpoint) as (client, services, issuer, keys):
        assert answered(post(client, TYPENAME, headers=token()))  # "k1" is fetched, cached
        keys.min_interval = 0  # unknown key ids may ask again at once (the limit: test below)
        keys.timeout = WAIT  # the held fetch stays pending, however busy the machine
        issuer.hold()
        arrived = 0
        authenticate = services.auth.authenticate

        async def counted(authorization: str | None) -> Any:
            nonlocal arrived
            arrived += 1
            return await authenticate(authorization)

        services.auth.authenticate = counted  # type: ignore[method-assign]
        answers: list[Any] = []
        waiting = [
            threading.Thread(target=lambda: answers.append(post(client, TYPENAME, None, unknown())))
            for _ in range(40)
        ]
        for thread in waiting:
            thread.start()
        until(lambda: arrived == 40 and issuer.fetches == 2, "40 unknown key ids, one fetch held")

        known: list[Any] = []
        thread = threading.Thread(
            target=lambda: known.append(post(client, TYPENAME, None, token()))
        )
        thread.start()
        thread.join(WAIT)
        still_held = not issuer.released.is_set() and issuer.at_once == 1
        issuer.released.set()
        assert known and answered(known[0]), "a cached key waited for the slow issuer"
        assert still_held
        for waiter in waiting:
            waiter.join(WAIT)
        # Each unknown key id refused with a code (UNAVAILABLE if the fetch outlasted the
        # wait), and the issuer never asked twice at once.
        assert len(answers) == 40
        assert {code for body in answers for code in codes(body)} <= {
            "UNAUTHENTICATED",
            "UNAVAILABLE",
        }
        assert issuer.most_at_once == 1


def test_a_failing_issuer_is_asked_a_bounded_number_of_times(endpoint: str) -> None:
    """60 requests with unknown key ids while the issuer answers 500: each is UNAVAILABLE,
    and the issuer is asked once, maybe twice (a fetch each used to be made)."""
    with serving(endpoint) as (client, _, issuer, _keys):
        issuer.status = 500
        bodies = [post(client, TYPENAME, headers=unknown()) for _ in range(60)]
        assert all(codes(body) == ["UNAVAILABLE"] for body in bodies), bodies[-1]
        assert 1 <= issuer.fetches <= 2
        # A known key id is refused alike: the set could not be fetched at all.
        assert codes(post(client, TYPENAME, headers=token())) == ["UNAVAILABLE"]


@pytest.mark.parametrize("status", [500, 200])
def test_cached_keys_keep_answering_whatever_the_refresh(endpoint: str, status: int) -> None:
    """Once fetched, the set keeps answering while a refresh fails (the last good set) or
    after it succeeds; a refresh past the set's lifespan never delays the token."""
    with serving(endpoint) as (client, _, issuer, keys):
        assert answered(post(client, TYPENAME, headers=token()))
        keys.lifespan = keys.min_interval = 0  # every request refreshes the set in the back
        issuer.status = status
        for _ in range(5):
            assert answered(post(client, TYPENAME, headers=token()))
        until(lambda: issuer.fetches >= 2, "a refresh")
