"""Time limits with real worker processes: a pool worker stops a run at Celery's soft time limit
and a dedicated machine on its own clock, both well before the API's own check would; each
timed-out run is one attempt, retried by the automation's policy. A machine that hangs has its run
ended by the API, and its late report, once it wakes, changes nothing."""

from __future__ import annotations

import json
import signal
from typing import Any

import asyncpg
import pytest

from tests.integration.attempt_support import attempts_of, set_retry_policy
from tests.integration.harness import Stack, wait_until
from worker_automation.catalog.registry import AUTOMATION_REGISTRY, TIME_LIMIT_GRACE_SECONDS, TIMEOUT_EXC_TYPE

pytestmark = pytest.mark.services

LIMITED = "demo.timeout"
LIMIT = AUTOMATION_REGISTRY[LIMITED].timeout_seconds or 0.0
TIMEOUT_MESSAGE = f"timeout: a execucao passou do limite de {LIMIT:g} s"


def _exc_type(row: dict[str, Any]) -> Any:
    result = row["result"]
    return (json.loads(result) if isinstance(result, str) else result)["exc_type"]


def _stopped_by_the_worker(attempt: asyncpg.Record) -> None:
    """The run ended at its limit, by its worker: well before the API's check (limit + grace)."""
    ran = (attempt["ended_at"] - attempt["started_at"]).total_seconds()
    assert LIMIT - 0.5 <= ran < LIMIT + TIME_LIMIT_GRACE_SECONDS / 2, ran


def test_a_pool_worker_stops_a_run_at_its_soft_time_limit_and_the_retry_runs_again(stack: Stack) -> None:
    set_retry_policy(stack.database_url, LIMITED, 2)
    key = stack.register_machine(queue="scan")
    stack.pool_worker("scan", 1, key=key)
    job_id = stack.dispatch(LIMITED, {"seconds": 60})
    row = stack.wait_status(job_id, "FALHA", 30.0)
    assert row["mensagem_erro"] == f"retries_exhausted: {TIMEOUT_MESSAGE}"
    assert row["retry_count"] == 1
    attempts = attempts_of(stack.database_url, job_id)
    assert [(a["outcome"], a["error"]) for a in attempts] == [
        ("FALHA", TIMEOUT_MESSAGE),
        ("FALHA", f"retries_exhausted: {TIMEOUT_MESSAGE}"),
    ]
    assert attempts[0]["task_id"] != attempts[1]["task_id"]
    assert attempts[1]["started_at"] >= attempts[0]["ended_at"]
    for attempt in attempts:
        _stopped_by_the_worker(attempt)
    assert _exc_type(row) == TIMEOUT_EXC_TYPE

    # A run within the limit is not touched.
    quick = stack.dispatch(LIMITED, {"seconds": 0.2})
    assert stack.wait_status(quick, {"CONCLUIDO", "FALHA"}, 30.0)["status"] == "CONCLUIDO"


def test_a_dedicated_machine_stops_a_run_on_its_own_clock(stack: Stack) -> None:
    machine = stack.machine(LIMITED)
    machine.wait_for_output("machine for demo.timeout starting")
    job_id = stack.dispatch(LIMITED, {"seconds": 60})
    row = stack.wait_status(job_id, "FALHA", 30.0)
    assert row["mensagem_erro"] == TIMEOUT_MESSAGE and row["retry_count"] == 0
    (attempt,) = attempts_of(stack.database_url, job_id)
    assert attempt["outcome"] == "FALHA" and attempt["error"] == TIMEOUT_MESSAGE
    _stopped_by_the_worker(attempt)
    assert _exc_type(row) == TIMEOUT_EXC_TYPE
    assert machine.alive()

    quick = stack.dispatch(LIMITED, {"seconds": 0.2})
    assert stack.wait_status(quick, {"CONCLUIDO", "FALHA"}, 30.0)["status"] == "CONCLUIDO"


def test_the_api_ends_the_run_of_a_hung_machine_and_refuses_its_late_report(stack: Stack) -> None:
    machine = stack.machine(LIMITED)
    machine.wait_for_output("machine for demo.timeout starting")
    job_id = stack.dispatch(LIMITED, {"seconds": 60})
    stack.wait_status(job_id, "EXECUTANDO", 30.0)
    machine.send(signal.SIGSTOP)  # hung: neither its clock nor its reports move
    try:
        row = stack.wait_status(job_id, "FALHA", LIMIT + TIME_LIMIT_GRACE_SECONDS + 20.0)
    finally:
        machine.send(signal.SIGCONT)
    assert row["mensagem_erro"] == TIMEOUT_MESSAGE and _exc_type(row) == TIMEOUT_EXC_TYPE
    (attempt,) = attempts_of(stack.database_url, job_id)
    ran = (attempt["ended_at"] - attempt["started_at"]).total_seconds()
    assert attempt["error"] == TIMEOUT_MESSAGE and ran >= LIMIT + TIME_LIMIT_GRACE_SECONDS
    # Awake again, the machine stops the run; its report of it is refused and changes nothing.
    refused = ("failure not recorded, the job is no longer ours", "was taken away while running")
    wait_until(
        lambda: any(text in machine.output() for text in refused),
        20.0,
        lambda: f"no refusal seen:\n{machine.tail()}",
    )
    row = stack.db.job(job_id)
    assert row["status"] == "FALHA" and row["mensagem_erro"] == TIMEOUT_MESSAGE
    assert len(attempts_of(stack.database_url, job_id)) == 1
    assert machine.alive()
