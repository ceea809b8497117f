"""Bearer tokens for writes: JWTs checked against a JWKS (OIDC, e.g. Cognito) or an HS256
secret, with `exp`, `iss` and `aud` verified. With neither configured, auth is off (the
embedded dev default) and `serve` says so at startup."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import jwt

from graph_api.errors import Unauthenticated
from graph_api.settings import Settings

JWKS_ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"]


@dataclass(frozen=True)
class Principal:
    subject: str
    claims: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class AuthResult:
    """What the request's Authorization header proved: a principal, a problem, or nothing."""

    principal: Principal | None = None
    problem: str | None = None
    # The token could not be checked (the JWKS did not answer): not the client's fault.
    unavailable: bool = False


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
        if not self.enabled or not authorization:
            return AuthResult()
        try:
            claims = await self._verify(authorization)
        except Unauthenticated as error:
            return AuthResult(problem=error.message)
        except jwt.PyJWKClientConnectionError as error:
            return AuthResult(
                problem=f"the signing keys could not be fetched: {error}", unavailable=True
            )
        return AuthResult(principal=Principal(str(claims.get("sub", "")), claims))

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
                leeway=30,
            )
        except jwt.PyJWKClientConnectionError:
            raise  # the issuer is unreachable: not the token's fault (authenticate says so)
        except (jwt.PyJWTError, jwt.PyJWKClientError) as error:
            raise Unauthenticated(f"invalid token: {error}") from None
        except ValueError as error:  # PyJWT lets some malformed JWKS answers through
            raise Unauthenticated(f"the signing keys could not be read: {error}") from None
        return claims
