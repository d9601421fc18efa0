"""Pausing a queue: its jobs are still accepted, none is claimed until it is resumed.

The pause is a row in ``queue_pauses`` (it outlives restarts and holds for every replica); a claim
of a job on a paused queue is refused with ``queue_paused``, which pool workers and machines
retry by themselves. On resume the first queued jobs' tasks are sent again, so they run at once
rather than when their worker's retry back-off ends; a duplicate message is harmless, since a
claim names its task and only one claim of a job can succeed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Final

from sqlalchemy import delete, select

from worker_automation.broker.events import EventBus
from worker_automation.broker.gateway import BrokerGateway
from worker_automation.domain.shapes import Doc
from worker_automation.domain.vocabulary import QueueChange
from worker_automation.models import Job, JobStatus, QueuePause, utcnow
from worker_automation.models.database import Database
from worker_automation.resolvers.announce import announce_queue
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.automations import registered
from worker_automation.resolvers.job_filter import check_queue
from worker_automation.resolvers.job_views import RUN_ORDER, order_by

log = logging.getLogger(__name__)

# Queued jobs whose tasks a resume sends again at once; the rest follow through their workers'
# own retries (back-off capped at about 30 s).
RESUME_NUDGE: Final = 100

_PAUSED = select(QueuePause.queue)


@dataclass(frozen=True)
class PauseState:
    """A queue's pause: ``paused_at``/``paused_by`` only while paused."""

    queue: Annotated[str, Doc("Queue name.")]
    paused: Annotated[bool, Doc("True while its jobs are accepted but not run.")]
    paused_at: Annotated[datetime | None, Doc("Since when (null when not paused).")] = None
    paused_by: Annotated[str | None, Doc("Who paused it (null when not paused).")] = None


async def paused_queues(db: Database) -> set[str]:
    """The queues paused right now (a read of a handful of rows)."""
    async with db.reader() as session:
        return set((await session.scalars(_PAUSED)).all())


async def pause_queue(
    db: Database, queues: dict[str, int], actor: Actor, queue: str, events: EventBus | None = None
) -> PauseState:
    """Pause ``queue`` (pausing a paused queue changes nothing); with ``events``, the pause is
    published for the live views of the queues."""
    check_queue(queue, queues)
    async with audited(db, actor, "pause_queue", f"queue:{queue}") as note:
        async with db.session() as session:
            found = await session.get(QueuePause, queue, with_for_update=True)
            changed = found is None
            if found is None:
                found = QueuePause(queue=queue, paused_at=utcnow(), paused_by=actor.label)
                session.add(found)
                await session.flush()
            else:
                note.detail = {"already_paused": True}
            state = PauseState(queue, True, found.paused_at, found.paused_by)
    if changed:
        await announce_queue(events, QueueChange.PAUSED, queue)
    return state


async def resume_queue(
    db: Database,
    queues: dict[str, int],
    actor: Actor,
    queue: str,
    broker: BrokerGateway | None,
    events: EventBus | None = None,
) -> PauseState:
    """Resume ``queue`` and, with a ``broker``, send its first queued jobs' tasks again (without
    one, as from a command with no serve running, they come back through their own retries or the
    next start of the embedded serve); with ``events``, the resume is published for the live views
    of the queues."""
    check_queue(queue, queues)
    async with audited(db, actor, "resume_queue", f"queue:{queue}") as note:
        async with db.session() as session:
            statement = delete(QueuePause).where(QueuePause.queue == queue).returning(QueuePause.queue)
            removed = (await session.execute(statement)).first()
        if removed is None:
            note.detail = {"was_paused": False}
        elif broker is not None:
            note.detail = {"resent": await _nudge(db, broker, queue)}
    if removed is not None:
        await announce_queue(events, QueueChange.RESUMED, queue)
    return PauseState(queue, False)


async def _nudge(db: Database, broker: BrokerGateway, queue: str) -> int:
    """Send the first queued jobs' tasks again under their own task ids; failures are only logged
    (the original messages still come back by themselves)."""
    async with db.reader() as session:
        rows = (
            await session.execute(
                select(Job.id, Job.task_id, Job.automation_type, Job.priority)
                .where(
                    Job.status == JobStatus.AGENDADO.value,
                    Job.queue == queue,
                    Job.task_id.is_not(None),
                )
                .order_by(*order_by(RUN_ORDER))
                .limit(RESUME_NUDGE)
            )
        ).all()
    sends = [
        broker.send(
            registered(automation).task_name, queue=queue, priority=priority, args=[job_id], task_id=task_id
        )
        for job_id, task_id, automation, priority in rows
    ]
    outcomes = await asyncio.gather(*sends, return_exceptions=True)
    failed = sum(isinstance(outcome, BaseException) for outcome in outcomes)
    if failed:
        log.warning("resume of %s: %d of %d task(s) not sent again", queue, failed, len(outcomes))
    return len(outcomes) - failed
