"""The worker's pipeline: claim, run, report; progress throttled but its last value never lost."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worker_automation.worker.client import Claim, WorkerApiClient
from worker_automation.worker.http import ApiUnreachable
from worker_automation.worker.outbox import Outbox
from worker_automation.worker.pipeline import JobPipeline, Outcome
from worker_automation.worker.progress import report_progress

AUTOMATION = "demo.test"


class RecordingClient(WorkerApiClient):
    """Stands in for the API: grants every claim and records each call in order (it never
    connects: every call the pipeline makes is answered here)."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9", "key")
        self.calls: list[tuple[Any, ...]] = []

    async def claim(
        self, job_id: int, task_id: str | None = None, on_sent: Callable[[], None] | None = None
    ) -> Claim:
        self.calls.append(("start", job_id))
        return Claim({"id": job_id, "automation_type": AUTOMATION, "context": {}})

    async def progress(self, job_id: int, percent: int, message: str | None = None) -> bool:
        self.calls.append(("progress", percent, message))
        await asyncio.sleep(0)
        return True

    async def complete(
        self,
        job_id: int,
        result: Any,
        on_sent: Callable[[], None] | None = None,
        task_id: str | None = None,
    ) -> bool:
        self.calls.append(("complete", result))
        return True

    async def fail(
        self,
        job_id: int,
        error: str,
        exc_type: str | None = None,
        traceback: str | None = None,
        task_id: str | None = None,
    ) -> bool:
        self.calls.append(("fail", error))
        return True


async def run(fn: Any) -> tuple[Outcome, list[tuple[Any, ...]]]:
    client = RecordingClient()
    pipeline = JobPipeline(client, {AUTOMATION: fn})
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


class SlowAnswers(RecordingClient):
    """Completions are sent at once but answered only when the test says so."""

    def __init__(self, *, still_ours: bool = True) -> None:
        super().__init__()
        self.answer = asyncio.Event()
        self.still_ours = still_ours

    async def complete(
        self,
        job_id: int,
        result: Any,
        on_sent: Callable[[], None] | None = None,
        task_id: str | None = None,
    ) -> bool:
        self.calls.append(("complete", job_id))
        if on_sent is not None:
            on_sent()
        await self.answer.wait()
        self.calls.append(("answered", job_id))
        return self.still_ours


def names(directory: Path) -> list[str]:
    """The completions kept in an outbox directory."""
    return sorted(path.name for path in directory.glob("*.json"))


def echo(job_id: int, automation: str, context: dict[str, Any]) -> int:
    return job_id


async def test_a_completion_answered_in_background_is_read_before_the_next_claim(tmp_path: Path) -> None:
    client = SlowAnswers()
    outbox = Outbox(tmp_path)
    pipeline = JobPipeline(client, {AUTOMATION: echo}, outbox=outbox)

    first = await pipeline.run(1)
    # Returned once the completion was sent, its answer still outstanding and kept in the outbox.
    assert first.outcome is Outcome.COMPLETED
    assert client.calls == [("start", 1), ("complete", 1)]
    assert names(tmp_path) == [f"{outbox.token}-1.json"]

    second = asyncio.create_task(pipeline.run(2))
    await asyncio.sleep(0.05)
    assert ("start", 2) not in client.calls  # the next claim waits for the previous answer
    client.answer.set()
    assert (await second).outcome is Outcome.COMPLETED
    assert client.calls[:4] == [("start", 1), ("complete", 1), ("answered", 1), ("start", 2)]

    await pipeline.settle()
    assert client.calls[-1] == ("answered", 2)
    assert not names(tmp_path)


async def test_a_completion_refused_in_background_does_not_stop_the_next_job(tmp_path: Path) -> None:
    client = SlowAnswers(still_ours=False)
    pipeline = JobPipeline(client, {AUTOMATION: echo}, outbox=Outbox(tmp_path))
    await pipeline.run(1)
    client.answer.set()
    assert (await pipeline.run(2)).outcome is Outcome.LOST  # answered before it was sent: said at once
    assert [c[0] for c in client.calls] == ["start", "complete", "answered", "start", "complete", "answered"]
    assert not names(tmp_path)


async def test_completions_left_by_ended_owners_are_sent_again_and_removed(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path)
    # Owners gone: one whose lock file is free, one whose lock file is not there at all.
    (tmp_path / "ended.1.lock").write_text("")
    (tmp_path / "ended.1-5.json").write_text(json.dumps({"job_id": 5, "result": {"ok": 1}}))
    (tmp_path / "ended.1-6.json").write_text("not json")
    (tmp_path / "vanished.2-8.json").write_text(json.dumps({"job_id": 8, "result": None}))
    # A live owner's entry is its own business (its answer may still come), pid reuse or not.
    alive = Outbox(tmp_path)
    alive.hold(7, None)
    client = SlowAnswers()
    client.answer.set()
    pipeline = JobPipeline(client, {AUTOMATION: echo}, outbox=outbox)

    assert await pipeline.resend_left_behind() == 2
    assert sorted(client.calls) == [("answered", 5), ("answered", 8), ("complete", 5), ("complete", 8)]
    assert names(tmp_path) == [f"{alive.token}-7.json"]
    assert not (tmp_path / "ended.1.lock").exists()
    assert await pipeline.resend_left_behind() == 0

    alive.close()  # its owner leaving: now the entry is the next process's to send
    assert await pipeline.resend_left_behind() == 1
    assert names(tmp_path) == []


class Unreachable(SlowAnswers):
    """An API that is down until ``up`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.answer.set()
        self.up = False

    async def complete(
        self,
        job_id: int,
        result: Any,
        on_sent: Callable[[], None] | None = None,
        task_id: str | None = None,
    ) -> bool:
        if not self.up:
            if on_sent is not None:
                on_sent()
            await asyncio.sleep(0.01)  # the client's retries, in short
            raise ApiUnreachable("down")
        return await super().complete(job_id, result, on_sent, task_id)


async def test_a_completion_without_answer_stays_kept_and_goes_again_before_the_next_claim(
    tmp_path: Path,
) -> None:
    client = Unreachable()
    pipeline = JobPipeline(client, {AUTOMATION: echo}, outbox=Outbox(tmp_path))
    assert (await pipeline.run(1)).outcome is Outcome.COMPLETED
    await pipeline.settle()  # the answer never came: logged
    assert len(names(tmp_path)) == 1
    client.up = True
    await pipeline.run(2)
    assert client.calls[:3] == [("start", 1), ("complete", 1), ("answered", 1)]
    assert client.calls[3] == ("start", 2)
    await pipeline.close()
    assert names(tmp_path) == []


async def test_an_outbox_that_cannot_be_written_falls_back_to_awaiting_the_answer(tmp_path: Path) -> None:
    box = tmp_path / "box"
    outbox = Outbox(box)
    client = SlowAnswers()
    pipeline = JobPipeline(client, {AUTOMATION: echo}, outbox=outbox)
    shutil.rmtree(box)
    box.write_text("")  # not a directory any more: writing an entry fails, root or not
    running = asyncio.create_task(pipeline.run(1))
    await asyncio.sleep(0.05)
    assert not running.done()  # waiting for the answer, since nothing was kept
    client.answer.set()
    assert (await running).outcome is Outcome.COMPLETED
