"""The worker's pipeline: claim, run, report; progress throttled but its last value never lost."""

from __future__ import annotations

import asyncio
from typing import Any

from worker_automation.worker.client import Claim
from worker_automation.worker.pipeline import JobPipeline, Outcome
from worker_automation.worker.progress import report_progress

AUTOMATION = "demo.test"


class RecordingClient:
    """Stands in for the API: grants every claim and records each call in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def start(self, job_id: int, task_id: str | None = None) -> Claim:
        self.calls.append(("start", job_id))
        return Claim({"id": job_id, "automation_type": AUTOMATION, "context": {}})

    async def progress(self, job_id: int, percent: int, message: str | None = None) -> bool:
        self.calls.append(("progress", percent, message))
        await asyncio.sleep(0)
        return True

    async def complete(self, job_id: int, result: Any) -> bool:
        self.calls.append(("complete", result))
        return True

    async def fail(self, job_id: int, error: str, exc_type: str | None = None, tb: str | None = None) -> bool:
        self.calls.append(("fail", error))
        return True


async def run(fn: Any) -> tuple[Outcome, list[tuple[Any, ...]]]:
    client = RecordingClient()
    pipeline = JobPipeline(client, {AUTOMATION: fn})  # type: ignore[arg-type]
    result = await pipeline.run(7)
    return result.outcome, client.calls


async def test_last_progress_is_sent_before_completion_even_inside_the_throttle() -> None:
    async def quick(job_id: int, automation: str, context: dict[str, Any]) -> dict[str, Any]:
        report_progress(0, "Comecando")
        await asyncio.sleep(0.01)
        for percent in range(1, 100):
            report_progress(percent)
        report_progress(100, "Concluido")
        return {"ok": True}

    outcome, calls = await run(quick)
    assert outcome is Outcome.COMPLETED
    progress = [call for call in calls if call[0] == "progress"]
    # Throttled: not one request per report, but the first and the last value both arrive.
    assert len(progress) <= 3
    assert progress[0] == ("progress", 0, "Comecando")
    assert progress[-1] == ("progress", 100, "Concluido")
    assert calls[-1] == ("complete", {"ok": True})


def test_a_sync_automations_last_progress_is_kept_too() -> None:
    def blocking(job_id: int, automation: str, context: dict[str, Any]) -> str:
        report_progress(10, "lendo")
        report_progress(100, "pronto")
        return "feito"

    outcome, calls = asyncio.run(run(blocking))
    assert outcome is Outcome.COMPLETED
    assert [call for call in calls if call[0] == "progress"][-1] == ("progress", 100, "pronto")
    assert calls[-1] == ("complete", "feito")


async def test_a_job_without_progress_costs_only_claim_and_completion() -> None:
    def silent(job_id: int, automation: str, context: dict[str, Any]) -> int:
        return 1

    outcome, calls = await run(silent)
    assert outcome is Outcome.COMPLETED
    assert calls == [("start", 7), ("complete", 1)]
