"""Automatic retries with a real pool worker: each failed run waits out its backoff (no run starts
before the job's next attempt is due), runs under a new task id, and the last ends FALHA with
``retries_exhausted``."""

from __future__ import annotations

import itertools

import pytest

from tests.integration.attempt_support import attempts_of, set_retry_policy
from tests.integration.harness import Stack

pytestmark = pytest.mark.services

ATTEMPTS = 3


def test_a_pool_worker_retries_a_failing_job_until_its_attempts_run_out(stack: Stack) -> None:
    set_retry_policy(stack.database_url, "demo.fail", ATTEMPTS, backoff_max=2)
    key = stack.register_machine(queue="scan")
    stack.pool_worker("scan", 1, key=key)
    job_id = stack.dispatch("demo.fail", {"message": "portal fora do ar"})
    first_task = stack.db.job(job_id)["task_id"]
    row = stack.wait_status(job_id, "FALHA", 60.0)
    assert row["retry_count"] == ATTEMPTS - 1
    assert row["mensagem_erro"] == "retries_exhausted: portal fora do ar"
    attempts = attempts_of(stack.database_url, job_id)
    assert [a["outcome"] for a in attempts] == ["FALHA"] * ATTEMPTS
    assert attempts[0]["task_id"] == first_task
    assert len({a["task_id"] for a in attempts}) == ATTEMPTS
    assert attempts[-1]["error"] == "retries_exhausted: portal fora do ar"
    # Never two runs at once, and the last run started no earlier than its due time.
    for earlier, later in itertools.pairwise(attempts):
        assert later["started_at"] >= earlier["ended_at"]
    assert row["next_attempt_at"] is not None and attempts[-1]["started_at"] >= row["next_attempt_at"]
