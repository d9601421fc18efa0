"""Automatic retries with a real pool worker: each failed run waits out its backoff (no run starts
before the job's next attempt is due), runs under a new task id, and the last ends FALHA with
``retries_exhausted``."""

from __future__ import annotations

import asyncio
import itertools

import asyncpg
import pytest

from tests.integration.harness import Stack, plain_dsn
from worker_automation.models.database import Database
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.automations import update_settings
from worker_automation.settings import Settings

pytestmark = pytest.mark.services

ATTEMPTS = 3


def _retry_policy(database_url: str) -> None:
    async def run() -> None:
        db = Database(Settings(database_url=database_url))
        try:
            policy: dict[str, int | None] = {
                "max_attempts": ATTEMPTS,
                "retry_backoff_seconds": 1,
                "retry_backoff_max_seconds": 2,
            }
            await update_settings(db, "demo.fail", actor=Actor("test"), retry_policy=policy)
        finally:
            await db.close()

    asyncio.run(run())


def _attempts(database_url: str, job_id: int) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(plain_dsn(database_url))
        try:
            return list(
                await conn.fetch("SELECT * FROM attempts WHERE worker_id = $1 ORDER BY number", job_id)
            )
        finally:
            await conn.close()

    return asyncio.run(run())


def test_a_pool_worker_retries_a_failing_job_until_its_attempts_run_out(stack: Stack) -> None:
    _retry_policy(stack.database_url)
    key = stack.register_machine(queue="scan")
    stack.pool_worker("scan", 1, key=key)
    job_id = stack.dispatch("demo.fail", {"message": "portal fora do ar"})
    first_task = stack.db.job(job_id)["task_id"]
    row = stack.wait_status(job_id, "FALHA", 60.0)
    assert row["retry_count"] == ATTEMPTS - 1
    assert row["mensagem_erro"] == "retries_exhausted: portal fora do ar"
    attempts = _attempts(stack.database_url, job_id)
    assert [a["outcome"] for a in attempts] == ["FALHA"] * ATTEMPTS
    assert attempts[0]["task_id"] == first_task
    assert len({a["task_id"] for a in attempts}) == ATTEMPTS
    assert attempts[-1]["error"] == "retries_exhausted: portal fora do ar"
    # Never two runs at once, and the last run started no earlier than its due time.
    for earlier, later in itertools.pairwise(attempts):
        assert later["started_at"] >= earlier["ended_at"]
    assert row["next_attempt_at"] is not None and attempts[-1]["started_at"] >= row["next_attempt_at"]
