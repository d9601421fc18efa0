"""sync-orphans: which open jobs count as having lost their task, and which are never touched."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import insert, select

from worker_automation.broker.queues import priority_keys
from worker_automation.models import Job, utcnow
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.machines import register_machine, set_machine_status
from worker_automation.resolvers.maintenance import sync_orphans
from worker_automation.resolvers.services import Services

pytestmark = pytest.mark.services


async def _add(services: Services, **values: object) -> int:
    now = utcnow()
    row: dict[str, object] = {
        "automation_type": "demo.echo",
        "queue": "scan",
        "status": "AGENDADO",
        "priority": 0,
        "retry_count": 0,
        "progress": 0,
        "created_at": now,
        "updated_at": now,
        "task_id": None,
        "machine_id": None,
    }
    row.update(values)
    async with services.db.session() as session:
        return int((await session.execute(insert(Job).values(**row).returning(Job.id))).scalar_one())


async def _status(services: Services, job_id: int) -> str:
    async with services.db.session() as session:
        return str(await session.scalar(select(Job.status).where(Job.id == job_id)))


async def test_sync_orphans_rules(services: Services) -> None:
    machines = services.settings.queues
    on = await register_machine(services.db, CLI_ACTOR, machines, name="on", automation="demo.echo")
    off = await register_machine(services.db, CLI_ACTOR, machines, name="off", automation="demo.echo")
    await set_machine_status(services.db, CLI_ACTOR, off.machine.id, False)
    old = utcnow() - timedelta(hours=3)

    orphans = {
        "queued without task": await _add(services),
        "running without task nor machine": await _add(services, status="EXECUTANDO"),
        "running on a machine that is off": await _add(
            services, status="EXECUTANDO", machine_id=off.machine.id
        ),
        "old and unknown to celery": await _add(services, task_id="old-lost", created_at=old, updated_at=old),
    }
    kept = {
        "running on a machine that is on": await _add(
            services, status="EXECUTANDO", machine_id=on.machine.id, created_at=old, task_id="held"
        ),
        "running on a machine that is on, no task": await _add(
            services, status="EXECUTANDO", machine_id=on.machine.id
        ),
        "old but started in celery": await _add(
            services, task_id="old-started", created_at=old, updated_at=old
        ),
        "recent and queued": await _add(services, task_id="recent"),
        # Created long ago, sent again a moment ago (a retry, a move, the reconciler): its new
        # task has no state in Celery yet.
        "created long ago, sent again now": await _add(services, task_id="resent", created_at=old),
        # Long in a backlog: its message is in its queue, where Celery keeps no state of it.
        "old and waiting in its queue": await _add(
            services, task_id="in-the-list", created_at=old, updated_at=old
        ),
        # An automatic retry has no task until its next attempt is due: none was lost.
        "a retry waiting its backoff": await _add(
            services, created_at=old, retry_count=1, next_attempt_at=utcnow() + timedelta(minutes=5)
        ),
        "a retry due but not sent yet": await _add(
            services, created_at=old, retry_count=1, next_attempt_at=old
        ),
    }
    finished = await _add(services, status="CONCLUIDO", task_id=None)
    message = {"headers": {"id": "in-the-list", "task": "demo.echo"}, "body": ""}
    await services.broker.redis.lpush(priority_keys("scan")[0], json.dumps(message))
    await services.broker.redis.set(
        "celery-task-meta-old-started",
        json.dumps({"status": "STARTED", "result": None, "task_id": "old-started"}),
    )

    result = await sync_orphans(services, CLI_ACTOR)

    assert result.total_checked == len(orphans) + len(kept)
    assert result.orphans_found == len(orphans)
    for name, job_id in orphans.items():
        assert await _status(services, job_id) == "CANCELADO", name
    for name, job_id in kept.items():
        assert await _status(services, job_id) != "CANCELADO", name
    assert await _status(services, finished) == "CONCLUIDO"

    again = await sync_orphans(services, CLI_ACTOR)
    assert again.orphans_found == 0 and again.total_checked == len(kept)
