"""A dedicated machine's own clock: a run past the ``timeout_seconds`` of its claim answer is
stopped and reported as a timeout; a pool process leaves that to Celery; a progress report the API
refuses (the run ended by the API) stops the run too."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.unit.test_job_pipeline import AUTOMATION, RecordingClient
from worker_automation.catalog.registry import TIMEOUT_EXC_TYPE
from worker_automation.worker import pipeline as pipeline_module
from worker_automation.worker.client import Claim
from worker_automation.worker.pipeline import JobPipeline, Outcome
from worker_automation.worker.progress import report_progress

LIMIT = 0.2


class LimitedClient(RecordingClient):
    """Grants claims carrying a time limit, records failures with their type, and answers
    progress with ``still_ours``."""

    def __init__(self, still_ours: bool = True) -> None:
        super().__init__()
        self.still_ours = still_ours

    async def claim(
        self, job_id: int, task_id: str | None = None, on_sent: Callable[[], None] | None = None
    ) -> Claim:
        self.calls.append(("start", job_id))
        job = {"id": job_id, "automation_type": AUTOMATION, "context": {}, "task_id": "t-1"}
        return Claim({**job, "timeout_seconds": LIMIT})

    async def progress(self, job_id: int, percent: int, message: str | None = None) -> bool:
        self.calls.append(("progress", percent, message))
        return self.still_ours

    async def fail(
        self,
        job_id: int,
        error: str,
        exc_type: str | None = None,
        traceback: str | None = None,
        task_id: str | None = None,
    ) -> bool:
        self.calls.append(("fail", error, exc_type, task_id))
        return True


class Sleeper:
    """An automation that sleeps ``seconds`` and notes whether it was stopped."""

    def __init__(self, seconds: float, progress: bool = False) -> None:
        self.seconds = seconds
        self.progress = progress
        self.stopped = False

    async def __call__(self, job_id: int, automation: str, context: dict[str, Any]) -> dict[str, Any]:
        if self.progress:
            report_progress(10)
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.stopped = True
            raise
        return {"slept": self.seconds}


async def test_a_machine_stops_a_run_past_its_limit_and_reports_a_timeout() -> None:
    client, sleeper = LimitedClient(), Sleeper(30.0)
    pipeline = JobPipeline(client, {AUTOMATION: sleeper}, own_time_limits=True)
    started = time.monotonic()
    result = await pipeline.run(7)
    assert time.monotonic() - started < 5.0
    message = f"timeout: a execucao passou do limite de {LIMIT:g} s"
    assert result.outcome is Outcome.FAILED and result.reason == message
    assert client.calls[-1] == ("fail", message, TIMEOUT_EXC_TYPE, "t-1")
    await asyncio.sleep(0)
    assert sleeper.stopped


async def test_a_run_within_its_limit_and_a_pool_run_are_not_stopped_by_the_clock() -> None:
    quick = LimitedClient()
    assert (await JobPipeline(quick, {AUTOMATION: Sleeper(0.01)}, own_time_limits=True).run(7)).outcome is (
        Outcome.COMPLETED
    )
    # A pool process: Celery's soft time limit stops the run, not this clock.
    pool = LimitedClient()
    assert (await JobPipeline(pool, {AUTOMATION: Sleeper(LIMIT * 2)}).run(7)).outcome is Outcome.COMPLETED


async def test_a_refused_progress_report_stops_the_run() -> None:
    client, sleeper = LimitedClient(still_ours=False), Sleeper(30.0, progress=True)
    result = await JobPipeline(client, {AUTOMATION: sleeper}).run(7)
    assert result.outcome is Outcome.LOST
    await asyncio.sleep(0)
    assert sleeper.stopped and not [call for call in client.calls if call[0] in ("fail", "complete")]


async def test_a_stopped_sync_automation_keeps_its_run_until_its_thread_returns() -> None:
    """A thread cannot be interrupted: the run past its limit holds its slot, and its timeout is
    reported only once the thread has returned, so no retry starts beside it."""
    release = threading.Event()

    def blocking(job_id: int, automation: str, context: dict[str, Any]) -> None:
        release.wait(10.0)

    client = LimitedClient()
    pipeline = JobPipeline(client, {AUTOMATION: blocking}, own_time_limits=True)
    run = asyncio.create_task(pipeline.run(7))
    await asyncio.sleep(LIMIT * 3)
    assert not run.done() and pipeline.automations_in_threads() == 1
    assert not [call for call in client.calls if call[0] == "fail"]
    release.set()
    result = await asyncio.wait_for(run, 5.0)
    assert result.outcome is Outcome.FAILED and pipeline.automations_in_threads() == 0
    assert client.calls[-1][0] == "fail" and client.calls[-1][2] == TIMEOUT_EXC_TYPE


async def test_a_thread_that_outlasts_the_grace_gives_its_slot_back(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def blocking(job_id: int, automation: str, context: dict[str, Any]) -> None:
        release.wait(10.0)

    monkeypatch.setattr(pipeline_module, "TIME_LIMIT_GRACE_SECONDS", LIMIT)
    client = LimitedClient()
    pipeline = JobPipeline(client, {AUTOMATION: blocking}, own_time_limits=True)
    started = time.monotonic()
    assert (await pipeline.run(7)).outcome is Outcome.FAILED
    assert time.monotonic() - started < 5.0
    # Counted until its function returns.
    assert pipeline.automations_in_threads() == 1
    release.set()
    for _ in range(500):  # up to 5 s
        if not pipeline.automations_in_threads():
            break
        await asyncio.sleep(0.01)
    assert pipeline.automations_in_threads() == 0
