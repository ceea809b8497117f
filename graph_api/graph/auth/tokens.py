"""Bearer tokens: JWTs checked against a JWKS (OIDC, e.g. Cognito) or an HS256 secret, with
`exp`, `iss` and `aud` verified, and the `Principal` their claims make. With neither
configured, sign-in is off and `serve` says so at startup: a request is `OPEN`. The embedded
backend instead signs in with its development signer (`DEV_SIGNER`, what `graph-api token`
and GraphiQL's role picker sign with), so `make run` enforces the policy as a real server
does: a request without a token is `ANONYMOUS` (unless GRAPH_API_OPEN_WRITES=true keeps it
`OPEN`, as the demo was before roles)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jwt

from graph_api.errors import Unauthenticated
from graph_api.graph.auth.jwks import IssuerUnavailable, SigningKeys
from graph_api.graph.auth.policy import CLAIMABLE, Role
from graph_api.settings import Settings

JWKS_ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"]
# Seconds a token is still accepted past its `exp` (clock skew between issuer and server).
LEEWAY = 30
# The latest time a time claim may name: the last second of year 9999 (as far as `datetime`
# goes). Beyond it is no time: `exp` 10**400 passed PyJWT, then overflowed a float (a 500).
LATEST = 253_402_300_799


@dataclass(frozen=True)
class Signer:
    """An HS256 secret and the `iss` and `aud` its tokens carry."""

    secret: str = field(repr=False)
    issuer: str
    audience: str


# The embedded backend's own: its school is generated, and its process started the DynamoDB
# it serves. Never used for a remote table (`hs256_signer`), whatever else is set.
DEV_SIGNER = Signer(
    "graph-api embedded backend: development tokens only", "graph-api-dev", "graph-api-dev"
)


def hs256_signer(settings: Settings) -> Signer | None:
    """What HS256 tokens are checked (and `graph-api token` signs) with: the configured
    secret; on the embedded backend with no sign-in configured, `DEV_SIGNER`; else none."""
    if settings.jwt_secret:
        return Signer(settings.jwt_secret, settings.jwt_issuer, settings.jwt_audience)
    if not settings.jwks_url and settings.backend == "embedded":
        return DEV_SIGNER
    return None


def role_claims(
    settings: Settings,
    role: Role,
    node_id: str | None = None,
    students: Sequence[str] = (),
    ttl: int = 3600,
    now: float | None = None,
) -> dict[str, Any]:
    """The claims of a token for `role`, under the names `settings` read them: a teacher or
    a student is the node `node_id`, a guardian answers for `students` (checked by the
    caller: `ops.token.claims`)."""
    issued = int(time.time() if now is None else now)
    body: dict[str, Any] = {
        "sub": f"dev-{role}-{node_id}" if node_id else f"dev-{role}",
        settings.roles_claim: [role.value],
        "iat": issued,
        "exp": issued + ttl,
    }
    if role is Role.TEACHER:
        body[settings.teacher_claim] = node_id
    elif role is Role.STUDENT:
        body[settings.student_claim] = node_id
    elif role is Role.GUARDIAN:
        body[settings.guardian_claim] = list(students)
    return body


def sign(signer: Signer, body: Mapping[str, Any]) -> str:
    """`body` as an HS256 token of `signer`, with its `iss` and `aud`."""
    signed = {**body, "iss": signer.issuer, "aud": signer.audience}
    return jwt.encode(signed, signer.secret, algorithm="HS256")


@dataclass(frozen=True)
class Principal:
    """Who is calling, as the policy (`graph/auth/policy.py`) sees it: roles, and the nodes the
    caller is or answers for. Built from a verified token's claims (`of_claims`)."""

    subject: str = ""
    roles: frozenset[Role] = frozenset()
    student_id: str | None = None  # the student the caller is (role student)
    teacher_id: str | None = None  # the teacher the caller is (role teacher)
    students: frozenset[str] = frozenset()  # whom a guardian answers for (role guardian)
    # When the token stops being accepted, `exp` + LEEWAY (epoch seconds): a subscription
    # ends then, so a websocket and HTTP agree on whether a token is still good.
    expires: float | None = None
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of_claims(cls, claims: Mapping[str, Any], settings: Settings) -> Principal:
        """The principal a verified token's claims make. Claims are read as the settings
        name them; a role that is not claimable and an id that is not an id grant nothing."""
        roles = frozenset(
            Role(name) for name in _strings(claims.get(settings.roles_claim)) if name in _CLAIMABLE
        )

        def node(claim: str, role: Role) -> str | None:
            ids = _ids(claims.get(claim)) if role in roles else []
            return ids[0] if len(ids) == 1 else None

        exp = time_claims(claims).get("exp")
        return cls(
            subject=str(claims.get("sub", "")),
            roles=roles,
            student_id=node(settings.student_claim, Role.STUDENT),
            teacher_id=node(settings.teacher_claim, Role.TEACHER),
            students=frozenset(_ids(claims.get(settings.guardian_claim)))
            if Role.GUARDIAN in roles
            else frozenset(),
            expires=float(exp + LEEWAY) if exp is not None else None,
            claims=claims,
        )


