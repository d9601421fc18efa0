"""The whole pipeline on real PostgreSQL, real Redis and real Celery worker processes started by the CLI.

Jobs are created with ``POST /api/v1/jobs`` against ``worker-automation serve``; pool workers
(``worker-automation worker -Q scan``) claim them through the API with a machine key.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any

import pytest
import redis

from tests.integration.harness import Stack, descendants, wait_until
from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.models.database import Database
from worker_automation.resolvers.audit import CLI_ACTOR, Actor
from worker_automation.resolvers.automations import update_settings
from worker_automation.resolvers.lost_runs import LOST_RUN_MESSAGE
from worker_automation.resolvers.machines import machine_named, set_machine_status
from worker_automation.settings import Settings
from worker_automation.worker.implementations import missing_implementation_message
from worker_automation.worker.outbox import Outbox
from worker_automation.worker.pool import build_pool_app, report_lost

pytestmark = pytest.mark.services

RUN_TIMEOUT = 20.0


def set_max_concurrent(database_url: str, automation: str, limit: int) -> None:
    """``update_settings`` (the admin operation) on the served database."""

    async def run() -> None:
        db = Database(Settings(database_url=database_url))
        try:
            await update_settings(db, automation, actor=Actor("test"), max_concurrent_jobs=limit)
        finally:
            await db.close()

    asyncio.run(run())


def test_sleep_runs_through_every_state_with_progress(stack: Stack) -> None:
    stack.pool_worker("scan", 1)
    job_id = stack.dispatch("demo.sleep", {"seconds": 1.5})
    seen_status: list[str] = []
    seen_progress: list[int] = []
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        item = stack.rest_job(job_id)
        if not seen_status or seen_status[-1] != item["status"]:
            seen_status.append(item["status"])
        seen_progress.append(item["progress"])
        if item["status"] in ("CONCLUIDO", "FALHA", "CANCELADO"):
            break
        time.sleep(0.05)
    assert seen_status == ["AGENDADO", "EXECUTANDO", "CONCLUIDO"] or seen_status == [
        "EXECUTANDO",
        "CONCLUIDO",
    ], seen_status
    assert any(1 <= p <= 99 for p in seen_progress), seen_progress
    row = stack.db.job(job_id)
    assert row["status"] == "CONCLUIDO"
    assert row["progress"] == 100
    assert row["result"] == {"slept": 1.5}
    assert row["mensagem_erro"] is None
    assert row["machine_id"] is not None
    assert row["data_inicio"] is not None and row["data_fim"] is not None
    assert (row["data_fim"] - row["data_inicio"]).total_seconds() >= 1.4


def test_fail_records_the_automation_message(stack: Stack) -> None:
    stack.pool_worker("scan", 1, wait=False)
    job_id = stack.dispatch("demo.fail", {"message": "portal fora do ar (teste 7)"})
    row = stack.wait_status(job_id, {"FALHA", "CONCLUIDO", "CANCELADO"}, RUN_TIMEOUT)
    assert row["status"] == "FALHA"
    assert row["mensagem_erro"] == "portal fora do ar (teste 7)"
    assert row["data_fim"] is not None


def test_cancel_stops_a_running_job_and_frees_the_worker(stack: Stack) -> None:
    stack.pool_worker("scan", 1)
    job_id = stack.dispatch("demo.sleep", {"seconds": 60})
    wait_until(
        lambda: stack.db.job(job_id)["progress"] >= 1, RUN_TIMEOUT, "the 60 s sleep never made progress"
    )
    cancelled = stack.cancel(job_id)
    assert cancelled["status"] == "CANCELADO"

    started = time.monotonic()
    echo_id = stack.dispatch("demo.echo", {"marca": "depois do cancelamento"})
    echo = stack.wait_status(echo_id, {"CONCLUIDO", "FALHA"}, 10.0)
    assert echo["status"] == "CONCLUIDO"
    assert echo["result"] == {"marca": "depois do cancelamento"}
    assert time.monotonic() - started < 10.0
    # The worker did not overwrite the operator's decision on its way out.
    row = stack.db.job(job_id)
    assert row["status"] == "CANCELADO"
    assert row["progress"] < 100
    assert row["result"] is None


def test_lower_priority_number_runs_first(stack: Stack) -> None:
    stack.pool_worker("scan", 1)
    blocker = stack.dispatch("demo.sleep", {"seconds": 2})
    stack.wait_status(blocker, "EXECUTANDO", RUN_TIMEOUT)
    late = [stack.dispatch("demo.echo", {"n": n}, priority=9) for n in range(3)]
    urgent = [stack.dispatch("demo.echo", {"n": n}, priority=0) for n in range(3)]
    assert stack.db.job(blocker)["status"] == "EXECUTANDO", "the blocker ended before all were queued"
    rows = {job_id: stack.wait_status(job_id, "CONCLUIDO", RUN_TIMEOUT) for job_id in late + urgent}
    last_urgent = max(rows[j]["data_inicio"] for j in urgent)
    first_late = min(rows[j]["data_inicio"] for j in late)
    assert last_urgent < first_late, {j: rows[j]["data_inicio"].isoformat() for j in late + urgent}
    # Equal priorities keep their send order.
    assert sorted(urgent, key=lambda j: rows[j]["data_inicio"]) == urgent
    assert sorted(late, key=lambda j: rows[j]["data_inicio"]) == late


def test_automation_without_implementation_fails_with_that_message(stack: Stack) -> None:
    key = next(
        a.key
        for a in AUTOMATION_REGISTRY.values()
        if a.queue == "scan" and not a.key.startswith("demo.") and not any(f.required for f in a.form.fields)
    )
    stack.pool_worker("scan", 1, wait=False)
    job_id = stack.dispatch(key, {})
    row = stack.wait_status(job_id, {"FALHA", "CONCLUIDO"}, RUN_TIMEOUT)
    assert row["status"] == "FALHA"
    assert row["mensagem_erro"] == missing_implementation_message(key)


def test_concurrency_limit_holds_and_the_refused_job_runs_later(stack: Stack) -> None:
    set_max_concurrent(stack.database_url, "demo.sleep", 1)
    stack.pool_worker("scan", 2, wait=False)
    stack.pool_worker("scan", 2)
    jobs = [stack.dispatch("demo.sleep", {"seconds": 1}) for _ in range(2)]
    most_running = 0
    history: list[dict[int, str]] = []

    def both_done() -> bool:
        nonlocal most_running
        states = stack.db.statuses("demo.sleep")
        history.append(states)
        most_running = max(most_running, sum(1 for s in states.values() if s == "EXECUTANDO"))
        assert most_running <= 1, f"two jobs ran at once: {states}"
        return all(states[j] == "CONCLUIDO" for j in jobs)

    wait_until(both_done, 30.0, lambda: f"jobs never both finished: {history[-1] if history else None}")
    rows: list[dict[str, Any]] = [stack.db.job(j) for j in jobs]
    first, second = sorted(rows, key=lambda r: r["data_inicio"])
    # Serial, not overlapping: the second started only after the first ended.
    assert second["data_inicio"] >= first["data_fim"]
    assert most_running == 1


def set_machine_on(database_url: str, name: str, on: bool) -> None:
    """Turn the named machine on or off (the operators' action)."""

    async def run() -> None:
        db = Database(Settings(database_url=database_url))
        try:
            machine = await machine_named(db, name)
            assert machine is not None, name
            await set_machine_status(db, CLI_ACTOR, machine.id, on)
        finally:
            await db.close()

    asyncio.run(run())


def test_a_job_refused_while_the_machine_is_off_runs_once_it_is_on(stack: Stack) -> None:
    name = "pool-turned-off"
    key = stack.register_machine(queue="scan", name=name)
    set_machine_on(stack.database_url, name, False)
    stack.pool_worker("scan", 1, key=key)
    job_id = stack.dispatch("demo.echo", {"depois": "ligada"})
    time.sleep(2.0)
    # Refused (machine_off), and its message kept for later rather than consumed.
    assert stack.db.job(job_id)["status"] == "AGENDADO"
    set_machine_on(stack.database_url, name, True)
    row = stack.wait_status(job_id, {"CONCLUIDO", "FALHA"}, RUN_TIMEOUT)
    assert row["status"] == "CONCLUIDO"
    assert row["result"] == {"depois": "ligada"}


def test_a_job_whose_process_dies_is_failed_and_the_worker_goes_on(stack: Stack) -> None:
    worker = stack.pool_worker("scan", 1)
    job_id = stack.dispatch("demo.sleep", {"seconds": 60})
    wait_until(lambda: stack.db.job(job_id)["progress"] >= 1, RUN_TIMEOUT, "the sleep never made progress")
    children = descendants(worker.pid)
    assert children, "no pool process found"
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    row = stack.wait_status(job_id, {"FALHA", "CONCLUIDO", "CANCELADO"}, RUN_TIMEOUT)
    assert row["status"] == "FALHA"
    assert row["mensagem_erro"] == LOST_RUN_MESSAGE
    assert row["data_fim"] is not None
    # Celery replaces the process; the next job runs.
    echo_id = stack.dispatch("demo.echo", {"de": "novo"})
    assert stack.wait_status(echo_id, {"CONCLUIDO", "FALHA"}, RUN_TIMEOUT)["status"] == "CONCLUIDO"


def test_a_completion_left_unanswered_by_a_dead_process_is_sent_by_the_next(stack: Stack) -> None:
    # A pool process reports a completion without waiting for its answer, keeping it in the
    # machine's outbox until answered; killed in between, it leaves the file to whoever comes next.
    key = stack.register_machine(queue="scan")
    job_id = stack.dispatch("demo.echo", {"x": 1})
    claimed = stack.http.post(f"/api/v1/jobs/{job_id}/start", json={}, headers={"X-Worker-Api-Key": key})
    assert claimed.status_code == 200, claimed.text
    # What a process killed before its answer leaves: its entry, and a lock file nobody holds.
    directory = Outbox.for_machine(key).directory
    (directory / "killed.0.lock").write_text("")
    (directory / f"killed.0-{job_id}.json").write_text(json.dumps({"job_id": job_id, "result": {"x": 1}}))
    stack.pool_worker("scan", 1, key=key)
    row = stack.wait_status(job_id, {"CONCLUIDO", "FALHA"}, RUN_TIMEOUT)
    assert row["status"] == "CONCLUIDO" and row["result"] == {"x": 1}
    wait_until(lambda: not list(directory.glob("*.json")), RUN_TIMEOUT, "the outbox kept the entry")
    assert not (directory / "killed.0.lock").exists()


def test_a_job_whose_process_died_before_claiming_it_is_queued_again(stack: Stack) -> None:
    # A pool process killed after Celery handed it the task but before its claim: the message
    # went with it (late acks, not rejected on a lost worker) and the job is still AGENDADO.
    key = stack.register_machine(queue="scan")
    job_id = stack.dispatch("demo.echo", {"x": 2})
    task_id = stack.db.job(job_id)["task_id"]
    broker = redis.Redis.from_url(stack.redis_url)
    try:
        broker.delete("scan", *(f"scan:{n}" for n in range(1, 10)))
    finally:
        broker.close()
    settings = Settings(redis_url=stack.redis_url, api_url=stack.api_url, worker_api_key=key)
    app = build_pool_app(settings)
    report_lost(app.tasks[AUTOMATION_REGISTRY["demo.echo"].task_name], task_id, job_id, settings)
    assert stack.db.job(job_id)["status"] == "AGENDADO"
    stack.pool_worker("scan", 1, key=key)
    row = stack.wait_status(job_id, {"CONCLUIDO", "FALHA"}, RUN_TIMEOUT)
    assert row["status"] == "CONCLUIDO" and row["task_id"] == task_id
