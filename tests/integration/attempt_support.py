"""Retry policies and attempt rows for the tests that run real workers (synchronous helpers:
those tests drive processes, not an event loop)."""

from __future__ import annotations

import asyncio

import asyncpg

from tests.integration.harness import plain_dsn
from worker_automation.models.database import Database
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.automations import update_settings
from worker_automation.settings import Settings


def set_retry_policy(database_url: str, automation: str, attempts: int, backoff_max: int = 1) -> None:
    """Give ``automation`` ``attempts`` attempts, 1 s apart at first, at most ``backoff_max``."""

    async def run() -> None:
        db = Database(Settings(database_url=database_url))
        try:
            policy: dict[str, int | None] = {
                "max_attempts": attempts,
                "retry_backoff_seconds": 1,
                "retry_backoff_max_seconds": backoff_max,
            }
            await update_settings(db, automation, actor=Actor("test"), retry_policy=policy)
        finally:
            await db.close()

    asyncio.run(run())


def attempts_of(database_url: str, job_id: int) -> list[asyncpg.Record]:
    """The job's attempt rows, first first."""

    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(plain_dsn(database_url))
        try:
            return list(
                await conn.fetch("SELECT * FROM attempts WHERE worker_id = $1 ORDER BY number", job_id)
            )
        finally:
            await conn.close()

    return asyncio.run(run())
