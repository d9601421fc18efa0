"""Day-to-day operator actions on one job: cancel, retry, move, reorder."""

from __future__ import annotations

import uuid
from datetime import datetime

from worker_automation.domain.errors import BadInput, Unavailable
from worker_automation.domain.ranges import check_priority
from worker_automation.domain.vocabulary import Action, EventKind
from worker_automation.models import JobStatus
from worker_automation.resolvers.announce import announce
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.automations import registered
from worker_automation.resolvers.dispatch import enqueue
from worker_automation.resolvers.job_filter import check_queue
from worker_automation.resolvers.job_views import JobView
from worker_automation.resolvers.machines import hold_dedicated_runs
from worker_automation.resolvers.retries import send_at, waits_for_its_send
from worker_automation.resolvers.rows import lock_job, view_in
from worker_automation.resolvers.services import Services
from worker_automation.resolvers.transitions import (
    CANCEL_MESSAGE,
    back_in_queue,
    held_until,
    mark_cancelled,
    mark_retried,
    require,
)

__all__ = ["CANCEL_MESSAGE", "back_in_queue", "cancel", "move", "reorder", "retry"]


async def cancel(services: Services, actor: Actor, job_id: int) -> JobView:
    """Revoke the task (terminating it if running) and mark the job CANCELADO."""
    async with audited(services.db, actor, "cancel", f"worker:{job_id}"):
        async with services.db.session() as session:
            row = await lock_job(session, job_id)
            require(row, Action.CANCEL)
            if row.task_id:
                try:
                    await services.broker.revoke(row.task_id, terminate=True)
                except Unavailable:
                    if row.status == JobStatus.EXECUTANDO.value:
                        # It really runs somewhere: marking it cancelled would be a lie.
                        raise
                    # A queued message left behind is refused at claim time (status changed).
            await hold_dedicated_runs(session, [row])
            mark_cancelled(row)
            await session.flush()
            view = await view_in(session, row)
    await announce(services, EventKind.CANCELLED, [view])
    return view


async def retry(services: Services, actor: Actor, job_id: int) -> JobView:
    """Re-queue a FALHA or CANCELADO job as a new task, ``retry_count`` + 1."""
    async with audited(services.db, actor, "retry", f"worker:{job_id}"):
        async with services.db.session() as session:
            row = await lock_job(session, job_id)
            require(row, Action.RETRY)
            automation = registered(row.automation_type)
            # While the machine whose run was ended stops it, the retry waits, unsent.
            hold = held_until(row)
            task_id = None if hold is not None else str(uuid.uuid4())
            mark_retried(row, task_id)
            row.next_attempt_at = hold
            await session.flush()
            view = await view_in(session, row)
        await announce(services, EventKind.CREATED, [view])
        await _send_or_hold(services, view, hold, automation.task_name)
    return view


async def _send_or_hold(services: Services, view: JobView, hold: datetime | None, task_name: str) -> None:
    """Send the job queued again as ``view`` (its task id set), or, held by the end of its
    machine's run, send it once ``hold`` has passed (no task id until then)."""
    if hold is None:
        assert view.task_id is not None
        await enqueue(services, view.id, view.task_id, task_name, view.queue, view.priority)
    else:
        send_at(services, view.id, hold)


async def move(services: Services, actor: Actor, job_id: int, target_queue: str) -> JobView:
    """Revoke the job's task and send it again on ``target_queue`` (AGENDADO, progress 0)."""
    if target_queue is None or target_queue == "":
        raise BadInput("target_queue", "target_queue e obrigatorio")
    if not isinstance(target_queue, str):
        raise BadInput("target_queue", "target_queue deve ser o nome de uma fila (texto)")
    check_queue(target_queue, services.settings.queues, "target_queue")
    async with audited(services.db, actor, "move", f"worker:{job_id}") as note:
        note.detail = {"target_queue": target_queue}
        async with services.db.session() as session:
            row = await lock_job(session, job_id)
            require(row, Action.MOVE)
            if row.queue == target_queue:
                raise BadInput("target_queue", f"O worker ja esta na fila {target_queue!r}")
            automation = registered(row.automation_type)
            if row.task_id:
                await services.broker.revoke(row.task_id, terminate=row.status == JobStatus.EXECUTANDO.value)
            await hold_dedicated_runs(session, [row])
            hold = held_until(row)
            back_in_queue(row, None if hold is not None else str(uuid.uuid4()))
            row.next_attempt_at = hold
            row.queue = target_queue
            await session.flush()
            view = await view_in(session, row)
        await announce(services, EventKind.MOVED, [view])
        await _send_or_hold(services, view, hold, automation.task_name)
    return view


async def reorder(services: Services, actor: Actor, job_id: int, new_priority: int) -> JobView:
    """Change an AGENDADO job's priority; the broker order follows (revoke and re-send). The
    priority it already has changes nothing: its task stays, sent once."""
    check_priority(new_priority, "new_priority")
    async with audited(services.db, actor, "reorder", f"worker:{job_id}") as note:
        note.detail = {"new_priority": new_priority}
        async with services.db.session() as session:
            row = await lock_job(session, job_id)
            require(row, Action.REORDER)
            if row.priority == new_priority and (row.task_id is not None or waits_for_its_send(row)):
                note.detail["unchanged"] = True
                return await view_in(session, row)
            automation = registered(row.automation_type)
            row.priority = new_priority
            # A retry still waiting for its next attempt keeps waiting: it is sent when due, with
            # this priority. Anything else goes to the broker again, in its new place.
            task_id = None if waits_for_its_send(row) else str(uuid.uuid4())
            if task_id is not None:
                if row.task_id:
                    await services.broker.revoke(row.task_id, terminate=False)
                row.task_id = task_id
            await session.flush()
            view = await view_in(session, row)
        await announce(services, EventKind.REORDERED, [view])
        if task_id is not None:
            await enqueue(services, view.id, task_id, automation.task_name, view.queue, new_priority)
    return view
