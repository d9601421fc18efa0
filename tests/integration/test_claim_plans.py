"""A claim and a completion find their row by its key in PostgreSQL's plans, even on a table with
no statistics yet: a new database, before its first ANALYZE. An index that leads with the status
would otherwise look as cheap to the planner, and every claim would read every queued job's
index entry (every completion, every finished one's)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Select, Update

from worker_automation.resolvers import claims, retries
from worker_automation.resolvers.services import Services

# The indexes that find one row by its key: the primary key and the unique task id.
_BY_KEY = {"pk_workers", "uq_workers_task_id"}
_JOBS = (("AGENDADO", False, 600), ("EXECUTANDO", False, 3), ("CONCLUIDO", True, 600))


@pytest.fixture
async def unanalyzed(services: Services, pg_database_url: str) -> AsyncIterator[str]:
    """The DSN of a new database whose ``workers`` table holds queued, running and finished jobs
    and has never been analyzed (autovacuum kept off it, so it stays that way)."""
    dsn = pg_database_url.replace("postgresql+asyncpg", "postgresql")
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("ALTER TABLE workers SET (autovacuum_enabled = false)")
        for status, ended, n in _JOBS:
            await conn.execute(
                "INSERT INTO workers (task_id, status, automation_type, queue, priority, retry_count,"
                " progress, created_at, updated_at, data_inicio, data_fim, context)"
                " SELECT gen_random_uuid()::text, $1, 'demo.echo', 'scan', 5, 0, 0, now(), now(),"
                " CASE WHEN $2 THEN now() END, CASE WHEN $2 THEN now() END, '{}'::jsonb"
                " FROM generate_series(1, $3)",
                status,
                ended,
                n,
            )
        assert await conn.fetchval("SELECT reltuples FROM pg_class WHERE relname = 'workers'") < 0
    finally:
        await conn.close()
    yield dsn


async def _one_job(dsn: str, status: str) -> tuple[int, str, Any]:
    """A job in ``status``: its id, its task id, and the database's clock."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT id, task_id, now() FROM workers WHERE status = $1 LIMIT 1", status)
    finally:
        await conn.close()
    return row[0], row[1], row[2]


def _scans_of_the_row(plan: str) -> list[str]:
    """The indexes the plan reads the statement's own ``workers`` row through (not an alias's)."""
    return re.findall(r"Scan using (\w+) on workers(?! \w)", plan)


async def _assert_found_by_key(
    dsn: str, services: Services, statement: Update | Select[Any], values: dict[str, Any]
) -> None:
    """The statement's plan with ``values`` (a custom plan, as the driver's first runs of a
    prepared statement get) and its generic plan (what it may get from the sixth run on) both
    read the row through a key."""
    planned = services.db.write_plan(statement)
    assert planned is not None
    conn = await asyncpg.connect(dsn)
    try:
        custom = await conn.fetch(f"EXPLAIN {planned.sql}", *planned.values(values))
        await conn.execute(f"PREPARE wa_plan AS {planned.sql}")
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        nulls = ", ".join("NULL" for _ in planned.names)
        generic = await conn.fetch(f"EXPLAIN EXECUTE wa_plan({nulls})")
    finally:
        await conn.close()
    for kind, rows in (("custom", custom), ("generic", generic)):
        plan = "\n".join(row[0] for row in rows)
        found = _scans_of_the_row(plan)
        assert found and set(found) <= _BY_KEY, (kind, plan)


async def test_a_claim_finds_its_job_by_its_key_before_any_statistics(
    services: Services, unanalyzed: str
) -> None:
    job_id, task_id, now = await _one_job(unanalyzed, "AGENDADO")
    values = {
        "job_id": job_id,
        "job_task": task_id,
        "machine": None,
        "claimed_at": now,
        "job_automation": "demo.echo",
        "limit": 5,
    }
    for with_task in (False, True):
        await _assert_found_by_key(unanalyzed, services, claims._CLAIM[with_task], values)


async def test_a_completion_finds_its_job_by_its_key_before_any_statistics(
    services: Services, unanalyzed: str
) -> None:
    job_id, task_id, now = await _one_job(unanalyzed, "EXECUTANDO")
    values = {
        "job_id": job_id,
        "holder": 1,
        "key_hash": "0" * 64,
        "reported_task": task_id,
        "ended_at": now,
        "set_progress": 100,
        "set_result": {"ok": True},
        "set_status": "CONCLUIDO",
    }
    for by_key in (False, True):
        for with_task in (False, True):
            statement = claims._finish_statement(
                ("progress", "result", "status"), by_key=by_key, with_task=with_task
            )
            await _assert_found_by_key(unanalyzed, services, statement, values)


async def test_a_retry_being_sent_is_found_by_its_key_before_any_statistics(
    services: Services, unanalyzed: str
) -> None:
    job_id, _, _ = await _one_job(unanalyzed, "AGENDADO")
    for statement in (retries._due_time(job_id), retries._sent_as(job_id, "t-new")):
        await _assert_found_by_key(unanalyzed, services, statement, {})
