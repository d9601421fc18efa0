"""Automatic retries: a failed run whose automation has attempts left goes back to AGENDADO.

The job row is the truth. A retry waits AGENDADO with no task id and ``next_attempt_at`` set, and
claims refuse it before then, whoever sends it. When it is due, the process that queued it sends
it under a new task id (a timer); should that process stop first, the reconciler finds a due job
with no message and sends it (it leaves jobs that are not due alone), so a retry survives a
restart. A paused queue holds a retry like any queued job, and a retry counts toward its
automation's concurrency limit only once claimed: it is an ordinary AGENDADO job by then.

Attempts keep each failed run (the attempts triggers end the run FALHA first); the last run of an
automation that retries ends FALHA with ``retries_exhausted`` in its error and in its attempt.
An automation raising ``PermanentError`` skips its retries.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final

from sqlalchemy import ColumnElement, Select, Update, and_, func, or_, select, update

from worker_automation.catalog.registry import AUTOMATION_REGISTRY, TIMEOUT_EXC_TYPE, Automation
from worker_automation.domain.vocabulary import EventKind
from worker_automation.infra.metrics import count_retry, count_timeout
from worker_automation.models import Attempt, Job, JobStatus, row_status_is, utcnow
from worker_automation.resolvers.announce import announce
from worker_automation.resolvers.automations import effective
from worker_automation.resolvers.dispatch import Send, send_all
from worker_automation.resolvers.job_views import JobView
from worker_automation.resolvers.machines import MachineRef, MachineView, machine_in
from worker_automation.resolvers.rows import lock_job, view_in
from worker_automation.resolvers.services import Services
from worker_automation.resolvers.transitions import held_until, mark_retried

log = logging.getLogger(__name__)

RETRIES_EXHAUSTED: Final = "retries_exhausted"
# The exception type (its class name, as workers report it) that skips an automation's retries.
PERMANENT_ERROR: Final = "PermanentError"

# Timers of this process sending retries when due (kept so they are not collected early).
_PENDING: set[asyncio.Task[None]] = set()
# The shortest wait before a timer woken early looks at its retry again.
_RECHECK_SECONDS: Final = 0.05


def due() -> ColumnElement[bool]:
    """A job whose next attempt is due (or that waits for none)."""
    return or_(Job.next_attempt_at.is_(None), Job.next_attempt_at <= utcnow())


def backoff_seconds(
    automation: Automation, retry_count: int, draw: Callable[[], float] = random.random
) -> float:
    """The wait before retry number ``retry_count`` + 1: exponential from the base, capped, then
    full jitter (uniform between 0 and that)."""
    ceiling = min(automation.retry_backoff_max_seconds, automation.retry_backoff_seconds * 2.0**retry_count)
    return draw() * max(0.0, ceiling)


async def fail_by_policy(
    services: Services,
    machine: MachineRef,
    job_id: int,
    values: dict[str, Any],
    task_id: str | None,
    exc_type: str | None,
) -> JobView | None:
    """A run ``machine`` holds failed with ``values`` (FALHA), its automation retrying: with
    attempts left, end the run FALHA and queue the job again in one transaction (nobody sees it
    FALHA in between); without, end it FALHA with ``retries_exhausted``. Its view; None when the
    automation does not retry or the run is not this machine's (the caller ends it, or says why
    not)."""
    if exc_type == PERMANENT_ERROR:
        return None
    async with services.db.session() as session:
        row = await lock_job(session, job_id)
        if row.status != JobStatus.EXECUTANDO.value or (task_id is not None and row.task_id != task_id):
            return None
        holder = machine if isinstance(machine, MachineView) else await machine_in(session, machine)
        if row.machine_id != holder.id or row.automation_type not in AUTOMATION_REGISTRY:
            return None
        automation = await effective(session, row.automation_type)
        if automation.max_attempts <= 1:
            return None
        retried = row.retry_count + 1 < automation.max_attempts
        for name, value in values.items():
            setattr(row, name, value)
        if not retried:
            row.mensagem_erro = f"{RETRIES_EXHAUSTED}: {row.mensagem_erro or ''}".rstrip()
        row.data_fim = utcnow()
        # The run ends FALHA first: the attempts triggers record its failure.
        await session.flush()
        if retried:
            _queue_again(row, automation)
            await session.flush()
        view = await view_in(session, row)
        next_attempt_at = row.next_attempt_at
    if retried:
        await _retried(services, view, next_attempt_at)
    else:
        await announce(services, EventKind.FAILED, [view])
    return view


async def after_failure(services: Services, view: JobView, exc_type: str | None) -> JobView:
    """Apply the retry policy to a run that already ended FALHA (``view``, a lost run, say):
    queued again when its automation has attempts left, else marked ``retries_exhausted`` when
    the automation retries. Only while the job is still FALHA under the task that failed (an
    operator or a late report acting meanwhile wins). A run ended by its time limit is counted in
    ``wa_timeouts_total``. The job's view as it stands."""
    if view.status != JobStatus.FALHA.value or view.automation_type not in AUTOMATION_REGISTRY:
        return view
    if exc_type == TIMEOUT_EXC_TYPE:
        count_timeout(view.automation_type)
    async with services.db.session() as session:
        automation = await effective(session, view.automation_type)
        if automation.max_attempts <= 1 or exc_type == PERMANENT_ERROR:
            return view
        row = await lock_job(session, view.id)
        if row.status != JobStatus.FALHA.value or row.task_id != view.task_id:
            return view
        retried = row.retry_count + 1 < automation.max_attempts
        if retried:
            _queue_again(row, automation)
        else:
            row.mensagem_erro = f"{RETRIES_EXHAUSTED}: {row.mensagem_erro or ''}".rstrip()
            await session.execute(_last_attempt_error(row.id, row.mensagem_erro))
        await session.flush()
        current = await view_in(session, row)
        next_attempt_at = row.next_attempt_at
    if retried:
        await _retried(services, current, next_attempt_at)
    return current


