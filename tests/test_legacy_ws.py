"""Apollo's older clients (subscriptions-transport-ws, the `graphql-ws` subprotocol): refused
in their own protocol's words, with what to use instead; a client offering both protocols
gets graphql-transport-ws, whatever its order."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

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
    assert "not served" in closed.value.reason


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
