"""Bearer tokens: JWTs checked against a JWKS (OIDC, e.g. Cognito) or an HS256 secret, with
`exp`, `iss` and `aud` verified, and the `Principal` their claims make. With neither
configured, auth is off (the embedded dev default) and `serve` says so at startup."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt

from graph_api.errors import Unauthenticated
from graph_api.graph.policy import CLAIMABLE, Role
from graph_api.settings import Settings

JWKS_ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"]
# Seconds a token is still accepted past its `exp` (clock skew between issuer and server).
LEEWAY = 30


@dataclass(frozen=True)
class Principal:
    """Who is calling, as the policy (`graph/policy.py`) sees it: roles, and the nodes the
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

        exp = claims.get("exp")
        return cls(
            subject=str(claims.get("sub", "")),
            roles=roles,
            student_id=node(settings.student_claim, Role.STUDENT),
            teacher_id=node(settings.teacher_claim, Role.TEACHER),
            students=frozenset(_ids(claims.get(settings.guardian_claim)))
            if Role.GUARDIAN in roles
            else frozenset(),
            expires=float(exp) + LEEWAY if isinstance(exp, int | float) else None,
            claims=claims,
        )


ANONYMOUS = Principal(roles=frozenset({Role.ANONYMOUS}))
OPEN = Principal(roles=frozenset({Role.OPEN}))

_CLAIMABLE = frozenset(role.value for role in CLAIMABLE)
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # keys.check_id's ids


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
        # The client caches keys; it fetches again only for a key id it has not seen.
        self._jwks = (
            jwt.PyJWKClient(settings.jwks_url, cache_keys=True, timeout=5)
            if settings.jwks_url
            else None
        )

    async def authenticate(self, authorization: str | None) -> AuthResult:
        anonymous = ANONYMOUS if self.enabled else OPEN
        if not self.enabled or not authorization:
            return AuthResult(anonymous=anonymous)
        try:
            claims = await self._verify(authorization)
        except Unauthenticated as error:
            return AuthResult(problem=error.message, anonymous=anonymous)
        except jwt.PyJWKClientConnectionError as error:
            return AuthResult(
                problem=f"the signing keys could not be fetched: {error}",
                unavailable=True,
                anonymous=anonymous,
            )
        return AuthResult(principal=Principal.of_claims(claims, self.settings))

    async def _verify(self, authorization: str) -> dict[str, Any]:
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Authorization must be 'Bearer <JWT>'")
        token = token.strip()
        try:
            if self._jwks is not None:
                # A first sight of a key id fetches the JWKS: off the event loop.
                signing = await asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)
                key: Any = signing.key
                algorithms = JWKS_ALGORITHMS
            else:
                key, algorithms = self.settings.jwt_secret, ["HS256"]
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=algorithms,
                audience=self.settings.jwt_audience,
                issuer=self.settings.jwt_issuer,
                options={"require": ["exp", "iss", "aud"]},
                leeway=LEEWAY,
            )
        except jwt.PyJWKClientConnectionError:
            raise  # the issuer is unreachable: not the token's fault (authenticate says so)
        except (jwt.PyJWTError, jwt.PyJWKClientError) as error:
            raise Unauthenticated(f"invalid token: {error}") from None
        except ValueError as error:  # PyJWT lets some malformed JWKS answers through
            raise Unauthenticated(f"the signing keys could not be read: {error}") from None
        return claims
