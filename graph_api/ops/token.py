"""`graph-api token`: a bearer token for a role, for development and tests.

It carries the claims the server reads, under the names the settings give them
(`GRAPH_API_ROLES_CLAIM`, ...), and is signed as the server checks HS256 tokens
(`tokens.hs256_signer`): with GRAPH_API_JWT_SECRET and its issuer and audience, or, on the
embedded backend with no sign-in configured, with its development signer. A server that
checks a JWKS takes tokens from its issuer only: none is made for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_api.errors import BadUserInput
from graph_api.graph.auth.policy import CLAIMABLE, Role
from graph_api.graph.auth.tokens import hs256_signer, role_claims, sign
from graph_api.model import keys
from graph_api.settings import Settings

ROLES = sorted(role.value for role in CLAIMABLE)


class TokenError(ValueError):
    """What is wrong with the request for a token, one line for the user."""


def claims(
    settings: Settings,
    role: Role,
    node_id: str | None = None,
    students: Sequence[str] = (),
    ttl: int = 3600,
    now: float | None = None,
) -> dict[str, Any]:
    """The claims of a token for `role`: a teacher or a student is the node `node_id`, a
    guardian answers for `students`."""
    if role not in CLAIMABLE:
        raise TokenError(f"--role must be one of {', '.join(ROLES)}")
    if role in (Role.TEACHER, Role.STUDENT) and node_id is None:
        raise TokenError(f"--role {role} needs --id: the {role} node the caller is")
    if role not in (Role.TEACHER, Role.STUDENT) and node_id is not None:
        raise TokenError("--id is for --role teacher or student")
    if (role is Role.GUARDIAN) != bool(students):
        raise TokenError("--students (ID,ID) goes with --role guardian, and it needs one or more")
    if ttl < 1:
        raise TokenError("--ttl must be 1 second or more")
    try:
        node = keys.check_id(node_id, field="--id") if node_id is not None else None
        wards = [keys.check_id(id_, field="--students") for id_ in students]
    except BadUserInput as error:
        raise TokenError(error.message) from None
    return role_claims(settings, role, node, wards, ttl, now)


def token(settings: Settings, body: dict[str, Any]) -> str:
    """`body` signed as `settings`' server checks HS256 tokens, with its `iss` and `aud`."""
    signer = hs256_signer(settings)
    if signer is None:
        raise TokenError(
            "this server checks tokens against GRAPH_API_JWKS_URL: get them from its issuer"
            if settings.jwks_url
            else "no signer: set GRAPH_API_JWT_SECRET (with GRAPH_API_JWT_ISSUER and"
            " GRAPH_API_JWT_AUDIENCE), as the server it is for has them"
        )
    return sign(signer, body)