def _queue_again(row: Job, automation: Automation) -> None:
    """The failed job back in the queue, waiting out its backoff, with no task until it is due
    (and no sooner than a dedicated machine stopping the run that failed may need)."""
    wait = backoff_seconds(automation, row.retry_count)
    hold = held_until(row)
    mark_retried(row, None)
    row.next_attempt_at = max(utcnow() + timedelta(seconds=wait), hold or utcnow())


async def _retried(services: Services, view: JobView, next_attempt_at: datetime | None) -> None:
    count_retry(view.automation_type)
    log.info("retry: job %s queued again (retry %s), due at %s", view.id, view.retry_count, next_attempt_at)
    await announce(services, EventKind.MOVED, [view])
    assert next_attempt_at is not None
    send_at(services, view.id, next_attempt_at)


def _last_attempt_error(job_id: int, error: str) -> Any:
    last = select(func.max(Attempt.number)).where(Attempt.worker_id == job_id).scalar_subquery()
    return update(Attempt).where(Attempt.worker_id == job_id, Attempt.number == last).values(error=error)


def schedule_send(services: Services, job_id: int, delay: float) -> None:
    """Send the retry of ``job_id`` in ``delay`` seconds from this process."""

    async def later() -> None:
        wait: float | None = delay
        while wait is not None:
            await asyncio.sleep(wait)
            try:
                if await send_due(services, job_id):
                    return
                # The loop's clock is not the wall clock the row's time is on: woken before that
                # time, wait out the rest (None once the retry was sent elsewhere or is gone).
                wait = await _time_left(services, job_id)
            except Exception:  # the reconciler sends it instead
                log.warning("retry: job %s not sent when due; recovery will send it", job_id, exc_info=True)
                return

    task = asyncio.get_running_loop().create_task(later())
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)


def send_at(services: Services, job_id: int, due_at: datetime) -> None:
    """Send the waiting retry ``job_id`` from this process once ``due_at`` has passed."""
    schedule_send(services, job_id, max(0.0, (due_at - utcnow()).total_seconds()))


def waiting_for_its_send() -> ColumnElement[bool]:
    """Retries waiting AGENDADO to be sent (no task id yet, a next attempt set): no message was
    lost, the timer or the reconciler sends each when it is due."""
    return and_(
        Job.status == JobStatus.AGENDADO.value, Job.task_id.is_(None), Job.next_attempt_at.is_not(None)
    )


def waits_for_its_send(row: Job) -> bool:
    """Whether the locked ``row`` is a retry waiting to be sent (see :func:`waiting_for_its_send`)."""
    return row.status == JobStatus.AGENDADO.value and row.task_id is None and row.next_attempt_at is not None


def _unsent(job_id: int) -> list[ColumnElement[bool]]:
    """Job ``job_id`` while it waits AGENDADO for its retry to be sent (no task id yet)."""
    return [Job.id == job_id, row_status_is(JobStatus.AGENDADO), Job.task_id.is_(None)]


def _due_time(job_id: int) -> Select[Any]:
    """When the retry ``job_id`` waiting to be sent is due (no row: it no longer waits)."""
    return select(Job.next_attempt_at).where(*_unsent(job_id))


def _sent_as(job_id: int, new_task: str) -> Update:
    """Give the due retry ``job_id`` its new task id (no row returned: not, or not yet, one)."""
    return (
        update(Job)
        .where(*_unsent(job_id), due())
        .values(task_id=new_task, updated_at=utcnow())
        .returning(Job.id)
    )


async def _time_left(services: Services, job_id: int) -> float | None:
    """Seconds until the waiting retry ``job_id`` is due (at least a little), None when it no
    longer waits for a send."""
    async with services.db.session() as session:
        next_attempt_at: datetime | None = (await session.execute(_due_time(job_id))).scalar_one_or_none()
    if next_attempt_at is None:
        return None
    return max(_RECHECK_SECONDS, (next_attempt_at - utcnow()).total_seconds())


async def send_due(services: Services, job_id: int) -> bool:
    """Send a waiting retry that is due under a new task id; False when it is not (yet) one."""
    new_task = str(uuid.uuid4())
    async with services.db.session() as session:
        if (await session.execute(_sent_as(job_id, new_task))).first() is None:
            return False
        row = await lock_job(session, job_id)
        view = await view_in(session, row)
    automation = AUTOMATION_REGISTRY[view.automation_type]
    await announce(services, EventKind.CREATED, [view])
    await send_all(services, [Send(job_id, new_task, automation.task_name, view.queue, view.priority)])
    return True
