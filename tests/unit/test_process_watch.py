"""A read that only explains something with the processes (why a job waits) never waits out an
inspection once there is a snapshot: it gets the last one and the next look runs in the
background, one at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, cast

import pytest

from worker_automation.resolvers import processes
from worker_automation.resolvers.processes import ProcessView, ProcessWatch
from worker_automation.resolvers.services import Services

LOOK_SECONDS = 0.3


class _Services:
    """What a watch uses of the services: somewhere to run work in the background."""

    def __init__(self) -> None:
        self.background: set[asyncio.Task[Any]] = set()

    def in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)


async def test_a_stale_snapshot_is_answered_at_once_and_looked_at_again_in_the_background(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watch = ProcessWatch()
    looks: list[int] = []

    async def slow_look(_services: Services) -> list[ProcessView]:
        looks.append(len(looks) + 1)
        await asyncio.sleep(LOOK_SECONDS)
        return cast(list[ProcessView], [f"look {len(looks)}"])

    monkeypatch.setattr(watch, "_look", slow_look)
    services = cast(Services, _Services())
    loop = asyncio.get_running_loop()

    # The first read has nothing to show yet: it waits for the look.
    started = loop.time()
    assert _names(await watch.recent(services)) == ["look 1"]
    assert loop.time() - started >= LOOK_SECONDS

    # Stale: twenty reads at once get the last snapshot without waiting; one look runs behind them.
    monkeypatch.setattr(watch, "_taken", loop.time() - processes.FRESH_SECONDS - 1)
    started = loop.time()
    answers = await asyncio.gather(*(watch.recent(services) for _ in range(20)))
    assert [_names(answer) for answer in answers] == [["look 1"]] * 20
    assert loop.time() - started < LOOK_SECONDS / 3
    await asyncio.gather(*cast(_Services, services).background)
    assert looks == [1, 2]
    assert _names(await watch.recent(services)) == ["look 2"]


def _names(found: list[ProcessView]) -> list[str]:
    return [str(view) for view in found]
