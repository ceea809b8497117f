"""What hostile input against the running app must get (the `hostile` and `h` fixtures of
conftest.py): a coded error, no traceback, and nothing written."""

from __future__ import annotations

from typing import Any

from support import Hostile, assert_no_key_in_messages, scan

# -- hostile input against the running app (the `hostile` and `h` fixtures) ------------------

# BAD_REQUEST: refused at the HTTP level, before it became an operation (graphql_http).
CODES = {"BAD_USER_INPUT", "QUERY_TOO_COSTLY", "UNAUTHENTICATED", "NOT_FOUND", "BAD_REQUEST"}
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


def assert_unchanged(h: Hostile, *, attempts_allowed: bool = False) -> None:
    """Nothing was written: no write was even sent, or (where a write's condition is what
    refuses it) the table still holds exactly what was seeded."""
    attempts = WRITES & set(h.sent)
    if attempts_allowed and attempts:
        assert scan(h.services) == h.items
    else:
        assert not attempts, h.sent


def assert_no_traceback(response: Any) -> None:
    assert response.status_code < 500, response.text[:500]
    for leak in ("Traceback", 'File "', "Error:"):
        assert leak not in response.text.replace("Syntax Error:", ""), response.text[:500]
    if response.headers.get("content-type", "").startswith("application/"):
        assert_no_key_in_messages(response.json().get("errors") or [])


def assert_coded(response: Any, expected: str) -> dict[str, Any]:
    assert_no_traceback(response)
    body: dict[str, Any] = response.json()
    codes = [e.get("extensions", {}).get("code") for e in body.get("errors", [])]
    # A mutation's client errors are user errors in its payload (no path: its root field).
    payloads = (body.get("data") or {}).values()
    codes += [e["code"] for p in payloads if isinstance(p, dict) for e in p.get("userErrors", [])]
    assert codes, body
    assert set(codes) <= CODES, body
    assert expected in codes, body
    # Refused before DynamoDB, unless a parent had to be read first or NOT_FOUND had to look.
    root_only = all(len(e.get("path") or []) <= 1 for e in body.get("errors", []))
    if expected != "NOT_FOUND" and root_only:
        assert body.get("extensions", {}).get("dynamodb", {}).get("requests", 0) == 0, body
    return body
