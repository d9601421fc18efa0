"""Every write through the REST API leaves an audit entry: who, what, on which target, how it ended."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from tests.integration.rest_support import BASE, Api, add_job, audit_entries, running_api
from tests.support.settings import MakeSettings
from worker_automation.models import ApiKey
from worker_automation.resolvers.auth import hash_secret

pytestmark = pytest.mark.services


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    async with running_api(make_settings(pg_database_url, redis_url)) as running:
        yield running


async def key_label(api: Api, kind: str) -> str:
    async with api.db.session() as session:
        row = await session.scalar(
            select(ApiKey).where(ApiKey.key_hash == hash_secret(getattr(api.keys, kind)))
        )
        assert row is not None
        return f"key:{row.id}:{row.name}"


async def test_each_write_is_audited(api: Api) -> None:
    queued = await add_job(api.db, "AGENDADO")
    failed = await add_job(api.db, "FALHA")
    running = await add_job(api.db, "EXECUTANDO")
    await add_job(api.db, "AGENDADO", cliente_id=None, task_id=None)
    # (kind, method, path, body, action, target, result, perfil)
    writes: list[tuple[str, str, str, Any, str, str | None, str, str]] = [
        (
            "funcionario",
            "POST",
            f"/{queued}/reorder",
            {"new_priority": 3},
            "reorder",
            f"worker:{queued}",
            "ok",
            "funcionario",
        ),
        (
            "funcionario",
            "POST",
            f"/{queued}/move",
            {"target_queue": "scan"},
            "move",
            f"worker:{queued}",
            "ok",
            "funcionario",
        ),
        ("funcionario", "POST", f"/{failed}/retry", None, "retry", f"worker:{failed}", "ok", "funcionario"),
        ("admin", "POST", f"/{running}/cancel", None, "cancel", f"worker:{running}", "ok", "administrador"),
        (
            "admin",
            "POST",
            f"/{running}/cancel",
            None,
            "cancel",
            f"worker:{running}",
            "conflict",
            "administrador",
        ),
        ("diretoria", "POST", "/sync-orphans", None, "sync_orphans", None, "ok", "diretoria"),
        ("diretoria", "DELETE", "/cleanup-no-client", None, "cleanup_no_client", None, "ok", "diretoria"),
        (
            "admin",
            "POST",
            "/clear-queue?scope=queued&queue=scan",
            None,
            "clear_queue",
            "queue:scan",
            "ok",
            "administrador",
        ),
        (
            "admin",
            "POST",
            "/broker/purge-queue/scan?confirm=true",
            None,
            "purge_queue",
            "queue:scan",
            "ok",
            "administrador",
        ),
    ]
    for kind, method, path, body, action, target, result, perfil in writes:
        seen = len(await audit_entries(api.db))
        response = await api.call(method, BASE + path, kind, json=body)
        assert response.status_code == (409 if result == "conflict" else 200), response.text
        entries = await audit_entries(api.db)
        assert len(entries) == seen + 1, (action, [e.action for e in entries])
        entry = entries[-1]
        assert (entry.action, entry.target, entry.result) == (action, target, result)
        assert entry.actor == await key_label(api, kind)
        assert entry.perfil == perfil
        assert entry.at is not None


async def test_reads_and_refused_callers_leave_no_entry(api: Api) -> None:
    queued = await add_job(api.db, "AGENDADO")
    await api.call("GET", f"{BASE}/dashboard")
    await api.call("GET", f"{BASE}/{queued}")
    # Refused before reaching the operation: not an operation, so nothing to audit.
    await api.call("POST", f"{BASE}/{queued}/cancel", None)
    await api.call("POST", f"{BASE}/clear-queue", "funcionario")
    assert await audit_entries(api.db) == []
