"""Opaque, integrity-protected pagination cursors.

A cursor is `base64url(json).base64url(hmac)`. Its payload names the field it was issued
for, the key range (partition and prefix) it walks, and the key of the last item returned.
The HMAC binds all three, so a cursor edited by hand, or used on another field or another
parent, is refused with BAD_USER_INPUT and never becomes a read of another partition.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping

from graph_api.errors import BadUserInput
from graph_api.model.keys import Range

_MAC_BYTES = 16


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    # Only the canonical spelling: unused low bits or padding would make one cursor many.
    if _b64(data) != text:
        raise ValueError("not canonical base64url")
    return data


class Cursors:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:_MAC_BYTES]

    def encode(self, field: str, rng: Range, key: Mapping[str, str]) -> str:
        payload = json.dumps(
            {"f": field, "r": rng.label, "k": dict(key)}, separators=(",", ":"), sort_keys=True
        ).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def decode(
        self, cursor: str, field: str, rng: Range, argument: str = "after"
    ) -> dict[str, str]:
        """The key a cursor points at, if it was issued by us for this field and range.

        Anything else (edited, of another field or parent, or signed with another secret: a
        server restarted with a new one) is BAD_USER_INPUT on `argument`, on this field.
        """
        invalid = BadUserInput(
            f"{argument} is not a cursor of this field: it was issued for another list, or"
            " before the server's cursor secret changed, or edited. Start again from the"
            f" first page, without {argument}.",
            field=argument,
        )
        try:
            body, mac = cursor.split(".")
            payload = _unb64(body)
            if not hmac.compare_digest(_unb64(mac), self._mac(payload)):
                raise invalid
            data = json.loads(payload)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise invalid from None
        key = data.get("k")
        if data.get("f") != field or data.get("r") != rng.label or not isinstance(key, dict):
            raise invalid
        # Defence in depth: the key must lie in the range whatever the MAC says.
        if key.get(rng.pk_name) != rng.pk or not str(key.get(rng.sk_name, "")).startswith(
            rng.prefix
        ):
            raise invalid
        if not all(isinstance(v, str) for v in key.values()):
            raise invalid
        return key
