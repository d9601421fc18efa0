"""Identical reads in flight share one computation, and no caller gets a result older than its call."""

from __future__ import annotations

import asyncio

import pytest

from worker_automation.domain.sharing import SharedReads


class Source:
    """A read whose every run returns the state at the moment the run started."""

    def __init__(self) -> None:
        self.state = 0
        self.runs = 0
        self.release = asyncio.Event()

    async def read(self) -> int:
        self.runs += 1
        seen = self.state
        await self.release.wait()
        return seen


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_callers_arriving_during_a_run_share_the_next_one() -> None:
    shared, source = SharedReads(), Source()
    first = asyncio.create_task(shared.run("k", source.read))
    await settle()
    source.state = 1  # a write committed after the first run started
    later = [asyncio.create_task(shared.run("k", source.read)) for _ in range(20)]
    await settle()
    assert source.runs == 1
    source.release.set()
    assert await first == 0
    # Every later caller asked after the write: none may get the first run's (older) answer.
    assert await asyncio.gather(*later) == [1] * 20
    assert source.runs == 2
    assert len(shared) == 0  # nothing kept once nobody is reading


async def test_different_keys_do_not_share() -> None:
    shared, source = SharedReads(), Source()
    source.release.set()
    results = await asyncio.gather(shared.run("a", source.read), shared.run("b", source.read))
    assert list(results) == [0, 0]
    assert source.runs == 2


async def test_a_failure_reaches_every_caller_of_that_run_only() -> None:
    shared = SharedReads()
    gate = asyncio.Event()
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        await gate.wait()
        if calls <= 2:
            raise RuntimeError(f"run {calls} failed")
        return "ok"

    first = asyncio.create_task(shared.run("k", flaky))
    await settle()
    waiting = [asyncio.create_task(shared.run("k", flaky)) for _ in range(3)]
    await settle()
    gate.set()
    with pytest.raises(RuntimeError, match="run 1"):
        await first
    for task in waiting:
        with pytest.raises(RuntimeError, match="run 2"):
            await task
    assert await shared.run("k", flaky) == "ok"


async def test_a_caller_going_away_does_not_cancel_the_others() -> None:
    shared, source = SharedReads(), Source()
    first = asyncio.create_task(shared.run("k", source.read))
    await settle()
    first.cancel()
    other = asyncio.create_task(shared.run("k", source.read))
    await settle()
    source.release.set()
    assert await other == 0
    assert first.cancelled()


def test_a_run_left_behind_by_an_ended_event_loop_does_not_block_the_next_loop() -> None:
    shared = SharedReads()
    never = asyncio.Event()

    async def stuck() -> int:
        await never.wait()
        return 0

    async def abandon() -> None:
        task = asyncio.create_task(shared.run("k", stuck))
        await settle()
        task.cancel()  # the loop ends with the shared run still pending

    asyncio.run(abandon())

    async def fresh() -> int:
        return 7

    assert asyncio.run(asyncio.wait_for(shared.run("k", fresh), 2)) == 7
