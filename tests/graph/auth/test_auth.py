"""Bearer tokens over HTTP: with auth configured, mutations (and, when asked, reads) need a
valid JWT, checked against an HS256 secret or a JWKS; a refused operation writes nothing."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.testclient import TestClient
from support import (
    AUDIENCE,
    AUTH,
    ISSUER,
    SECRET,
    QuietHandler,
    awaited,
    bearer,
    claims,
    fresh_services,
    hs256,
    make_settings,
    post,
    scan,
)

from graph_api.graph.engine.context import Services
from graph_api.http.app import create_app
from graph_api.settings import Settings, SettingsError
from graph_api.store import admin

OTHER_SECRET = "o" * 32

CREATE = """mutation { createTeacher(input: {id: "tch-900", name: "Grace"}) {
  teacher { id name } userErrors { code } } }"""
READ = '{ teacher(id: "tch-900") { id name } }'


App = tuple[TestClient, Services]


@contextlib.contextmanager
def serving(endpoint: str, **overrides: Any) -> Iterator[App]:
    """An app over a fresh, empty, writable table with the given settings."""
    services = Services.create(make_settings(endpoint, **overrides))
    awaited(admin.create(services.dynamo, services.settings.table))
    try:
        with TestClient(create_app(services)) as client:
            yield client, services
    finally:
        awaited(
            services.dynamo.call(
                "DeleteTable", {"TableName": services.settings.table}, None, missing_table=False
            )
        )
        services.close()


@pytest.fixture
def make_app(endpoint: str) -> Iterator[Callable[..., App]]:
    with contextlib.ExitStack() as stack:
        yield lambda **overrides: stack.enter_context(serving(endpoint, **overrides))


@pytest.fixture
def app(make_app: Callable[..., App]) -> App:
    return make_app(**AUTH)


@pytest.fixture(scope="module")
def refusing_app(endpoint: str) -> Iterator[App]:
    """One app for the tests that must not write: its table stays empty."""
    with serving(endpoint, **AUTH) as served:
        yield served


def assert_unauthenticated(body: dict[str, Any]) -> None:
    assert body.get("data") is None
    assert [e["extensions"]["code"] for e in body["errors"]] == ["UNAUTHENTICATED"]
    assert body.get("extensions", {}).get("dynamodb", {}).get("requests", 0) == 0


# -- HS256 -----------------------------------------------------------------------------------

REFUSED = {
    "no header": None,
    "basic scheme": "Basic x",
    "bearer without token": "Bearer ",
    "bearer alone": "Bearer",
    "not a jwt": "Bearer not-a-jwt",
    "bad signature": f"Bearer {hs256(OTHER_SECRET)}",
    "expired": f"Bearer {hs256(exp=int(time.time()) - 3600)}",
    "not yet valid": f"Bearer {hs256(nbf=int(time.time()) + 3600)}",
    "wrong issuer": f"Bearer {hs256(iss='https://evil.test')}",
    "wrong audience": f"Bearer {hs256(aud='other-api')}",
    "missing exp": f"Bearer {hs256(exp=None)}",
    "missing iss": f"Bearer {hs256(iss=None)}",
    "missing aud": f"Bearer {hs256(aud=None)}",
    "alg none": "Bearer " + jwt.encode(claims(), None, algorithm="none"),
    "token twice": f"Bearer {hs256()} {hs256()}",
}


@pytest.mark.parametrize("authorization", list(REFUSED.values()), ids=list(REFUSED))
def test_mutation_without_a_valid_token_is_unauthenticated_and_writes_nothing(
    refusing_app: App, authorization: str | None
) -> None:
    client, services = refusing_app
    headers = {} if authorization is None else {"Authorization": authorization}
    assert_unauthenticated(post(client, CREATE, headers=headers))
    assert scan(services) == []


# Validly signed times past any date: 10**400 passed PyJWT's check, then overflowed a float
# (an OverflowError: HTTP 500).
BEYOND = {
    "exp 10**400": {"exp": 10**400},
    "exp 10**400 as a string": {"exp": str(10**400)},
    "exp Infinity": {"exp": float("inf")},
    "exp NaN": {"exp": float("nan")},
    "nbf 10**400": {"nbf": 10**400},
    "iat 10**400": {"iat": 10**400},
}


@pytest.mark.parametrize("times", list(BEYOND.values()), ids=list(BEYOND))
def test_a_time_claim_past_any_date_is_unauthenticated_not_a_500(
    refusing_app: App, times: dict[str, Any]
) -> None:
    client, services = refusing_app
    response = client.post(
        "/graphql",
        json={"query": CREATE},
        headers={"accept": "application/graphql-response+json", **bearer(hs256(**times))},
    )
    assert response.status_code == 401, response.text
    assert_unauthenticated(response.json())
    assert scan(services) == []


def test_valid_hs256_token_lets_the_mutation_through(app: App) -> None:
    client, services = app
    body = post(client, CREATE, headers=bearer(hs256()))
    assert "errors" not in body
    assert body["data"] == {
        "createTeacher": {"teacher": {"id": "tch-900", "name": "Grace"}, "userErrors": []}
    }
    assert [i["id"] for i in scan(services) if i.get("type") == "teacher"] == ["tch-900"]
    assert post(client, READ)["data"] == {"teacher": {"id": "tch-900", "name": "Grace"}}


def test_lowercase_bearer_scheme_is_accepted(app: App) -> None:
    client, _ = app
    body = post(client, CREATE, headers={"Authorization": f"bearer {hs256()}"})
    assert "errors" not in body


def test_refused_update_and_delete_leave_the_node_as_it_was(app: App) -> None:
    client, services = app
    assert "errors" not in post(client, CREATE, headers=bearer(hs256()))
    before = scan(services)
    update = (
        'mutation { updateTeacher(id: "tch-900", input: {name: "Mallory"}) { teacher { name } } }'
    )
    delete = 'mutation { deleteTeacher(id: "tch-900") { deletedId } }'
    for query in (update, delete):
        assert_unauthenticated(post(client, query))
        assert_unauthenticated(post(client, query, headers=bearer(hs256(OTHER_SECRET))))
    assert scan(services) == before
    assert post(client, READ)["data"] == {"teacher": {"id": "tch-900", "name": "Grace"}}


def test_a_mutation_chosen_by_operation_name_needs_a_token(refusing_app: App) -> None:
    client, services = refusing_app
    document = f"query Look {READ} mutation Write {CREATE[len('mutation ') :]}"
    response = client.post("/graphql", json={"query": document, "operationName": "Write"})
    assert response.status_code < 500
    assert_unauthenticated(response.json())
    assert scan(services) == []
    looked = client.post("/graphql", json={"query": document, "operationName": "Look"})
    assert looked.json()["data"] == {"teacher": None}


def test_unauthenticated_error_says_why_without_echoing_the_token(refusing_app: App) -> None:
    client, _ = refusing_app
    token = hs256(OTHER_SECRET)
    body = post(client, CREATE, headers=bearer(token))
    assert_unauthenticated(body)
    assert token not in json.dumps(body)
    assert "Bearer" in body["errors"][0]["message"]


def test_reads_stay_public_by_default(refusing_app: App) -> None:
    client, _ = refusing_app
    body = post(client, READ)
    assert "errors" not in body
    assert body["data"] == {"teacher": None}


def test_reads_need_a_token_when_auth_reads_is_on(make_app: Callable[..., App]) -> None:
    client, _ = make_app(**AUTH, auth_reads=True)
    assert_unauthenticated(post(client, READ))
    assert_unauthenticated(post(client, READ, headers=bearer(hs256(OTHER_SECRET))))
    assert_unauthenticated(post(client, READ, headers=bearer(hs256(exp=int(time.time()) - 3600))))
    body = post(client, READ, headers=bearer(hs256()))
    assert "errors" not in body
    assert body["data"] == {"teacher": None}


def test_get_reads_need_a_token_when_auth_reads_is_on(make_app: Callable[..., App]) -> None:
    client, _ = make_app(**AUTH, auth_reads=True)
    refused = client.get("/graphql", params={"query": READ})
    assert refused.status_code < 500
    assert_unauthenticated(refused.json())
    allowed = client.get("/graphql", params={"query": READ}, headers=bearer(hs256()))
    assert allowed.json()["data"] == {"teacher": None}


def test_without_auth_configured_mutations_are_open(make_app: Callable[..., App]) -> None:
    client, services = make_app()
    assert not services.auth.enabled
    body = post(client, CREATE, headers={"Authorization": "Basic whatever"})
    assert "errors" not in body
    assert len(scan(services)) > 0


# -- JWKS (OIDC) -------------------------------------------------------------------------------


def private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def keys() -> dict[str, rsa.RSAPrivateKey]:
    return {"good": private_key(), "other": private_key()}


@pytest.fixture(scope="module")
def jwks_url(keys: dict[str, rsa.RSAPrivateKey]) -> Iterator[str]:
    """A JWKS document (the good key, kid "k1") served on a loopback port."""
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(keys["good"].public_key(), as_dict=True)
    document = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]})

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.reply(document.encode(), "application/json")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/.well-known/jwks.json"
    server.shutdown()
    server.server_close()
    thread.join()


def rs256(key: rsa.RSAPrivateKey, kid: str | None = "k1", **overrides: Any) -> str:
    headers = {"kid": kid} if kid is not None else None
    return jwt.encode(claims(**overrides), key, algorithm="RS256", headers=headers)


def hs256_with_public_key(key: rsa.RSAPrivateKey) -> str:
    """An HS256 token whose HMAC key is the RSA public key (algorithm confusion)."""
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = (
        b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
        + "."
        + b64(json.dumps(claims()).encode())
    )
    signature = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def another_algorithm(alg: str) -> str:
    """A token whose header names `alg` and the RSA key's kid, with a signature of `alg`'s
    size that nothing signed (PyJWT raised a TypeError on it: every request a 500)."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": alg, "typ": "JWT", "kid": "k1"}).encode())
    return f"{header}.{b64(json.dumps(claims()).encode())}.{b64(bytes(64))}"


