"""Queued jobs sent again: an AGENDADO job whose message is lost (or that never had one) gets a
new task id and a new message, many jobs in one transaction and one batch of sends.

The new task id is written only while the job is still AGENDADO under the task id that was seen,
so an operator or a worker acting meanwhile wins. A message of the old task that turns up after
all names a task that is no longer the job's, and its claim is refused.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Final

from sqlalchemy import case, func, tuple_, update

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.domain.vocabulary import Fault
from worker_automation.infra.metrics import count_recovered
from worker_automation.models import Job, JobStatus, utcnow
from worker_automation.resolvers.audit import Actor, record_entries
from worker_automation.resolvers.dispatch import Send, send_all
from worker_automation.resolvers.services import Services

# Its lines are recovery's, under recovery's logger name (one name to follow in the logs).
log = logging.getLogger("worker_automation.resolvers.recovery")

# Queued jobs sent again per transaction and batch of sends (a restart may find thousands).
RESEND_CHUNK: Final = 500


async def resend_all(services: Services, actor: Actor, jobs: list[tuple[int, str | None]]) -> list[int]:
    """Send AGENDADO jobs (id, task id seen) again under new task ids, those still holding the task
    id that was seen; a chunk at a time, each one transaction and one batch of sends. Each job sent
    again has its audit entry, log line and count. The ids of the jobs sent."""
    sent: list[int] = []
    for start in range(0, len(jobs), RESEND_CHUNK):
        sent += await _resend_chunk(services, actor, dict(jobs[start : start + RESEND_CHUNK]))
    return sent


async def _resend_chunk(services: Services, actor: Actor, seen: dict[int, str | None]) -> list[int]:
    new_tasks = {job_id: str(uuid.uuid4()) for job_id in seen}
    # A job without a task id is compared as "" (task ids are never empty).
    statement = (
        update(Job)
        .where(
            Job.id.in_(list(seen)),
            Job.status == JobStatus.AGENDADO.value,
            tuple_(Job.id, func.coalesce(Job.task_id, "")).in_(
                [(job_id, task_id or "") for job_id, task_id in seen.items()]
            ),
        )
        .values(task_id=case(new_tasks, value=Job.id), updated_at=utcnow())
        .returning(Job.id, Job.automation_type, Job.queue, Job.priority)
    )
    async with services.db.transaction() as conn:
        changed = {row.id: row for row in (await conn.execute(statement)).all()}
        # Sent in the order given (a restart gives them in the order they are to run).
        rows = [changed[job_id] for job_id in seen if job_id in changed]
        entries: list[tuple[str | None, dict[str, Any]]] = [
            (
                f"worker:{row.id}",
                {
                    "fault": _resend_fault(seen[row.id]).value,
                    "outcome": "resent",
                    "old_task_id": seen[row.id],
                },
            )
            for row in rows
        ]
        await record_entries(conn, actor, "recover", entries)
    sends = []
    for row in rows:
        automation = AUTOMATION_REGISTRY.get(row.automation_type)
        if automation is not None:
            sends.append(Send(row.id, new_tasks[row.id], automation.task_name, row.queue, row.priority))
    refused = set(await send_all(services, sends))
    sent: list[int] = []
    for send in sends:
        old_task, fault = seen[send.worker_id], _resend_fault(seen[send.worker_id])
        if send.worker_id in refused:
            log.warning(
                "recovery: job %s (%s) could not be sent again: broker down", send.worker_id, fault.value
            )
            continue
        count_recovered(fault.value)
        log.warning(
            "recovery: job %s sent again (%s), task %s -> %s",
            send.worker_id,
            fault.value,
            old_task,
            send.task_id,
        )
        sent.append(send.worker_id)
    return sent


def _resend_fault(task_id: str | None) -> Fault:
    """Why a queued job is sent again: its message was lost, or it never had one."""
    return Fault.MESSAGE_LOST if task_id else Fault.NOT_SENT
