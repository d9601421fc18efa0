"""Retention: finished jobs past the age go in batches with their attempts; open and recent ones
stay; the (queue, status) counters equal a full recount afterwards."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from sqlalchemy import func, insert, select

from tests.integration.operator_support import any_services, pool_machine
from tests.support.counts import recount
from tests.unit.graphql_support import make_api
from worker_automation.models import Attempt, AuditEntry, Job, utcnow
from worker_automation.resolvers import claims
from worker_automation.resolvers.counts import counters
from worker_automation.resolvers.retention import apply_retention, delete_finished
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]

QUEUES = ["certidao", "scraping", "scan", "observer", "ui_automation"]
STATUSES = ["AGENDADO", "EXECUTANDO", "CONCLUIDO", "FALHA", "CANCELADO"]


def _rows(n: int, rng: random.Random) -> list[dict[str, Any]]:
    now = utcnow()
    rows = []
    for _ in range(n):
        status = rng.choice(STATUSES)
        age = timedelta(days=rng.uniform(0, 200))
        ended = now - age if status in ("CONCLUIDO", "FALHA", "CANCELADO") else None
        rows.append(
            {
                "automation_type": "demo.echo",
                "queue": rng.choice(QUEUES),
                "status": status,
                "priority": 0,
                "retry_count": 0,
                "progress": 0,
                "data_inicio": ended,
                "data_fim": ended,
                "created_at": now - age,
                "updated_at": now - age,
            }
        )
    return rows


async def _census(services: Services, days: int) -> tuple[int, int]:
    """(old finished rows, every other row)."""
    cutoff = utcnow() - timedelta(days=days)
    async with services.db.session() as session:
        old = await session.scalar(
            select(func.count()).where(
                Job.data_fim < cutoff, Job.status.in_(["CONCLUIDO", "FALHA", "CANCELADO"])
            )
        )
        everything = await session.scalar(select(func.count()).select_from(Job))
    return int(old or 0), int(everything or 0) - int(old or 0)


async def test_prune_deletes_old_finished_jobs_in_batches(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    # An old finished job with attempts: they go with it.
    machine = await pool_machine(services)
    job = await api.dispatch("demo.echo")
    await claims.claim(services, machine, job["id"], job["taskId"])
    await claims.complete(services, machine, job["id"], None, job["taskId"])
    async with services.db.session() as session:
        await session.execute(insert(Job), _rows(3000, random.Random(7)))
        row = await session.get(Job, job["id"])
        assert row is not None
        row.data_fim = utcnow() - timedelta(days=120)

    old, kept = await _census(services, 90)
    assert old > 700  # more than one batch
    totals: list[int] = []
    deleted = await delete_finished(services.db, 90, batch=700, progress=totals.append)
    assert deleted == old and totals[-1] == old and len(totals) >= 2
    assert await _census(services, 90) == (0, kept)
    async with services.db.session() as session:
        assert await counters(session) == await recount(session)
        assert await session.scalar(select(func.count()).where(Attempt.worker_id == job["id"])) == 0

    # A dry run counts what would go, deletes nothing and audits nothing.
    old30, kept30 = await _census(services, 30)
    assert old30 > 0
    dry = await api.ok(
        "mutation { pruneWorkers(olderThanDays: 30, dryRun: true) { deleted matched dryRun olderThanDays } }"
    )
    assert dry["pruneWorkers"] == {"deleted": 0, "matched": old30, "dryRun": True, "olderThanDays": 30}
    assert await _census(services, 30) == (old30, kept30)
    async with services.db.session() as session:
        assert await session.scalar(select(AuditEntry).where(AuditEntry.action == "prune_workers")) is None

    # By hand, through GraphQL (managers only), audited.
    data = await api.ok(
        "mutation { pruneWorkers(olderThanDays: 30) { deleted matched dryRun olderThanDays } }"
    )
    assert data["pruneWorkers"]["deleted"] == old30 == data["pruneWorkers"]["matched"]
    assert data["pruneWorkers"]["dryRun"] is False
    assert await _census(services, 30) == (0, kept - data["pruneWorkers"]["deleted"])
    async with services.db.session() as session:
        assert await counters(session) == await recount(session)
        audit = await session.scalar(select(AuditEntry).where(AuditEntry.action == "prune_workers"))
    assert audit is not None
    assert audit.detail == {"older_than_days": 30, "deleted": data["pruneWorkers"]["deleted"]}
    for days in (-1, 2_000_000_000):
        error = await api.fails(f"mutation {{ pruneWorkers(olderThanDays: {days}) {{ deleted }} }}")
        assert error.extensions == {"code": "BAD_USER_INPUT", "field": "older_than_days"}
    for dry_run in ("false", "true"):
        error = await api.fails(
            f"mutation {{ pruneWorkers(olderThanDays: 1, dryRun: {dry_run}) {{ deleted }} }}",
            caller="operator",
        )
        assert error.extensions and error.extensions["code"] == "FORBIDDEN"


async def test_periodic_retention_follows_the_setting(any_services: Services) -> None:
    services = any_services
    async with services.db.session() as session:
        await session.execute(insert(Job), _rows(600, random.Random(3)))
    old, kept = await _census(services, 90)
    services.settings.retention_days = 0
    assert await apply_retention(services) == 0
    services.settings.retention_days = 90
    assert await apply_retention(services) == old
    assert await _census(services, 90) == (0, kept)
    async with services.db.session() as session:
        assert await counters(session) == await recount(session)


def test_retention_runs_on_the_leader() -> None:
    from worker_automation.process.housekeeping import _periodic
    from worker_automation.settings import Settings

    (retention,) = [p for p in _periodic() if p.name == "retention"]
    assert retention.interval(Settings(retention_days=90)) > 0
    assert retention.interval(Settings(retention_days=0)) == 0