JWKS_AUTH = {"jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}


@pytest.fixture
def jwks_app(make_app: Callable[..., App], jwks_url: str) -> App:
    return make_app(jwks_url=jwks_url, **JWKS_AUTH)


@pytest.fixture(scope="module")
def jwks_refusing_app(endpoint: str, jwks_url: str) -> Iterator[App]:
    with serving(endpoint, jwks_url=jwks_url, **JWKS_AUTH) as served:
        yield served


def test_jwks_rs256_token_lets_the_mutation_through(
    jwks_app: App, keys: dict[str, rsa.RSAPrivateKey]
) -> None:
    client, services = jwks_app
    body = post(client, CREATE, headers=bearer(rs256(keys["good"])))
    assert "errors" not in body
    assert body["data"]["createTeacher"]["teacher"]["id"] == "tch-900"
    assert len(scan(services)) > 0


JWKS_REFUSED: dict[str, Callable[[dict[str, rsa.RSAPrivateKey]], str]] = {
    "other key, known kid": lambda k: rs256(k["other"]),
    "other key, unknown kid": lambda k: rs256(k["other"], kid="k2"),
    "no kid": lambda k: rs256(k["good"], kid=None),
    "expired": lambda k: rs256(k["good"], exp=int(time.time()) - 3600),
    "wrong issuer": lambda k: rs256(k["good"], iss="https://evil.test"),
    "wrong audience": lambda k: rs256(k["good"], aud="other-api"),
    "HS256 keyed with the public key": lambda k: hs256_with_public_key(k["good"]),
    "HS256 shared secret": lambda k: hs256(),
    "ES256 header, RSA key": lambda k: another_algorithm("ES256"),
    "PS256 header, RSA key": lambda k: another_algorithm("PS256"),
}


@pytest.mark.parametrize("make_token", list(JWKS_REFUSED.values()), ids=list(JWKS_REFUSED))
def test_jwks_refuses_tokens_it_did_not_sign(
    jwks_refusing_app: App,
    keys: dict[str, rsa.RSAPrivateKey],
    make_token: Callable[[dict[str, rsa.RSAPrivateKey]], str],
) -> None:
    client, services = jwks_refusing_app
    assert_unauthenticated(post(client, CREATE, headers=bearer(make_token(keys))))
    assert scan(services) == []


def test_unreachable_jwks_is_unavailable_and_writes_nothing(
    make_app: Callable[..., App], keys: dict[str, rsa.RSAPrivateKey]
) -> None:
    # The issuer not answering is the server's trouble, not a bad token: UNAVAILABLE (503).
    with http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler) as closed:
        port = closed.server_port  # bound then closed: nothing listens there afterwards
    client, services = make_app(jwks_url=f"http://127.0.0.1:{port}/jwks.json", **JWKS_AUTH)
    body = post(client, CREATE, headers=bearer(rs256(keys["good"])))
    assert [e["extensions"]["code"] for e in body["errors"]] == ["UNAVAILABLE"]
    assert scan(services) == []


