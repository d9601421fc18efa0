"""Workers cut off from the API keep their work: claims wait, reports of jobs' ends are kept, and
what a dead process held is reported by the next one (against a scripted API on a socket)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.unit.fake_api import FakeApi, fake_api
from worker_automation.worker import reports
from worker_automation.worker.client import WorkerApiClient
from worker_automation.worker.held import HeldJobs, drop_left_behind
from worker_automation.worker.outbox import Outbox
from worker_automation.worker.patience import Stopped, delays
from worker_automation.worker.pipeline import JobPipeline, Outcome
from worker_automation.worker.reports import NOT_STARTED, WORKER_LOST

AUTOMATION = "demo.test"


def echo(job_id: int, automation: str, context: dict[str, Any]) -> int:
    return job_id


def broken(job_id: int, automation: str, context: dict[str, Any]) -> int:
    raise RuntimeError("portal fora do ar")


def pipeline_for(
    api: FakeApi, tmp_path: Path, fn: Any = echo, stopping: asyncio.Event | None = None
) -> JobPipeline:
    return JobPipeline(
        WorkerApiClient(api.url, "key"),
        {AUTOMATION: fn},
        outbox=Outbox(tmp_path / "outbox"),
        held=HeldJobs(tmp_path / "held"),
        stopping=stopping,
    )


async def close(pipeline: JobPipeline) -> None:
    """What a worker process does as it ends: the pipeline settles, then its client's
    connections close."""
    await pipeline.close()
    await pipeline.client.close()


async def until(probe: Callable[[], bool]) -> None:
    """Poll ``probe`` until it is true (AssertionError after ten seconds)."""
    for _ in range(200):
        if probe():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


def entries(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def test_backoff_starts_under_a_second_doubles_and_stops_at_thirty() -> None:
    waits = delays()
    first = [next(waits) for _ in range(12)]
    assert 0.5 <= first[0] <= 1.0
    assert 1.0 <= first[1] <= 2.0
    assert all(15.0 <= wait <= 30.0 for wait in first[6:])


async def test_a_claim_waits_while_the_api_answers_503_then_runs_the_job(tmp_path: Path) -> None:
    async with fake_api(mode="503") as api:
        pipeline = pipeline_for(api, tmp_path)
        running = asyncio.create_task(pipeline.run(1, "task-1"))
        await until(lambda: api.unanswered >= 2)
        assert not running.done()  # not raised, not given up: still waiting
        api.mode = "up"
        result = await asyncio.wait_for(running, 10)
        await close(pipeline)
    assert result.outcome is Outcome.COMPLETED
    assert api.kinds() == [("start", 1), ("complete", 1)]
    assert api.calls[0][2] == {"task_id": "task-1"}


async def test_a_claim_waits_while_the_api_cannot_be_reached(tmp_path: Path) -> None:
    async with fake_api(mode="down") as api:
        pipeline = pipeline_for(api, tmp_path)
        running = asyncio.create_task(pipeline.run(2, "task-2"))
        await until(lambda: api.unanswered >= 2)
        assert not running.done()
        api.mode = "up"
        assert (await asyncio.wait_for(running, 10)).outcome is Outcome.COMPLETED
        await close(pipeline)
    assert api.kinds() == [("start", 2), ("complete", 2)]


async def test_a_shutdown_ends_the_wait_for_a_claim_and_keeps_the_job_held(tmp_path: Path) -> None:
    stopping = asyncio.Event()
    async with fake_api(mode="503") as api:
        pipeline = pipeline_for(api, tmp_path, stopping=stopping)
        running = asyncio.create_task(pipeline.run(3, "task-3"))
        await until(lambda: api.unanswered >= 1)
        stopping.set()
        with pytest.raises(Stopped):
            await asyncio.wait_for(running, 2)
        # The claim may have gone through unanswered: the next process reports it (or learns
        # there was nothing to report).
        assert entries(tmp_path / "held") == [{"job_id": 3, "task_id": "task-3", "supervisor": None}]
        await close(pipeline)
    assert api.kinds() == []


async def test_a_claim_taken_without_its_answer_is_reported_lost(tmp_path: Path) -> None:
    # The API recorded the claim but the connection broke before its answer: asked again, it says
    # "already claimed" and cannot say by whom, so the run is reported as never started (queued
    # again if it was ours).
    async with fake_api(drop_next_claim=True) as api:
        pipeline = pipeline_for(api, tmp_path)
        result = await pipeline.run(9, "task-9")
        assert (result.outcome, result.reason) == (Outcome.REFUSED, "already_claimed")
        assert entries(tmp_path / "held") == []
        await close(pipeline)
    assert api.kinds() == [("start", 9), ("start", 9), ("lost", 9)]
    assert api.calls[2][2] == {"fault": NOT_STARTED, "task_id": "task-9"}


async def test_a_claim_refused_after_the_api_was_unreachable_is_not_reported(tmp_path: Path) -> None:
    # Never sent (nothing listened): "already claimed" then means someone else has it.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = WorkerApiClient(f"http://127.0.0.1:{port}", "key")
    pipeline = JobPipeline(client, {AUTOMATION: echo}, held=HeldJobs(tmp_path / "held"))
    running = asyncio.create_task(pipeline.run(10, "task-10"))
    await asyncio.sleep(0.2)
    assert not running.done()
    async with fake_api(port=port, refusals={10: "already_claimed"}) as api:
        assert (await asyncio.wait_for(running, 10)).reason == "already_claimed"
        await close(pipeline)
    assert api.kinds() == [("start", 10)]
    assert entries(tmp_path / "held") == []


async def test_a_refused_claim_is_not_held(tmp_path: Path) -> None:
    async with fake_api(refusals={4: "queue_paused"}) as api:
        pipeline = pipeline_for(api, tmp_path)
        result = await pipeline.run(4, "task-4")
        assert (result.outcome, result.reason) == (Outcome.REFUSED, "queue_paused")
        assert entries(tmp_path / "held") == []
        await close(pipeline)


async def test_a_failure_without_answer_is_kept_and_sent_once_the_api_is_back(tmp_path: Path) -> None:
    async with fake_api() as api:
        pipeline = pipeline_for(api, tmp_path, fn=broken)
        api.down_after_next_claim = True
        running = asyncio.create_task(pipeline.run(5, "task-5"))
        await until(lambda: api.unanswered >= 2)
        # Not raised, not dropped: kept on disk, and the run waits for the API to answer it.
        assert not running.done()
        kept = entries(tmp_path / "outbox")
        assert kept == [
            {
                "kind": "fail",
                "job_id": 5,
                "task_id": "task-5",
                "error": "portal fora do ar",
                "exc_type": "RuntimeError",
                "traceback": kept[0]["traceback"],
            }
        ]
        assert entries(tmp_path / "held") == []  # its end is kept: nothing to report as lost
        api.mode = "up"
        assert (await asyncio.wait_for(running, 10)).outcome is Outcome.FAILED
        assert entries(tmp_path / "outbox") == []
        await close(pipeline)
    assert api.kinds() == [("start", 5), ("fail", 5)]
    assert api.calls[1][2]["error"] == "portal fora do ar"


async def test_a_completion_the_api_cannot_take_is_kept_and_sent_before_the_next_claim(
    tmp_path: Path,
) -> None:
    async with fake_api() as api:
        pipeline = pipeline_for(api, tmp_path)
        stopping = pipeline.reports.stopping = asyncio.Event()
        api.down_after_next_claim = True
        running = asyncio.create_task(pipeline.run(6, "task-6"))
        await until(lambda: api.unanswered >= 1)
        stopping.set()  # a shutdown ends the wait; the completion stays kept
        assert (await asyncio.wait_for(running, 10)).outcome is Outcome.COMPLETED
        assert [e["kind"] for e in entries(tmp_path / "outbox")] == ["complete"]
        api.mode = "up"
        stopping.clear()
        assert (await pipeline.run(7, "task-7")).outcome is Outcome.COMPLETED
        await close(pipeline)
    assert api.kinds() == [("start", 6), ("complete", 6), ("start", 7), ("complete", 7)]


async def test_a_kept_completion_is_sent_once_the_api_is_back_without_another_job(tmp_path: Path) -> None:
    async with fake_api() as api:
        pipeline = pipeline_for(api, tmp_path)
        api.down_after_next_claim = True
        assert (await pipeline.run(7, "task-7")).outcome is Outcome.COMPLETED
        await pipeline.settle()
        assert [e["kind"] for e in entries(tmp_path / "outbox")] == ["complete"]
        api.mode = "up"
        await until(lambda: not entries(tmp_path / "outbox"))
        assert entries(tmp_path / "outbox") == []
        await close(pipeline)
    assert api.kinds() == [("start", 7), ("complete", 7)]


async def test_a_failure_left_by_a_dead_process_is_sent_by_the_next(tmp_path: Path) -> None:
    box = tmp_path / "outbox"
    box.mkdir()
    (box / "dead.1-8.json").write_text(
        json.dumps({"kind": "fail", "job_id": 8, "task_id": "t8", "error": "boom", "exc_type": "E"})
    )
    async with fake_api() as api:
        pipeline = pipeline_for(api, tmp_path)
        assert await pipeline.recover_left_behind() == (1, 0)
        await close(pipeline)
    assert api.kinds() == [("fail", 8)]
    assert api.calls[0][2] == {"error": "boom", "exc_type": "E", "traceback": None, "task_id": "t8"}


def test_the_ledger_holds_releases_and_hands_over_what_a_dead_owner_left(tmp_path: Path) -> None:
    ledger = HeldJobs(tmp_path, supervisor=None)
    ledger.hold(1, "t1")
    ledger.hold(2, "t2")
    ledger.release(1)
    alive = HeldJobs(tmp_path)
    alive.hold(3, "t3")
    (tmp_path / "dead.9.lock").write_text("")  # an owner that ended: its lock is free
    (tmp_path / "dead.9-4.json").write_text(json.dumps({"job_id": 4, "task_id": "t4"}))
    (tmp_path / "dead.9-5.json").write_text("not json")

    later = HeldJobs(tmp_path)
    # Owners alive (the first ledger, the second) keep theirs; the dead one's are taken over.
    assert [(e.job_id, e.task_id) for e in later.left_behind()] == [(4, "t4")]
    assert not (tmp_path / "dead.9.lock").exists()
    ledger.close()  # its owner leaving: its entry is now the next process's to report
    assert [(e.job_id, e.task_id) for e in later.left_behind()] == [(2, "t2")]
    assert list(later.left_behind()) == []
    alive.close()
    later.close()


def test_a_sibling_of_the_same_supervisor_leaves_its_entries_to_that_supervisor(tmp_path: Path) -> None:
    parent = os.getppid()
    sibling = {"job_id": 6, "task_id": "t", "supervisor": parent}
    (tmp_path / "sibling.1-6.json").write_text(json.dumps(sibling))
    (tmp_path / "other.2-7.json").write_text(json.dumps({"job_id": 7, "task_id": "u", "supervisor": 1}))
    child = HeldJobs(tmp_path, supervisor=parent)
    assert [e.job_id for e in child.left_behind()] == [7]
    assert (tmp_path / "sibling.1-6.json").exists()
    # A process of another worker (another supervisor) reports it.
    assert [e.job_id for e in HeldJobs(tmp_path, supervisor=None).left_behind()] == [6]


def test_a_supervisor_drops_what_its_dead_process_held_once_it_reported_it() -> None:
    key = f"test-{uuid.uuid4().hex}"
    live = HeldJobs.for_machine(key)
    try:
        mine = live.hold(5, "mine")
        (live.directory / "dead.1-5.json").write_text(json.dumps({"job_id": 5, "task_id": "t"}))
        (live.directory / "dead.1-6.json").write_text(json.dumps({"job_id": 6, "task_id": "u"}))
        assert drop_left_behind(key, 5) == 1
        # The live owner's entry and the dead one's about another job stay.
        assert {p.name for p in live.directory.glob("*.json")} == {"dead.1-6.json", mine.path.name}
    finally:
        shutil.rmtree(live.directory)


async def test_held_jobs_left_behind_are_reported_lost_unless_their_end_is_kept(tmp_path: Path) -> None:
    held, box = tmp_path / "held", tmp_path / "outbox"
    held.mkdir()
    box.mkdir()
    for job_id in (10, 11):
        (held / f"dead.1-{job_id}.json").write_text(json.dumps({"job_id": job_id, "task_id": f"t{job_id}"}))
    # Job 11 ended and its completion was kept before the process died: the outbox sends it.
    (box / "dead.1-11.json").write_text(json.dumps({"kind": "complete", "job_id": 11, "result": 1}))
    async with fake_api(mode="503") as api:
        pipeline = pipeline_for(api, tmp_path)
        assert await pipeline.recover_left_behind() == (0, 0)
        # Unanswered: both kept (by this process now), and sent again once the API is back.
        assert [e["job_id"] for e in entries(held)] == [10]
        assert [e["job_id"] for e in entries(box)] == [11]
        api.mode = "up"
        await until(lambda: not entries(held) and not entries(box))
        await close(pipeline)
    assert sorted(api.kinds()) == [("complete", 11), ("lost", 10)]
    lost = next(body for kind, _, body in api.calls if kind == "lost")
    assert lost == {"fault": WORKER_LOST, "task_id": "t10"}


async def test_a_lost_report_answered_409_means_nothing_to_do(tmp_path: Path) -> None:
    held = tmp_path / "held"
    held.mkdir()
    (held / "dead.1-12.json").write_text(json.dumps({"job_id": 12, "task_id": "t12"}))
    async with fake_api(lost_answer=409) as api:
        pipeline = pipeline_for(api, tmp_path)
        assert await pipeline.recover_left_behind() == (0, 0)
        await close(pipeline)
    assert api.kinds() == [("lost", 12)]
    assert entries(held) == []


def left_behind_by_a_dead_process(tmp_path: Path, job_id: int, task_id: str | None) -> Path:
    held = tmp_path / "held"
    held.mkdir()
    (held / f"dead.1-{job_id}.json").write_text(json.dumps({"job_id": job_id, "task_id": task_id}))
    return held


@pytest.fixture
def quick_claim_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reports, "CLAIM_IN_FLIGHT_FIRST_DELAY", 0.05)
    monkeypatch.setattr(reports, "CLAIM_IN_FLIGHT_MAX_DELAY", 0.1)
    monkeypatch.setattr(reports, "CLAIM_IN_FLIGHT_SECONDS", 1.0)


@pytest.mark.usefixtures("quick_claim_watch")
async def test_a_lost_report_about_a_job_still_agendado_is_sent_again_until_the_claim_lands(
    tmp_path: Path,
) -> None:
    # The dead process's claim was still on its way through the API when the report came: the
    # report is sent again, and once the claim has landed the API ends the run.
    held = left_behind_by_a_dead_process(tmp_path, 13, None)
    async with fake_api(lost_answer=409, lost_status="AGENDADO") as api:
        pipeline = pipeline_for(api, tmp_path)
        assert await pipeline.recover_left_behind() == (0, 0)
        assert len(entries(held)) == 1  # kept while watched
        await until(lambda: len(api.calls) >= 2)
        api.lost_answer, api.lost_status = 200, None
        await until(lambda: not entries(held))
        await close(pipeline)
    kinds = api.kinds()
    assert set(kinds) == {("lost", 13)} and len(kinds) >= 3
    assert api.calls[-1][2] == {"fault": WORKER_LOST}


@pytest.mark.usefixtures("quick_claim_watch")
async def test_a_job_left_behind_that_stays_agendado_is_let_go_after_the_bound(tmp_path: Path) -> None:
    held = left_behind_by_a_dead_process(tmp_path, 14, "t14")
    async with fake_api(lost_answer=409, lost_status="AGENDADO") as api:
        pipeline = pipeline_for(api, tmp_path)
        started = asyncio.get_running_loop().time()
        await pipeline.recover_left_behind()
        await until(lambda: not entries(held))
        elapsed = asyncio.get_running_loop().time() - started
        await close(pipeline)
    assert 0.5 <= elapsed <= 3.0
    assert set(api.kinds()) == {("lost", 14)} and 3 <= len(api.calls) <= 20


@pytest.mark.usefixtures("quick_claim_watch")
async def test_a_claim_of_a_watched_job_refused_as_already_claimed_reports_the_dead_claim(
    tmp_path: Path,
) -> None:
    # This process claims the job itself while the dead process's claim may still land: the watch
    # stops (no report can end this process's own run), and "already claimed" means the dead
    # process's claim landed, so that run is reported as never started.
    left_behind_by_a_dead_process(tmp_path, 15, None)
    async with fake_api(lost_answer=409, lost_status="AGENDADO", refusals={15: "already_claimed"}) as api:
        pipeline = pipeline_for(api, tmp_path)
        await pipeline.recover_left_behind()
        api.lost_answer, api.lost_status = 200, None
        result = await pipeline.run(15)
        assert (result.outcome, result.reason) == (Outcome.REFUSED, "already_claimed")
        await asyncio.sleep(0.3)  # the watch would have sent its report by now
        assert entries(tmp_path / "held") == []
        await close(pipeline)
    assert api.kinds() == [("lost", 15), ("start", 15), ("lost", 15)]
    assert api.calls[2][2] == {"fault": NOT_STARTED}


@pytest.mark.usefixtures("quick_claim_watch")
async def test_a_claim_of_a_watched_job_that_succeeds_is_never_reported_lost(tmp_path: Path) -> None:
    left_behind_by_a_dead_process(tmp_path, 16, None)
    async with fake_api(lost_answer=409, lost_status="AGENDADO") as api:
        pipeline = pipeline_for(api, tmp_path)
        await pipeline.recover_left_behind()
        api.lost_answer, api.lost_status = 200, None
        result = await pipeline.run(16)
        assert result.outcome is Outcome.COMPLETED
        await pipeline.settle()
        await asyncio.sleep(0.3)
        await close(pipeline)
    assert api.kinds() == [("lost", 16), ("start", 16), ("complete", 16)]


async def test_a_claim_answered_as_a_machine_stops_is_handed_back_not_run(tmp_path: Path) -> None:
    """A machine asked to stop while its claim is on its way waits for the answer (cut off, the
    claim could still go through with nobody to run the job) and hands the job back unstarted."""
    from worker_automation.settings import Settings
    from worker_automation.worker.machine import MachineRunner

    ran: list[int] = []

    def never(job_id: int, automation: str, context: dict[str, Any]) -> None:
        ran.append(job_id)

    gate = asyncio.Event()
    async with fake_api(claim_gate=gate) as api:
        settings = Settings(api_url=api.url, worker_api_key="wmk_shutdown", shutdown_grace_seconds=5)
        runner = MachineRunner(settings, AUTOMATION, implementations={AUTOMATION: never})
        runner.pipeline = JobPipeline(
            runner.client,
            {AUTOMATION: never},
            outbox=Outbox(tmp_path / "outbox"),
            held=HeldJobs(tmp_path / "held"),
            stopping=runner.stopping,
            own_time_limits=True,
        )
        runner.submit(7)
        await until(lambda: api.claims_waiting == 1)
        drain = asyncio.create_task(runner.drain())
        await asyncio.sleep(0.3)
        assert not drain.done()  # the claim in flight is waited for
        gate.set()
        await asyncio.wait_for(drain, 5.0)
        await close(runner.pipeline)
    assert ran == []
    assert api.kinds() == [("start", 7), ("lost", 7)]
    assert api.calls[-1][2]["fault"] == NOT_STARTED
    assert entries(tmp_path / "held") == []


async def test_a_machine_stops_only_a_run_the_api_no_longer_has_as_its_running_one() -> None:
    """``runsEnded`` names jobs as they now stand: a run held here is stopped when its job left
    EXECUTANDO other than by completing, or runs under another task; nothing else is touched."""
    from worker_automation.settings import Settings
    from worker_automation.worker.machine import MachineRunner

    settings = Settings(api_url="http://127.0.0.1:9", worker_api_key="wmk_runs_ended")
    runner = MachineRunner(settings, AUTOMATION, implementations={})
    try:
        for job_id in (1, 2, 3, 4):
            runner.taken_away[job_id] = asyncio.Event()
            runner.task_ids[job_id] = f"t{job_id}"
        assert not runner.run_ended({"id": 1, "taskId": "t1", "status": "EXECUTANDO"})
        assert not runner.run_ended({"id": 2, "taskId": "t2", "status": "CONCLUIDO"})
        assert runner.run_ended({"id": 3, "taskId": "t3", "status": "CANCELADO"})
        assert runner.run_ended({"id": 4, "taskId": "other", "status": "EXECUTANDO"})
        assert not runner.run_ended({"id": 5, "taskId": None, "status": "AGENDADO"})  # not held here
        assert [job_id for job_id, stop in runner.taken_away.items() if stop.is_set()] == [3, 4]
    finally:
        await runner.client.close()
