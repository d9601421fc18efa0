"""An operation on many large rows gives its memory back, though its answer is small: what it
announces counts as much as what it answers (on SQLite with the embedded broker)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import insert

from tests.support.settings import MakeSettings
from worker_automation.infra import memory
from worker_automation.infra.memory import MemoryReleaser
from worker_automation.models import Job, utcnow
from worker_automation.process.runtime import Runtime
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.maintenance import clear_queue
from worker_automation.resolvers.services import Services

CONTEXT_BYTES = 8 * 1024
THRESHOLD = 64 * 1024


def _queued(n: int, queue: str) -> list[dict[str, Any]]:
    now = utcnow()
    return [
        {
            "task_id": f"big-{queue}-{i}",
            "automation_type": "demo.echo",
            "queue": queue,
            "status": "AGENDADO",
            "priority": 0,
            "retry_count": 0,
            "progress": 0,
            "context": {"blob": "x" * CONTEXT_BYTES},
            "created_at": now,
            "updated_at": now,
        }
        for i in range(n)
    ]


@pytest.fixture
def releases(sqlite_services: Services, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    done: list[str] = []
    monkeypatch.setattr(memory, "_collect_and_trim", lambda: done.append("collect"))
    sqlite_services.memory = MemoryReleaser(threshold=THRESHOLD, delay=0.0)
    return done


async def test_a_bulk_cancel_of_large_rows_releases_once(
    sqlite_services: Services, releases: list[str]
) -> None:
    async with sqlite_services.db.session() as session:
        await session.execute(insert(Job), _queued(20, "scan") + _queued(1, "observer"))

    # One job of 8 KiB: under the threshold, nothing to give back.
    one = await clear_queue(sqlite_services, Actor("test"), "queued", "observer")
    await asyncio.sleep(0.05)
    assert (one.cancelled, releases) == (1, [])

    # Twenty of them (160 KiB announced behind an answer of a few bytes): one release.
    many = await clear_queue(sqlite_services, Actor("test"), "queued", "scan")
    await asyncio.sleep(0.05)
    assert (many.cancelled, releases) == (20, ["collect"])


async def test_the_api_and_its_services_share_one_releaser(
    sqlite_database_url: str, make_settings: MakeSettings
) -> None:
    """The transports note answers before the services exist; the resolvers note announcements."""
    runtime = Runtime(make_settings(sqlite_database_url, None))
    try:
        assert (await runtime.services()).memory is runtime.memory
    finally:
        await runtime.close()
