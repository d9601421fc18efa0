"""WA_CORS_ORIGINS: browsers on a listed origin may call the API over HTTP and open the GraphQL
websocket; other origins are refused both ways; clients sending no Origin are not affected."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect

from tests.support.settings import MakeSettings
from worker_automation.asgi.app import create_app

ALLOWED = "https://console.example"
OTHER = "https://elsewhere.example"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "content-type,x-api-key",
}


@pytest.fixture
def client(sqlite_database_url: str, make_settings: MakeSettings) -> Iterator[TestClient]:
    settings = make_settings(sqlite_database_url, None, cors_origins=[ALLOWED])
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_preflight_from_an_allowed_origin_passes(client: TestClient) -> None:
    answer = client.options("/graphql", headers={"Origin": ALLOWED, **PREFLIGHT})

    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in answer.headers["access-control-allow-methods"]
    assert "x-api-key" in answer.headers["access-control-allow-headers"].lower()


def test_preflight_from_another_origin_is_refused(client: TestClient) -> None:
    answer = client.options("/graphql", headers={"Origin": OTHER, **PREFLIGHT})

    assert answer.status_code == 400
    assert "access-control-allow-origin" not in answer.headers


def test_responses_name_only_an_allowed_origin(client: TestClient) -> None:
    allowed = client.get("/healthz", headers={"Origin": ALLOWED})
    assert allowed.headers["access-control-allow-origin"] == ALLOWED
    assert "x-request-id" in allowed.headers["access-control-expose-headers"].lower()
    assert "access-control-allow-origin" not in client.get("/healthz", headers={"Origin": OTHER}).headers


def test_no_origin_is_allowed_by_default(sqlite_database_url: str, make_settings: MakeSettings) -> None:
    with TestClient(create_app(make_settings(sqlite_database_url, None))) as plain:
        preflight = plain.options("/graphql", headers={"Origin": ALLOWED, **PREFLIGHT})
        assert preflight.status_code >= 400
        assert "access-control-allow-origin" not in preflight.headers
        assert "access-control-allow-origin" not in plain.get("/healthz", headers={"Origin": ALLOWED}).headers
        assert not opens(plain, {"Origin": ALLOWED})
        assert opens(plain, {})


def opens(client: TestClient, headers: dict[str, str]) -> bool:
    """Whether the websocket handshake on /graphql is accepted."""
    try:
        with client.websocket_connect(
            "/graphql", subprotocols=["graphql-transport-ws"], headers=headers
        ) as ws:
            return ws.accepted_subprotocol == "graphql-transport-ws"
    except (WebSocketDisconnect, WebSocketDenialResponse):
        return False


def test_websocket_from_an_allowed_origin_opens(client: TestClient) -> None:
    assert opens(client, {"Origin": ALLOWED})


def test_websocket_from_another_origin_is_refused(client: TestClient) -> None:
    assert not opens(client, {"Origin": OTHER})


def test_websocket_without_origin_opens(client: TestClient) -> None:
    """Non-browser clients (workers, scripts) send no Origin header."""
    assert opens(client, {})
