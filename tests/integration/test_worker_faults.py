"""Worker processes under real faults: the API going away while they hold work, and a Celery
worker's main process killed outright. ``serve``, pool workers and machines run as processes on
real PostgreSQL and Redis.

The API's reconciler is turned off here (``WA_RECOVERY_SECONDS=0``): these tests show what the
workers do by themselves, so nothing else may put the jobs right for them.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.integration.harness import Processes, Stack, descendants, is_running, served_stack, wait_until
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.dispatch import dispatch
from worker_automation.resolvers.lost_runs import LOST_RUN_MESSAGE
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings
from worker_automation.worker.owners import machine_directory

pytestmark = pytest.mark.services

OUTAGE_SECONDS = 10.0
# After the API is back: the workers' next try comes within their backoff (capped at 30 s; after
# a 10 s outage it is at most 16 s away), then the jobs run.
SETTLE_TIMEOUT = 40.0
RUN_TIMEOUT = 20.0
TERMINAL = {"CONCLUIDO", "FALHA", "CANCELADO"}


@pytest.fixture
def stack(
    processes: Processes, pg_database_url: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> Iterator[Stack]:
    # Unbuffered: the access log of a serve killed with SIGKILL is what counts the claims.
    no_reconciler = {"WA_RECOVERY_SECONDS": "0", "PYTHONUNBUFFERED": "1"}
    with served_stack(
        processes, pg_database_url, redis_url, redis_prefix, tmp_path, serve_env=no_reconciler
    ) as built:
        yield built


def stop_api(stack: Stack) -> None:
    """The API crashes (SIGKILL: it says goodbye to nobody)."""
    assert stack.serve_proc is not None
    stack.serve_proc.send(signal.SIGKILL)
    assert stack.serve_proc.wait(10) is not None


def successful_claims(stack: Stack) -> dict[int, int]:
    """How many claims each job got answered 200, over every ``serve`` this test started."""
    claims: dict[int, int] = {}
    for proc in stack.procs.procs:
        if proc.name == "serve":
            for job in re.findall(r'"POST /api/v1/jobs/(\d+)/start HTTP/1.1" 200', proc.output()):
                claims[int(job)] = claims.get(int(job), 0) + 1
    return claims


def has_progressed(stack: Stack, job_id: int) -> bool:
    return int(stack.db.job(job_id)["progress"]) >= 1


def test_pool_workers_keep_their_tasks_and_reports_while_the_api_is_down(stack: Stack) -> None:
    first = stack.pool_worker("scan", 2)
    second = stack.pool_worker("scan", 1)
    # Two running when the API goes (their reports find it gone); one slot free.
    running = [stack.dispatch("demo.sleep", {"seconds": 3}) for _ in range(2)]
    for job in running:
        # Progress, not just EXECUTANDO: the worker has its claim's answer (a claim the API
        # recorded but could not answer before it died is a run of unknown outcome: worker_lost).
        wait_until(partial(has_progressed, stack, job), RUN_TIMEOUT, f"job {job} never ran")
    stop_api(stack)
    # Queued meanwhile: the free slot takes one and cannot claim it, the others wait behind.
    queued = create_jobs(stack, 4, seconds=1)
    time.sleep(OUTAGE_SECONDS)
    stack.serve()

    jobs = running + queued
    rows = {job: stack.wait_status(job, TERMINAL, SETTLE_TIMEOUT) for job in jobs}
    assert {job: row["status"] for job, row in rows.items()} == dict.fromkeys(jobs, "CONCLUIDO")
    assert all(row["retry_count"] == 0 for row in rows.values())
    assert successful_claims(stack) == dict.fromkeys(jobs, 1), "a job was claimed twice"
    workers = first.output() + second.output()
    assert "claim: no answer from the API" in workers, "no claim had to wait: the outage was not seen"
    assert first.alive() and second.alive()


def create_jobs(stack: Stack, count: int, seconds: float = 0) -> list[int]:
    """Jobs recorded the way the API records them (row and task), with the API down."""

    async def run() -> list[int]:
        settings = Settings(
            database_url=stack.database_url,
            redis_url=stack.redis_url,
            redis_prefix=stack.env["WA_REDIS_PREFIX"],
            embedded_workers=False,
            recovery_seconds=0,
        )
        services = await Services.start(settings, migrate_db=False)
        try:
            views = [
                await dispatch(
                    services,
                    CLI_ACTOR,
                    automation_type="demo.sleep",
                    cliente_id=None,
                    context={"seconds": seconds},
                )
                for _ in range(count)
            ]
            return [view.id for view in views]
        finally:
            await services.close()

    return asyncio.run(run())


def test_a_machine_cut_off_from_the_api_runs_what_was_created_meanwhile(stack: Stack) -> None:
    machine = stack.machine("demo.sleep", concurrency=2)
    # Busy through the whole outage and after it: the sweep after reconnecting must not wait
    # for the machine to be idle.
    busy = stack.dispatch("demo.sleep", {"seconds": 60})
    stack.wait_status(busy, "EXECUTANDO", RUN_TIMEOUT)
    stop_api(stack)
    created = create_jobs(stack, 3)  # the machine cannot hear of these
    time.sleep(OUTAGE_SECONDS)
    stack.serve()

    for job in created:
        assert stack.wait_status(job, TERMINAL, SETTLE_TIMEOUT)["status"] == "CONCLUIDO"
    assert stack.db.job(busy)["status"] == "EXECUTANDO"
    assert successful_claims(stack) == dict.fromkeys([busy, *created], 1)
    assert machine.alive()
    stack.cancel(busy)


def test_a_killed_worker_leaves_no_process_and_the_next_one_reports_its_job(stack: Stack) -> None:
    key = stack.register_machine(queue="scan")
    worker = stack.pool_worker("scan", 2, key=key)
    job = stack.dispatch("demo.sleep", {"seconds": 60})
    wait_until(lambda: stack.db.job(job)["progress"] >= 1, RUN_TIMEOUT, "the sleep never ran")
    children = descendants(worker.pid)
    assert len(children) >= 2, children

    worker.send(signal.SIGKILL)
    worker.wait(10)
    wait_until(
        lambda: not [pid for pid in children if is_running(pid)],
        5.0,
        lambda: f"left running after the worker was killed: {[p for p in children if is_running(p)]}",
    )
    # Nobody runs it, and nothing on the API side says so yet (its reconciler is off here).
    assert stack.db.job(job)["status"] == "EXECUTANDO"

    stack.pool_worker("scan", 1, key=key)
    row = stack.wait_status(job, TERMINAL, RUN_TIMEOUT)
    assert row["status"] == "FALHA" and row["mensagem_erro"] == LOST_RUN_MESSAGE, row
    # Reported, so removed from the ledger: a later start has nothing more to say.
    held = machine_directory("held", key)
    wait_until(lambda: not list(held.glob("*.json")), RUN_TIMEOUT, "the ledger kept the job")


def test_a_worker_shutting_down_while_its_claim_waits_hands_the_task_back(stack: Stack) -> None:
    key = stack.register_machine(queue="scan")
    worker = stack.pool_worker("scan", 1, key=key, grace=30.0)
    stop_api(stack)
    [job] = create_jobs(stack, 1)
    worker.wait_for_output("claim: no answer from the API", RUN_TIMEOUT)
    started = time.monotonic()
    worker.send(signal.SIGTERM)
    assert worker.wait(10) is not None, "the waiting claim held the shutdown back"
    assert time.monotonic() - started < 10.0
    # Unclaimed and back in its queue: the next worker runs it once the API is back.
    assert stack.db.job(job)["status"] == "AGENDADO"
    stack.serve()
    stack.pool_worker("scan", 1, key=key)
    assert stack.wait_status(job, TERMINAL, RUN_TIMEOUT)["status"] == "CONCLUIDO"
    assert successful_claims(stack) == {job: 1}


def test_a_killed_machine_reports_the_job_it_held_when_it_starts_again(stack: Stack) -> None:
    key = stack.register_machine(automation="demo.sleep")
    machine = stack.machine("demo.sleep", key=key)
    job = stack.dispatch("demo.sleep", {"seconds": 60})
    wait_until(lambda: stack.db.job(job)["progress"] >= 1, RUN_TIMEOUT, "the sleep never ran")
    machine.send(signal.SIGKILL)
    machine.wait(10)
    assert stack.db.job(job)["status"] == "EXECUTANDO"

    stack.machine("demo.sleep", key=key)
    row = stack.wait_status(job, TERMINAL, RUN_TIMEOUT)
    assert row["status"] == "FALHA" and row["mensagem_erro"] == LOST_RUN_MESSAGE, row
