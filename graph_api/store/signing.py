"""AWS Signature Version 4 for the requests `store/direct.py` sends: botocore's signature,
computed without its generic request objects.

botocore signs through `SigV4Auth.add_auth`, which copies the headers twice into
`email.message`-based maps, parses the URL twice and derives the signing key with four HMACs
on every call: 55 µs of a Query's ~335 µs of client CPU, measured. A direct call's request
is always the same shape (POST to the endpoint's `/`, no query string, a JSON body, headers
we wrote), so the canonical request is a few string joins, and the signing key changes only
with the date and the credentials. The rules are botocore's (`botocore/auth.py`): every
header but the blacklisted ones is signed, names lower-cased and sorted, values trimmed with
runs of blanks made one, repeated names joined by commas; the payload is signed by its
SHA-256. tests/test_direct.py checks the result against `SigV4Auth` on the same request.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from time import time as clock

from botocore.auth import SIGNED_HEADERS_BLACKLIST

ALGORITHM = "AWS4-HMAC-SHA256"
_UNSIGNED = frozenset(SIGNED_HEADERS_BLACKLIST)


class _Stamp(threading.local):
    """This thread's last `X-Amz-Date` and the second it names."""

    second = -1
    text = ""


_stamp = _Stamp()


def timestamp() -> str:
    """`X-Amz-Date`: now, in UTC, as SigV4 writes it (botocore's `SIGV4_TIMESTAMP`). It
    names a whole second: written once a second, not once a call (`strftime` was ~10 µs of
    a Query's client CPU)."""
    second = int(clock())
    stamp = _stamp
    if second != stamp.second:
        stamp.text = datetime.fromtimestamp(second, UTC).strftime("%Y%m%dT%H%M%SZ")
        stamp.second = second
    return stamp.text


class Signer:
    """Signs requests for one region and service; keeps the last day's signing key."""

    def __init__(self, region: str, service: str) -> None:
        self.region = region
        self.service = service
        self._key: tuple[str, str, bytes] | None = None  # secret, date, derived key

    def _signing_key(self, secret: str, date: str) -> bytes:
        known = self._key
        if known is not None and known[0] == secret and known[1] == date:
            return known[2]
        key = f"AWS4{secret}".encode()
        for part in (date, self.region, self.service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        self._key = (secret, date, key)
        return key

    def authorization(
        self,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        *,
        access_key: str,
        secret_key: str,
        amz_date: str,
    ) -> str:
        """The `Authorization` header of a POST to the endpoint's `/` with these headers
        (`Host` and `X-Amz-Date` among them) and this body."""
        signed: dict[str, list[str]] = {}
        for name, value in headers:
            lower = name.lower()
            if lower not in _UNSIGNED:
                signed.setdefault(lower, []).append(" ".join(value.split()))
        names = sorted(signed)
        canonical_headers = "".join(f"{n}:{','.join(signed[n])}\n" for n in names)
        signed_headers = ";".join(names)
        canonical = "\n".join(
            (
                "POST",
                "/",
                "",  # no query string
                canonical_headers,
                signed_headers,
                hashlib.sha256(body).hexdigest(),
            )
        )
        date = amz_date[:8]
        scope = f"{date}/{self.region}/{self.service}/aws4_request"
        to_sign = "\n".join(
            (ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest())
        )
        key = self._signing_key(secret_key, date)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        return (
            f"{ALGORITHM} Credential={access_key}/{scope}, "
            f"SignedHeaders={signed_headers}, Signature={signature}"
        )
