"""After large answers: one release for a burst, what lets go of the answer's bytes first."""

from __future__ import annotations

import asyncio

import pytest

from worker_automation.infra import memory
from worker_automation.infra.memory import MemoryReleaser


@pytest.fixture
def releases(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    done: list[str] = []
    monkeypatch.setattr(memory, "_collect_and_trim", lambda: done.append("collect"))
    return done


async def test_small_answers_release_nothing(releases: list[str]) -> None:
    releaser = MemoryReleaser(threshold=100, delay=0.01)
    releaser.answered(99)
    await asyncio.sleep(0.05)
    assert releases == []


async def test_a_burst_of_large_answers_is_released_once_after_the_first_step(releases: list[str]) -> None:
    async def first() -> None:
        await asyncio.sleep(0.01)
        releases.append("first")

    releaser = MemoryReleaser(threshold=100, delay=0.01, first=first)
    for _ in range(5):
        releaser.answered(100)
    await asyncio.sleep(0.1)
    assert releases == ["first", "collect"]
    releaser.answered(1000)
    await asyncio.sleep(0.1)
    assert releases == ["first", "collect", "first", "collect"]


async def test_the_collection_runs_when_the_first_step_fails(releases: list[str]) -> None:
    async def first() -> None:
        raise ConnectionError("database gone")

    releaser = MemoryReleaser(threshold=1, delay=0.0, first=first)
    releaser.answered(1)
    await asyncio.sleep(0.05)
    assert releases == ["collect"]
