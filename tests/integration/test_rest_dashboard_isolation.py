"""With Redis unreachable the database-backed answers still come, and only broker parts go empty.

The app's Redis points at a closed port; PostgreSQL is real. Everything here must answer fast:
an operator's dashboard cannot hang because the broker is gone.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from tests.integration.rest_support import (
    BASE,
    Api,
    add_cliente,
    add_job,
    assert_error,
    assert_success,
    running_api,
    snapshot,
)
from tests.support.settings import MakeSettings

pytestmark = pytest.mark.services

CLOSED_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture
async def api(pg_database_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    settings = make_settings(pg_database_url, CLOSED_REDIS, inspect_timeout_seconds=0.3)
    async with running_api(settings) as running:
        cliente = await add_cliente(running.db)
        for status in ("EXECUTANDO", "AGENDADO", "AGENDADO", "CONCLUIDO", "FALHA"):
            await add_job(running.db, status, cliente_id=cliente)
        yield running


async def test_dashboard_empties_only_the_broker_section(api: Api) -> None:
    started = time.monotonic()
    data = assert_success(await api.call("GET", f"{BASE}/dashboard"), "Dashboard recuperado com sucesso")
    assert time.monotonic() - started < 5
    assert list(data["errors"]) == ["broker"]
    assert data["broker"] == {"available": False, "queues": {}}
    assert data["stats"]["total"] == 5
    assert data["summary"]["total_active"] == 1 and data["summary"]["total_pending"] == 2
    assert [q["active_count"] for q in data["queues"] if q["queue_name"] == "certidao"] == [1]
    assert len(data["active"]) == 1
    assert data["queued"]["total"] == 2 and len(data["queued"]["items"]) == 2
    assert {i["status"] for i in data["history"]} == {"CONCLUIDO", "FALHA"}


async def test_broker_status_says_unavailable(api: Api) -> None:
    data = assert_success(
        await api.call("GET", f"{BASE}/broker-status"), "Snapshot do broker recuperado com sucesso"
    )
    assert data == {"available": False, "queues": {}}


async def test_workers_inspect_is_empty_and_quick(api: Api) -> None:
    started = time.monotonic()
    data = assert_success(await api.call("GET", f"{BASE}/workers-inspect"), "Inspect recuperado com sucesso")
    assert time.monotonic() - started < 5
    assert data == {
        "active": {},
        "reserved": {},
        "scheduled": {},
        "stats": {},
        "ping": {},
        "available": False,
    }


async def test_database_reads_still_answer(api: Api) -> None:
    for path in ("/", "/stats", "/active", "/queued", "/queue-live-status", "/search-automations?q=cnd"):
        response = await api.call("GET", BASE + path)
        assert response.status_code == 200, (path, response.text)


async def test_broker_writes_refuse_with_503_and_change_nothing(api: Api) -> None:
    running = await add_job(api.db, "EXECUTANDO")
    before = await snapshot(api.db)
    # A running job cannot be stopped without the broker: marking it cancelled would be a lie.
    assert_error(await api.call("POST", f"{BASE}/{running}/cancel"), 503)
    assert_error(await api.call("POST", f"{BASE}/clear-queue?scope=all"), 503)
    assert_error(await api.call("POST", f"{BASE}/broker/purge-queue/scan?confirm=true"), 503)
    assert_error(await api.call("DELETE", f"{BASE}/cleanup-no-client"), 503)
    assert await snapshot(api.db) == before
