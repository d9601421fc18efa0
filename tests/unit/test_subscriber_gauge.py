"""``wa_subscribers`` counts the GraphQL subscriptions running on websockets, both protocols."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY
from starlette.testclient import TestClient

from tests.support.keys import migrated_with_read_key
from tests.support.settings import MakeSettings
from worker_automation.asgi.app import create_app

SUBSCRIPTION = "subscription { workerEvents { kind } }"


def subscribers() -> float:
    return REGISTRY.get_sample_value("wa_subscribers") or 0.0


@pytest.fixture
def client_and_key(sqlite_database_url: str, make_settings: MakeSettings) -> Iterator[tuple[TestClient, str]]:
    settings = make_settings(sqlite_database_url, None)
    secret = migrated_with_read_key(settings)
    with TestClient(create_app(settings)) as client:
        yield client, secret


def wait_for(expected: float) -> None:
    for _ in range(200):
        if subscribers() == expected:
            return
        time.sleep(0.01)
    assert subscribers() == expected


def test_transport_ws_subscription_is_counted_while_it_runs(client_and_key: tuple[TestClient, str]) -> None:
    client, key = client_and_key
    before = subscribers()
    with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
        ws.send_json({"type": "connection_init", "payload": {"X-API-Key": key}})
        assert ws.receive_json()["type"] == "connection_ack"
        ws.send_json({"id": "1", "type": "subscribe", "payload": {"query": SUBSCRIPTION}})
        wait_for(before + 1)
        ws.send_json({"id": "1", "type": "complete"})
        wait_for(before)


def test_legacy_ws_subscription_is_counted_while_it_runs(client_and_key: tuple[TestClient, str]) -> None:
    client, key = client_and_key
    before = subscribers()
    with client.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        ws.send_json({"type": "connection_init", "payload": {"X-API-Key": key}})
        assert ws.receive_json()["type"] == "connection_ack"
        ws.send_json({"id": "1", "type": "start", "payload": {"query": SUBSCRIPTION}})
        wait_for(before + 1)
        ws.send_json({"id": "1", "type": "stop"})
        wait_for(before)
