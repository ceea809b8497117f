"""Apollo's older clients (subscriptions-transport-ws, the `graphql-ws` subprotocol): refused
in their own protocol's words, with what to use instead; a client offering both protocols
gets graphql-transport-ws, whatever its order; subscriptions-transport-ws itself, under
Node, hears why."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from support import ROOT, node_script

LEGACY = "graphql-ws"
CURRENT = "graphql-transport-ws"


def test_a_legacy_client_hears_why_it_is_refused_and_what_to_use(client: TestClient) -> None:
    with client.websocket_connect("/graphql", subprotocols=[LEGACY]) as ws:
        assert ws.accepted_subprotocol == LEGACY  # not a 101 without one: the client listens
        ws.send_json({"type": "connection_init", "payload": {}})
        message = ws.receive_json()
        assert message["type"] == "connection_error"
        assert "graphql-transport-ws" in message["payload"]["message"]
        assert "SSE" in message["payload"]["message"]
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.send_json({"id": "1", "type": "start", "payload": {"query": "{ __typename }"}})
            ws.receive_json()
    assert closed.value.code == 4406
    assert closed.value.reason == message["payload"]["message"]
    assert "not served" in closed.value.reason
    # RFC 6455's bound on a close reason: a longer one uvicorn fails to send (1006, no reason).
    assert len(closed.value.reason.encode()) <= 123


@pytest.mark.parametrize("offered", [[LEGACY, CURRENT], [CURRENT, LEGACY]])
def test_a_client_offering_both_speaks_graphql_transport_ws(
    client: TestClient, offered: list[str]
) -> None:
    with client.websocket_connect("/graphql", subprotocols=offered) as ws:
        assert ws.accepted_subprotocol == CURRENT
        ws.send_json({"type": "connection_init"})
        assert ws.receive_json()["type"] == "connection_ack"
        ws.send_json({"id": "1", "type": "subscribe", "payload": {"query": "{ __typename }"}})
        answer = ws.receive_json()
        assert (answer["id"], answer["type"]) == ("1", "next")
        assert answer["payload"]["data"] == {"__typename": "Query"}


LEGACY_CLIENT = ROOT / "tests" / "http" / "legacy_client"


def test_subscriptions_transport_ws_hears_the_refusal_and_gets_no_data(demo_api: str) -> None:
    """Apollo's older client at its defaults (tests/http/legacy_client/legacy.mjs): the protocol
    it asked for, the reason in its connectionCallback and in the close, and no event."""
    done = node_script(LEGACY_CLIENT, "legacy.mjs", f"{demo_api}/graphql", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    heard = json.loads(done.stdout.strip().splitlines()[-1])
    assert "timedOut" not in heard, heard
    assert heard["protocol"] == LEGACY
    assert "use graphql-transport-ws" in heard["connectionError"]
    assert heard["close"]["code"] == 4406
    assert heard["close"]["reason"] == heard["connectionError"]
    assert heard["data"] == []