ANONYMOUS = Principal(roles=frozenset({Role.ANONYMOUS}))
OPEN = Principal(roles=frozenset({Role.OPEN}))

_CLAIMABLE = frozenset(role.value for role in CLAIMABLE)
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # keys.check_id's ids


def time_claims(claims: Mapping[str, Any]) -> dict[str, int]:
    """The token's `exp`, `nbf` and `iat` (those present), read as PyJWT reads them when it
    checks them (`int(value)`: a JSON number, or a string of one, `"1767225600"`), so that what
    HTTP accepts and when a subscription ends follow one reading. Raises Unauthenticated for
    a value PyJWT would refuse, or one past LATEST either way (10**400, `"1e400"`)."""
    times: dict[str, int] = {}
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name)
        if value is None:
            continue
        try:
            seconds = int(value)
        except (TypeError, ValueError, OverflowError):
            raise Unauthenticated(f"invalid token: its {name} is not a time") from None
        if not -LATEST <= seconds <= LATEST:
            raise Unauthenticated(f"invalid token: its {name} is past year 9999")
        times[name] = seconds
    return times


def _strings(value: Any) -> list[str]:
    """A claim as a list of strings: a JSON list (Cognito's `cognito:groups`), or one string
    of names separated by blanks or commas (as some issuers send roles and scopes)."""
    if isinstance(value, str):
        return [part for part in re.split(r"[\s,]+", value) if part]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def _ids(value: Any) -> list[str]:
    return [item for item in _strings(value) if _ID.fullmatch(item)]


@dataclass(frozen=True)
class AuthResult:
    """What the request's Authorization header proved: a principal, a problem, or nothing."""

    principal: Principal | None = None
    problem: str | None = None
    # The token could not be checked (the JWKS did not answer): not the client's fault.
    unavailable: bool = False
    # Whom the policy sees: the token's principal, else `anonymous` (or `open` where no
    # sign-in is configured). Fails closed: a result made without a check is anonymous.
    anonymous: Principal = ANONYMOUS

    @property
    def caller(self) -> Principal:
        return self.principal if self.principal is not None else self.anonymous


class Authenticator:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.enabled = bool(settings.jwt_secret or settings.jwks_url)
        self._hs256 = hs256_signer(settings)
        # The embedded backend without sign-in configured: its dev tokens are checked.
        self.dev = not self.enabled and self._hs256 is not None
        # Whom a request without a token is: with sign-in (dev tokens too) anonymous, unless
        # GRAPH_API_OPEN_WRITES=true opens the embedded demo to anyone; else open.
        signs_in = self.enabled or (self.dev and not settings.open_writes)
        self.anonymous = ANONYMOUS if signs_in else OPEN
        # The issuer's keys, cached: a slow or failing issuer delays only unknown key ids.
        self.keys = SigningKeys(settings.jwks_url) if settings.jwks_url else None

    def close(self) -> None:
        if self.keys is not None:
            self.keys.close()

    async def authenticate(self, authorization: str | None) -> AuthResult:
        anonymous = self.anonymous
        if not (self.enabled or self.dev) or not authorization:
            return AuthResult(anonymous=anonymous)
        if self.dev and authorization.strip()[:7].lower() != "bearer ":
            return AuthResult(anonymous=anonymous)  # not a bearer token: ignored
        # A token that does not verify never makes the caller `OPEN`: it is anonymous.
        try:
            claims = await self._verify(authorization)
            principal = Principal.of_claims(claims, self.settings)
        except Unauthenticated as error:
            return AuthResult(problem=error.message)
        except IssuerUnavailable as error:  # not the token's fault: UNAVAILABLE
            return AuthResult(problem=str(error), unavailable=True)
        return AuthResult(principal=principal)

    async def _verify(self, authorization: str) -> dict[str, Any]:
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Authorization must be 'Bearer <JWT>'")
        token = token.strip()
        issuer, audience = self.settings.jwt_issuer, self.settings.jwt_audience
        try:
            if self.keys is not None:
                # The PyJWK itself, not its key: PyJWT then verifies with the key's own
                # algorithm and refuses a header naming another (an `ES256` header over an
                # RSA key's `kid` raised a TypeError, a 500, when handed the bare key).
                key: Any = await self.keys.key(jwt.get_unverified_header(token).get("kid"))
                algorithms = JWKS_ALGORITHMS
            else:
                assert self._hs256 is not None  # `authenticate` checks only where one is
                key, algorithms = self._hs256.secret, ["HS256"]
                issuer, audience = self._hs256.issuer, self._hs256.audience
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=algorithms,
                audience=audience,
                issuer=issuer,
                options={"require": ["exp", "iss", "aud"]},
                leeway=LEEWAY,
            )
        except jwt.PyJWTError as error:
            raise Unauthenticated(f"invalid token: {error}") from None
        return claims