class _NotJson(QuietHandler):
    def do_GET(self) -> None:
        self.reply(b"<html>maintenance</html>", "text/html")


def test_a_jwks_that_is_not_json_is_unauthenticated_not_a_500(endpoint: str) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _NotJson)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    jwks = f"http://127.0.0.1:{server.server_port}/jwks.json"
    try:
        with fresh_services(endpoint, jwks_url=jwks, jwt_issuer="iss", jwt_audience="aud") as s:
            client = TestClient(create_app(s), raise_server_exceptions=False)
            token = jwt.encode({"sub": "x"}, "k" * 32, algorithm="HS256", headers={"kid": "a"})
            response = client.post(
                "/graphql",
                json={"query": 'mutation { createTeacher(input: {name: "T"}) { teacher { id } } }'},
                headers={"authorization": f"Bearer {token}"},
            )
            assert response.status_code < 500
            assert response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
            assert scan(s) == []
    finally:
        server.shutdown()


# -- settings -------------------------------------------------------------------------------


def auth_env(**env: str) -> dict[str, str]:
    return {f"GRAPH_API_{name.upper()}": value for name, value in env.items()}


@pytest.mark.parametrize(
    "env",
    [
        auth_env(jwt_secret=SECRET),
        auth_env(jwt_secret=SECRET, jwt_issuer=ISSUER),
        auth_env(jwt_secret=SECRET, jwt_audience=AUDIENCE),
        auth_env(jwks_url="https://issuer.test/jwks", jwt_audience=AUDIENCE),
        auth_env(jwt_secret="s" * 31, jwt_issuer=ISSUER, jwt_audience=AUDIENCE),
        auth_env(jwt_secret="é" * 15, jwt_issuer=ISSUER, jwt_audience=AUDIENCE),
        auth_env(
            jwks_url="https://issuer.test/jwks",
            jwt_secret=SECRET,
            jwt_issuer=ISSUER,
            jwt_audience=AUDIENCE,
        ),
        auth_env(jwt_secret=SECRET, jwt_issuer=ISSUER, jwt_audience=AUDIENCE, auth_reads="maybe"),
    ],
    ids=[
        "secret alone",
        "no audience",
        "no issuer",
        "jwks without issuer",
        "secret of 31 bytes",
        "secret of 30 utf-8 bytes",
        "jwks and secret",
        "auth_reads not a bool",
    ],
)
def test_incomplete_or_weak_auth_settings_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        Settings.from_env(env)


def test_auth_settings_are_read_from_the_environment() -> None:
    settings = Settings.from_env(
        auth_env(jwt_secret=SECRET, jwt_issuer=ISSUER, jwt_audience=AUDIENCE, auth_reads="true")
    )
    assert (settings.jwt_secret, settings.jwt_issuer, settings.jwt_audience) == (
        SECRET,
        ISSUER,
        AUDIENCE,
    )
    assert settings.auth_reads is True
    assert SECRET not in repr(settings)
    jwks = Settings.from_env(
        auth_env(jwks_url="https://issuer.test/jwks", jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
    )
    assert jwks.jwks_url == "https://issuer.test/jwks"
    assert jwks.jwt_secret == ""
    assert jwks.auth_reads is False


def test_auth_is_off_without_settings() -> None:
    settings = Settings.from_env({})
    assert (settings.jwks_url, settings.jwt_secret, settings.auth_reads) == ("", "", False)
