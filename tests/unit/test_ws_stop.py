"""Database reads a websocket starts in the background or for an operation run to their end, and
give their connection back to the pool, before the app closes the database: stopped while the
permission check holds a connection, or with an operation its client ended while it read its key."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterable

import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from tests.support.keys import migrated_with_read_key
from tests.support.settings import MakeSettings
from worker_automation.asgi.app import create_app
from worker_automation.models.database import Database
from worker_automation.resolvers.auth import Principal, authenticate, principals_by_id
from worker_automation.schema import context, open_sockets

SUBSCRIPTION = "subscription { workerEvents { kind } }"


async def hold_a_connection(db: Database, entered: threading.Event, left: threading.Event) -> None:
    """A read that holds a real pooled connection for half a second (the app is stopped, or the
    operation ended, meanwhile); ``left`` is set only if it ran to its end."""
    async with db.reader() as session:
        await session.execute(text("SELECT 1"))
        entered.set()
        await asyncio.sleep(0.5)
    left.set()


def test_a_check_in_progress_ends_before_the_database_closes(
    sqlite_database_url: str, make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(sqlite_database_url, None)
    secret = migrated_with_read_key(settings)
    entered, left = threading.Event(), threading.Event()

    async def slow_check(db: Database, ids: Iterable[int]) -> dict[int, Principal]:
        await hold_a_connection(db, entered, left)
        return await principals_by_id(db, ids)

    monkeypatch.setattr(open_sockets, "principals_by_id", slow_check)
    monkeypatch.setattr(open_sockets, "RECHECK_SECONDS", 0.05)
    with TestClient(create_app(settings)) as client:
        with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
            ws.send_json({"type": "connection_init", "payload": {"X-API-Key": secret}})
            assert ws.receive_json()["type"] == "connection_ack"
            assert entered.wait(10), "the periodic check never ran"
    assert left.is_set(), "the check was cut off in the middle of its statement"
    gc.collect()  # a connection never checked in would be reported (as an error) here


def test_an_operation_ended_by_its_client_lets_its_key_read_end(
    sqlite_database_url: str, make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(sqlite_database_url, None)
    secret = migrated_with_read_key(settings)
    entered, left = threading.Event(), threading.Event()

    async def slow_authenticate(db: Database, raw_key: str | None) -> Principal:
        await hold_a_connection(db, entered, left)
        return await authenticate(db, raw_key)

    monkeypatch.setattr(context, "authenticate", slow_authenticate)
    with TestClient(create_app(settings)) as client:
        with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
            ws.send_json({"type": "connection_init", "payload": {"X-API-Key": secret}})
            assert ws.receive_json()["type"] == "connection_ack"
            ws.send_json({"id": "1", "type": "subscribe", "payload": {"query": SUBSCRIPTION}})
            assert entered.wait(10), "the operation never read its key"
            ws.send_json({"id": "1", "type": "complete"})
    assert left.is_set(), "the key read was cut off with its operation"
    gc.collect()
