"""After large answers: one release for a burst, what lets go of the answer's bytes first."""

from __future__ import annotations

import asyncio
import logging

import pytest
from sqlalchemy import text

from worker_automation.infra import memory
from worker_automation.infra.memory import MemoryReleaser
from worker_automation.models.database import Database
from worker_automation.settings import Settings


@pytest.fixture
def releases(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    done: list[str] = []
    monkeypatch.setattr(memory, "_collect_and_trim", lambda: done.append("collect"))
    return done


async def test_small_answers_release_nothing(releases: list[str]) -> None:
    releaser = MemoryReleaser(threshold=100, delay=0.01)
    releaser.handled(99)
    await asyncio.sleep(0.05)
    assert releases == []


async def test_a_burst_of_large_answers_is_released_once_after_the_first_step(releases: list[str]) -> None:
    async def first() -> None:
        await asyncio.sleep(0.01)
        releases.append("first")

    releaser = MemoryReleaser(threshold=100, delay=0.01, first=first)
    for _ in range(5):
        releaser.handled(100)
    await asyncio.sleep(0.1)
    assert releases == ["first", "collect"]
    releaser.handled(1000)
    await asyncio.sleep(0.1)
    assert releases == ["first", "collect", "first", "collect"]


async def test_the_collection_runs_when_the_first_step_fails(releases: list[str]) -> None:
    async def first() -> None:
        raise ConnectionError("database gone")

    releaser = MemoryReleaser(threshold=1, delay=0.0, first=first)
    releaser.handled(1)
    await asyncio.sleep(0.05)
    assert releases == ["collect"]


async def test_on_sqlite_the_first_step_does_nothing_and_says_nothing(
    sqlite_database_url: str, caplog: pytest.LogCaptureFixture, releases: list[str]
) -> None:
    db = Database(Settings(database_url=sqlite_database_url))
    try:
        async with db.reader() as session:
            assert (await session.execute(text("SELECT 1"))).scalar_one() == 1
        releaser = MemoryReleaser(threshold=1, delay=0.0, first=db.refresh_idle_connections)
        with caplog.at_level(logging.WARNING):
            releaser.handled(1)
            await asyncio.sleep(0.05)
        assert releases == ["collect"]
        assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []
    finally:
        await db.close()
