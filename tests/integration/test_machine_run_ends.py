"""A run the API ends while a dedicated machine holds it (an operator's cancel or move, a time
limit): the machine hears it on ``runsEnded``, and the job does not run again anywhere until the
machine can have stopped it (``MACHINE_STOP_SECONDS``); a pool's run, which Celery stops, holds
nothing. On both databases, through the schema."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from tests.integration.harness import Stack
from tests.integration.operator_support import any_services, pool_machine
from tests.unit.graphql_support import Api, make_api, subscribed
from worker_automation.catalog.registry import AUTOMATION_REGISTRY, TIME_LIMIT_GRACE_SECONDS
from worker_automation.domain.errors import Conflict
from worker_automation.models import Job, utcnow
from worker_automation.resolvers import claims
from worker_automation.resolvers.audit import CLI_ACTOR, Actor
from worker_automation.resolvers.automations import update_settings
from worker_automation.resolvers.machine_runs import MAX_RUNNING
from worker_automation.resolvers.machines import MachineView, register_machine
from worker_automation.resolvers.retries import send_due
from worker_automation.resolvers.services import Services
from worker_automation.resolvers.time_limits import end_overdue_runs
from worker_automation.resolvers.transitions import MACHINE_STOP_SECONDS
from worker_automation.settings import Settings
from worker_automation.worker.machine import MachineRunner

__all__ = ["any_services"]

RUNS_ENDED = "subscription($running: [Int!]) { runsEnded(running: $running) { id taskId status } }"
RUN_TIMEOUT = 20.0
WAITING = "query($id: Int!) { worker(id: $id) { status taskId waitingReason nextAttemptAt } }"


async def _dedicated(
    services: Services, automation: str = "demo.sleep", name: str = "dedicated"
) -> tuple[MachineView, str]:
    created = await register_machine(
        services.db,
        CLI_ACTOR,
        services.settings.queues,
        name=f"{name}-{automation}",
        automation=automation,
    )
    return created.machine, created.api_key


async def _running(api: Api, machine: MachineView, automation: str = "demo.sleep") -> int:
    job = await api.dispatch(automation, context={"seconds": 30})
    view = await claims.claim(api.services, machine, job["id"])
    assert view.status == "EXECUTANDO"
    return int(job["id"])


async def _row(services: Services, job_id: int) -> Job:
    async with services.db.reader() as session:
        row = await session.get(Job, job_id)
        assert row is not None
        return row


def _held(row: Job, since: datetime) -> None:
    """The job waits AGENDADO, unsent, until about MACHINE_STOP_SECONDS after ``since``."""
    assert row.status == "AGENDADO" and row.task_id is None, (row.status, row.task_id)
    assert row.next_attempt_at is not None
    ahead = (row.next_attempt_at - since).total_seconds()
    assert MACHINE_STOP_SECONDS - 1 <= ahead <= MACHINE_STOP_SECONDS + 5, ahead


async def _claim_refused(services: Services, machine: MachineView, job_id: int) -> None:
    with pytest.raises(Conflict) as refused:
        await claims.claim(services, machine, job_id)
    assert refused.value.details.get("reason") == "not_claimable", refused.value.details


async def _due_now(services: Services, job_id: int) -> None:
    """As if the hold had passed: the retry is then sent under a new task id."""
    async with services.db.session() as session:
        past = utcnow() - timedelta(seconds=1)
        await session.execute(update(Job).where(Job.id == job_id).values(next_attempt_at=past))
    assert await send_due(services, job_id)


async def test_a_cancelled_machine_run_is_told_to_its_machine_and_holds_the_retry(
    any_services: Services,
) -> None:
    services = any_services
    api = await make_api(services)
    machine, key = await _dedicated(services)
    _, other_key = await _dedicated(services, "demo.echo")
    job_id = await _running(api, machine)
    as_machine = api.context(None, {"X-Worker-Api-Key": key})
    async with subscribed(api, RUNS_ENDED, {"running": [job_id]}, context=as_machine) as sub:
        # Still running there: nothing to tell.
        with pytest.raises(TimeoutError):
            await sub.next(within=0.3)
        cancelled_at = utcnow()
        await api.ok("mutation($id: Int!) { cancelWorker(id: $id) { id } }", {"id": job_id})
        told = (await sub.data())["runsEnded"]
        assert told["id"] == job_id and told["status"] == "CANCELADO"

    retried = await api.ok("mutation($id: Int!) { retryWorker(id: $id) { status taskId } }", {"id": job_id})
    assert retried["retryWorker"] == {"status": "AGENDADO", "taskId": None}
    row = await _row(services, job_id)
    _held(row, cancelled_at)
    waiting = (await api.ok(WAITING, {"id": job_id}))["worker"]
    assert waiting["waitingReason"] == "RETRY_BACKOFF" and waiting["nextAttemptAt"] is not None
    await _claim_refused(services, machine, job_id)
    # Not sent before it is due, whoever asks.
    assert not await send_due(services, job_id)

    await _due_now(services, job_id)
    row = await _row(services, job_id)
    assert row.status == "AGENDADO" and row.task_id is not None and row.retry_count == 1
    assert (await claims.claim(services, machine, job_id)).status == "EXECUTANDO"

    # A machine hears only of its own runs (not another automation's, not its twin's, not a
    # completion); one subscribing with a run already ended hears of it first.
    twin = api.context(None, {"X-Worker-Api-Key": (await _dedicated(services, "demo.sleep", "twin"))[1]})
    for other in (api.context(None, {"X-Worker-Api-Key": other_key}), twin, as_machine):
        async with subscribed(api, RUNS_ENDED, {"running": []}, context=other) as sub:
            await claims.complete(services, machine, await _running(api, machine), {"ok": True})
            if other is not as_machine:
                ended = await _running(api, machine)
                await api.ok("mutation($id: Int!) { cancelWorker(id: $id) { id } }", {"id": ended})
            with pytest.raises(TimeoutError):
                await sub.next(within=0.3)
    await api.ok("mutation($id: Int!) { cancelWorker(id: $id) { id } }", {"id": job_id})
    async with subscribed(api, RUNS_ENDED, {"running": [job_id]}, context=as_machine) as sub:
        assert (await sub.data())["runsEnded"]["status"] == "CANCELADO"


async def test_a_pool_run_ended_by_the_api_holds_nothing(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    pool = await pool_machine(services)
    job = await api.dispatch("demo.sleep", context={"seconds": 30})
    await claims.claim(services, pool, job["id"], job["taskId"])
    await api.ok("mutation($id: Int!) { cancelWorker(id: $id) { id } }", {"id": job["id"]})
    retried = await api.ok(
        "mutation($id: Int!) { retryWorker(id: $id) { status taskId } }", {"id": job["id"]}
    )
    assert retried["retryWorker"]["status"] == "AGENDADO" and retried["retryWorker"]["taskId"] is not None
    row = await _row(services, job["id"])
    assert row.next_attempt_at is None


async def test_moves_bulk_actions_and_time_limits_hold_a_dedicated_machine_s_job(
    any_services: Services,
) -> None:
    services = any_services
    api = await make_api(services)
    machine, _ = await _dedicated(services)
    pool = await pool_machine(services)

    # Moved away while it runs: it waits in its new queue.
    moved = await _running(api, machine)
    moved_at = utcnow()
    await api.ok('mutation($id: Int!) { moveWorker(id: $id, targetQueue: "observer") { id } }', {"id": moved})
    row = await _row(services, moved)
    _held(row, moved_at)
    assert row.queue == "observer"
    await _claim_refused(services, machine, moved)

    # Cancelled and retried in bulk beside a pool's run: only the machine's waits.
    on_machine = await _running(api, machine)
    pooled = await api.dispatch("demo.sleep", context={"seconds": 30})
    await claims.claim(services, pool, pooled["id"], pooled["taskId"])
    ids = [on_machine, pooled["id"]]
    bulk_at = utcnow()
    for action in ("cancelWorkers", "retryWorkers"):
        done = await api.ok(f'mutation {{ {action}(filter: {{automationType: "demo.sleep"}}) {{ ids }} }}')
        assert set(ids) <= set(done[action]["ids"]), (action, done)
    _held(await _row(services, on_machine), bulk_at)
    pooled_row = await _row(services, pooled["id"])
    assert pooled_row.status == "AGENDADO" and pooled_row.task_id is not None

    # Past its time limit on the machine, retried with no backoff at all: it still waits.
    policy: dict[str, Any] = {"max_attempts": 3, "retry_backoff_seconds": 0, "retry_backoff_max_seconds": 0}
    await update_settings(services.db, "demo.timeout", actor=Actor("test"), retry_policy=policy)
    limited, _ = await _dedicated(services, "demo.timeout")
    timed_out = await _running(api, limited, "demo.timeout")
    async with services.db.session() as session:
        limit = AUTOMATION_REGISTRY["demo.timeout"].timeout_seconds or 0.0
        started = utcnow() - timedelta(seconds=limit + TIME_LIMIT_GRACE_SECONDS + 1)
        await session.execute(update(Job).where(Job.id == timed_out).values(data_inicio=started))
    ended_at = utcnow()
    assert await end_overdue_runs(services) == 1
    row = await _row(services, timed_out)
    _held(row, ended_at)
    assert row.retry_count == 1
    await _claim_refused(services, limited, timed_out)


@pytest.mark.services
def test_a_machine_stops_a_run_the_api_ended_and_no_retry_runs_beside_it(stack: Stack) -> None:
    """Two machines of one automation whose runs report no progress (only the API's word can stop
    one): an operator cancels the run of the first and retries the job at once. The first machine
    hears of it and stops the run, whose thread still sleeps; the retry runs once that thread has
    returned, on either machine."""
    keys = [stack.register_machine(automation="demo.sleep") for _ in range(2)]
    runs: list[tuple[float, float]] = []  # (start, end) of each run's thread, time.monotonic()

    def quiet(job_id: int, automation_id: str, context: dict[str, Any]) -> dict[str, Any]:
        begin = time.monotonic()
        time.sleep(float(context["seconds"]))
        runs.append((begin, time.monotonic()))
        return {"slept": context["seconds"]}

    def runner(key: str) -> MachineRunner:
        settings = Settings(api_url=stack.api_url, worker_api_key=key, shutdown_grace_seconds=2.0)
        return MachineRunner(settings, "demo.sleep", implementations={"demo.sleep": quiet})

    async def until(check: Callable[[], bool], within: float, what: str) -> None:
        deadline = time.monotonic() + within
        while not check():
            assert time.monotonic() < deadline, what
            await asyncio.sleep(0.02)

    async def scenario() -> float:
        first, second = runner(keys[0]), runner(keys[1])
        running = [asyncio.create_task(first.run())]
        try:
            job_id = await asyncio.to_thread(stack.dispatch, "demo.sleep", {"seconds": 4})
            await until(lambda: job_id in first.taken_away, RUN_TIMEOUT, "the first machine never ran it")
            cancelled = time.monotonic()
            await asyncio.to_thread(stack.cancel, job_id)
            await until(lambda: first.taken_away[job_id].is_set(), 2.0, "the machine never heard the cancel")
            assert not runs, "its thread was still sleeping when the run was stopped"
            retry = await asyncio.to_thread(
                stack.http.post, f"/api/v1/worker-automation/{job_id}/retry", headers=stack.operator_headers
            )
            assert retry.status_code == 200, retry.text
            running.append(asyncio.create_task(second.run()))
            await asyncio.to_thread(
                stack.wait_status, job_id, "CONCLUIDO", MACHINE_STOP_SECONDS + RUN_TIMEOUT
            )
            return cancelled
        finally:
            for machine in (first, second):
                machine.stopping.set()
            await asyncio.gather(*running)

    cancelled = asyncio.run(scenario())
    assert len(runs) == 2, runs
    (_, first_end), (second_start, _) = sorted(runs)
    assert second_start >= first_end, "the retry ran beside the run that was cancelled"
    assert second_start - cancelled >= MACHINE_STOP_SECONDS - 1.0


async def test_runs_ended_is_for_machine_keys_and_bounds_its_list(any_services: Services) -> None:
    """No key, an operator's read key or an unknown machine key hear nothing; a list past
    MAX_RUNNING is refused naming ``running``."""
    services = any_services
    api = await make_api(services)
    _, key = await _dedicated(services)
    for context in (
        api.context(None),
        api.context("reader"),
        api.context(None, {"X-Worker-Api-Key": "wmk_x"}),
    ):
        async with subscribed(api, RUNS_ENDED, {"running": []}, context=context) as sub:
            refused = await sub.next()
            assert refused is not None and refused.errors
            assert refused.errors[0].extensions and refused.errors[0].extensions["code"] == "UNAUTHENTICATED"
    as_machine = api.context(None, {"X-Worker-Api-Key": key})
    too_many = list(range(1, MAX_RUNNING + 2))
    async with subscribed(api, RUNS_ENDED, {"running": too_many}, context=as_machine) as sub:
        refused = await sub.next()
        assert refused is not None and refused.errors
        assert refused.errors[0].extensions and refused.errors[0].extensions["code"] == "BAD_USER_INPUT"
        assert "running" in str(refused.errors[0].extensions.get("field", refused.errors[0].message))
