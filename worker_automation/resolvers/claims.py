"""The worker protocol: pending jobs, claim, progress, complete and fail.

A claim is one conditional UPDATE run while holding the automation's settings row lock, so
under any concurrency a job is claimed once and ``max_concurrent_jobs`` is never exceeded.
"""

from __future__ import annotations

from datetime import timedelta
from functools import cache
from typing import Any

from sqlalchemy import Update, and_, bindparam, func, or_, select, update
from sqlalchemy.orm import aliased

from worker_automation.domain.errors import BadInput, Conflict, DomainError, NotFound
from worker_automation.domain.limits import result_refusal
from worker_automation.domain.ranges import PROGRESS_MAX, PROGRESS_MIN, check_range
from worker_automation.domain.vocabulary import EventKind, Refusal
from worker_automation.infra.metrics import count_refused, observe_wait
from worker_automation.models import (
    AutomationSetting,
    Job,
    JobStatus,
    Machine,
    QueuePause,
    row_status_is,
    utcnow,
)
from worker_automation.models.database import NotOnDriver, OnConnection, Statements
from worker_automation.resolvers.announce import announce
from worker_automation.resolvers.automations import apply_setting, effective, registered
from worker_automation.resolvers.job_views import RUN_ORDER, JobView, enriched_select, order_by, views_of
from worker_automation.resolvers.late_reports import record_late_report, replaces_lost_run
from worker_automation.resolvers.machines import (
    MACHINE_COLUMNS,
    MachineKey,
    MachineRef,
    MachineView,
    machine_in,
)
from worker_automation.resolvers.reads import MSG_JOB_NOT_FOUND
from worker_automation.resolvers.retries import after_failure, due, fail_by_policy
from worker_automation.resolvers.rows import VIEW_RETURNING, lock_job, returned_view, view_in
from worker_automation.resolvers.services import Services

# A machine's last_claim_at tells humans when it last took work; rewriting it on every claim of a
# busy machine would add a statement to each claim for no one's benefit.
LAST_CLAIM_GRANULARITY = timedelta(seconds=1)


_REFUSAL_MESSAGES: dict[Refusal, str] = {
    Refusal.ALREADY_CLAIMED: "Job ja reivindicado por outra maquina.",
    Refusal.CONCURRENCY_LIMIT: "Automacao no limite de execucoes simultaneas.",
    Refusal.DEV_MODE: "Automacao em modo desenvolvimento.",
    Refusal.AUTOMATION_DISABLED: "Automacao desabilitada: o job roda quando ela for habilitada.",
    Refusal.WRONG_AUTOMATION: "Esta maquina nao atende a automacao deste job.",
    Refusal.MACHINE_OFF: "Maquina desligada.",
    Refusal.NOT_CLAIMABLE: "Job nao pode ser reivindicado no estado atual.",
    Refusal.QUEUE_PAUSED: "Fila pausada: o job roda quando ela for retomada.",
}


# The claim and the reports run for every job: their statements are built once (building one and
# its cache key costs more CPU than the database spends on it); only parameters change.
_HEAD = select(Job.automation_type, Job.queue, Job.status).where(Job.id == bindparam("worker_id"))
# The job's head and its automation's settings, the settings row locked: the lock serialises claims
# of one automation, so the running count read by the claim's UPDATE cannot be overtaken by a
# concurrent claim. (Every registered automation has its row; without one, the two reads apart.)
_HEAD_AND_SETTING_LOCKED = (
    select(
        Job.automation_type,
        Job.queue,
        AutomationSetting.max_concurrent_jobs,
        AutomationSetting.dev_mode,
        AutomationSetting.enabled,
    )
    .join(AutomationSetting, AutomationSetting.key == Job.automation_type)
    .where(Job.id == bindparam("worker_id"))
    .with_for_update(of=AutomationSetting)
)
# The same with the machine behind the request's key (MachineView's columns last): a claim is
# authenticated and its job read in one round trip.
_HEAD_SETTING_AND_MACHINE_LOCKED = _HEAD_AND_SETTING_LOCKED.add_columns(*MACHINE_COLUMNS).join(
    Machine, Machine.key_hash == bindparam("key_hash")
)
_MACHINE_BY_KEY = select(Machine.id).where(Machine.key_hash == bindparam("key_hash")).scalar_subquery()
_TOUCH_MACHINE = (
    update(Machine)
    .where(Machine.id == bindparam("machine"))
    .values(last_claim_at=bindparam("claimed_at"), updated_at=bindparam("claimed_at"))
)


# Whether the job's queue is paused (correlated to the statement's ``workers`` row).
_QUEUE_PAUSED = select(QueuePause.queue).where(QueuePause.queue == Job.queue).exists()


def _claim_statement(*, with_task: bool) -> Update:
    """Claim one AGENDADO job while fewer than ``limit`` jobs of its automation run."""
    running = aliased(Job)
    running_count = (
        select(func.count())
        .select_from(running)
        .where(
            running.automation_type == bindparam("job_automation"),
            running.status == JobStatus.EXECUTANDO.value,
        )
        .scalar_subquery()
    )
    # A paused queue's jobs are not claimed (a primary-key probe inside the same statement), nor
    # a retry before its next attempt is due.
    conds = [
        Job.id == bindparam("job_id"),
        row_status_is(JobStatus.AGENDADO),
        ~_QUEUE_PAUSED,
        or_(Job.next_attempt_at.is_(None), Job.next_attempt_at <= bindparam("claimed_at")),
    ]
    if with_task:
        conds.append(Job.task_id == bindparam("job_task"))
    # RETURNING the whole row and its client's name: the claimed job comes back without
    # reading it again.
    return (
        update(Job)
        .where(and_(*conds), running_count < bindparam("limit"))
        .values(
            status=JobStatus.EXECUTANDO.value,
            machine_id=bindparam("machine"),
            data_inicio=bindparam("claimed_at"),
            data_fim=None,
            progress=0,
            updated_at=bindparam("claimed_at"),
        )
        .returning(*VIEW_RETURNING)
    )


_CLAIM = {with_task: _claim_statement(with_task=with_task) for with_task in (False, True)}


@cache
def _finish_statement(columns: tuple[str, ...], *, by_key: bool, with_task: bool) -> Update:
    """Set ``columns`` (parameters ``set_<column>``) on a job the machine holds, and end it. The
    machine is the parameter ``holder`` (its id) or, ``by_key``, the one whose key is ``key_hash``;
    ``with_task``: only while the job's task is still ``task_id`` (the run the report is about)."""
    holder = _MACHINE_BY_KEY if by_key else bindparam("holder")
    conds = [
        Job.id == bindparam("job_id"),
        row_status_is(JobStatus.EXECUTANDO),
        Job.machine_id == holder,
    ]
    if with_task:
        conds.append(Job.task_id == bindparam("reported_task"))
    return (
        update(Job)
        .where(*conds)
        .values(
            {
                **{name: bindparam(f"set_{name}") for name in columns},
                "data_fim": bindparam("ended_at"),
                "updated_at": bindparam("ended_at"),
            }
        )
        .returning(*VIEW_RETURNING)
    )


# What a refused claim reads to say why (the job's state now).
_CURRENT = select(Job.status, Job.task_id, _QUEUE_PAUSED.label("paused"), Job.next_attempt_at).where(
    Job.id == bindparam("job_id")
)


def refused(reason: Refusal, **details: Any) -> Conflict:
    count_refused(reason.value)
    return Conflict(_REFUSAL_MESSAGES[reason], reason=reason.value, **details)


def _serves(machine: MachineView, automation_type: str, queue: str) -> bool:
    if machine.automation is not None:
        return machine.automation == automation_type
    return machine.queue == queue


async def pending_jobs(
    services: Services, machine: MachineView, automation: str | None, limit: int = 100
) -> list[JobView]:
    """AGENDADO jobs this machine may claim, in run order (for the start-up sweep). A paused
    queue's jobs are left out: a machine would only be refused them, sweep after sweep."""
    key = automation or machine.automation
    conds = [Job.status == JobStatus.AGENDADO.value, ~_QUEUE_PAUSED, due()]
    if key is not None:
        if machine.automation is not None and key != machine.automation:
            raise BadInput("automation", f"Esta maquina atende apenas {machine.automation!r}")
        conds.append(Job.automation_type == key)
    else:
        conds.append(Job.queue == machine.queue)
    async with services.db.session() as session:
        rows = await session.execute(
            enriched_select().where(*conds).order_by(*order_by(RUN_ORDER)).limit(max(1, min(limit, 500)))
        )
        return views_of(rows)


async def _machine_and_locked_head(
    statements: Statements, machine: MachineRef, job_id: int
) -> tuple[MachineView, Any | None]:
    """The machine, and the job's head with its automation's settings row locked (None when the
    job or its settings row is missing). Unauthenticated for an unknown key."""
    if isinstance(machine, MachineKey):
        parameters = {"worker_id": job_id, "key_hash": machine.key_hash}
        row = await statements.first(_HEAD_SETTING_AND_MACHINE_LOCKED, parameters)
        if row is not None:
            columns: tuple[Any, ...] = tuple(row)
            return MachineView(*columns[5:]), row
        machine = await machine_in(statements.connection(), machine)
    return machine, await statements.first(_HEAD_AND_SETTING_LOCKED, {"worker_id": job_id})


async def claim(services: Services, machine: MachineRef, job_id: int, task_id: str | None = None) -> JobView:
    """Move the job to EXECUTANDO for ``machine``, or refuse with a reason (Conflict).

    A claim runs for every job: its statements go on a connection, no ORM session around them,
    and on PostgreSQL on the driver itself (``Database.driver_writes``), where SQLAlchemy's
    execution would cost more than the statements. What only SQLAlchemy runs (an unknown key,
    an automation without its settings row) rolls that back and runs the claim through it."""
    if isinstance(machine, MachineView) and not machine.is_on:
        raise refused(Refusal.MACHINE_OFF)
    view: JobView | None = None
    if services.db.write_plan(_CLAIM[task_id is not None]) is not None:
        try:
            async with services.db.driver_writes(transaction=True) as statements:
                view = await _claim_on(statements, machine, job_id, task_id)
        except NotOnDriver:
            view = None
    if view is None:
        async with services.db.transaction() as conn:
            view = await _claim_on(OnConnection(conn), machine, job_id, task_id)
    observe_wait(view)
    await announce(services, EventKind.CLAIMED, [view])
    return view


async def _claim_on(statements: Statements, machine: MachineRef, job_id: int, task_id: str | None) -> JobView:
    machine, head = await _machine_and_locked_head(statements, machine, job_id)
    if not machine.is_on:
        raise refused(Refusal.MACHINE_OFF)
    found = head or await statements.first(_HEAD, {"worker_id": job_id})
    if found is None:
        raise NotFound(MSG_JOB_NOT_FOUND, worker_id=job_id)
    automation_type, queue = found[0], found[1]
    if not _serves(machine, automation_type, queue):
        raise refused(Refusal.WRONG_AUTOMATION)
    if head is not None:
        automation = apply_setting(registered(automation_type), head)
    else:
        automation = await effective(statements.connection(), automation_type, lock=True)
    if automation.dev_mode:
        raise refused(Refusal.DEV_MODE)
    if not automation.enabled:
        raise refused(Refusal.AUTOMATION_DISABLED)
    now = utcnow()
    parameters = {
        "job_id": job_id,
        "job_automation": automation_type,
        "limit": automation.max_concurrent_jobs,
        "machine": machine.id,
        "claimed_at": now,
    }
    if task_id is not None:
        parameters["job_task"] = task_id
    row = await statements.first(_CLAIM[task_id is not None], parameters)
    if row is None:
        raise await _refusal_for(statements, job_id, task_id)
    if machine.last_claim_at is None or now - machine.last_claim_at > LAST_CLAIM_GRANULARITY:
        await statements.execute(_TOUCH_MACHINE, {"machine": machine.id, "claimed_at": now})
    return returned_view(row)


async def _refusal_for(statements: Statements, job_id: int, task_id: str | None) -> DomainError:
    current = await statements.first(_CURRENT, {"job_id": job_id})
    if current is None:
        # Removed since the claim began (cleanup, a move): nothing left to claim.
        return NotFound(MSG_JOB_NOT_FOUND, worker_id=job_id)
    status, stored_task, queue_paused, next_attempt_at = current
    if status == JobStatus.EXECUTANDO.value:
        return refused(Refusal.ALREADY_CLAIMED, status=status)
    if status != JobStatus.AGENDADO.value:
        return refused(Refusal.NOT_CLAIMABLE, status=status)
    if task_id is not None and stored_task != task_id:
        # A message for a task that was revoked, moved or reordered away: not this job's task.
        return refused(Refusal.NOT_CLAIMABLE, status=status, stale_task=True)
    if queue_paused:
        return refused(Refusal.QUEUE_PAUSED, status=status)
    if next_attempt_at is not None and next_attempt_at > utcnow():
        # A retry whose backoff is not over: its message is sent when it is due.
        return refused(Refusal.NOT_CLAIMABLE, status=status, next_attempt_at=next_attempt_at.isoformat())
    return refused(Refusal.CONCURRENCY_LIMIT, status=status)


async def _held(session: Any, machine: MachineView, job_id: int) -> Job:
    row = await lock_job(session, job_id)
    _check_held(row, machine)
    return row


def _check_held(row: Job, machine: MachineView) -> None:
    """Conflict unless ``machine`` holds ``row``'s run now."""
    if row.status != JobStatus.EXECUTANDO.value:
        raise Conflict(
            f"Job nao esta em execucao (status {row.status}).", status=row.status, reason="not_running"
        )
    if row.machine_id != machine.id:
        raise Conflict("Job reivindicado por outra maquina.", status=row.status, reason="not_holder")


async def report_progress(
    services: Services, machine: MachineView, job_id: int, progress: Any, message: str | None = None
) -> JobView:
    percent = check_range(progress, "progress", PROGRESS_MIN, PROGRESS_MAX)
    async with services.db.session() as session:
        row = await _held(session, machine, job_id)
        row.progress = percent
        if message:
            row.metadata_json = {**(row.metadata_json or {}), "progress_message": message[:500]}
        await session.flush()
        view = await view_in(session, row)
    await announce(services, EventKind.PROGRESS, [view])
    return view


async def _finish(
    services: Services,
    machine: MachineRef,
    job_id: int,
    values: dict[str, Any],
    task_id: str | None = None,
) -> JobView:
    """Apply ``values`` to a job this machine holds and return its view.

    The usual case is one conditional UPDATE, atomic on its own (the machine found by its key
    in it), so it runs without BEGIN and COMMIT around it. When it matches nothing, the key is
    checked and the row read (locked) in a transaction to raise the error that says why; should
    this machine hold it after all, ``values`` apply then.
    """
    now = utcnow()
    by_key = isinstance(machine, MachineKey)
    statement = _finish_statement(tuple(sorted(values)), by_key=by_key, with_task=task_id is not None)
    parameters = {f"set_{name}": value for name, value in values.items()}
    holder = {"key_hash": machine.key_hash} if isinstance(machine, MachineKey) else {"holder": machine.id}
    parameters.update(job_id=job_id, ended_at=now, **holder)
    if task_id is not None:
        parameters["reported_task"] = task_id
    # On the driver itself where it can run (see ``claim``), run once: what fails is raised.
    done = await services.db.write_row(statement, parameters)
    if done is not None:
        return returned_view(done)
    if isinstance(machine, MachineView):
        known = machine
    else:
        async with services.db.connection() as conn:
            known = await machine_in(conn, machine)
    async with services.db.session() as session:
        row = await lock_job(session, job_id)
        # The run recovery ended while its report waited (in an outbox, say): the report wins.
        replaced = replaces_lost_run(row, known, task_id)
        if replaced is not None:
            await record_late_report(session, row, known, replaced, values)
        else:
            _check_held(row, known)
            if task_id is not None and row.task_id != task_id:
                # A report about an earlier run of the job (retried and claimed again since).
                raise Conflict(
                    "Relato de uma execucao anterior do job.", status=row.status, reason="stale_task"
                )
        for name, value in values.items():
            setattr(row, name, value)
        row.data_fim = now
        await session.flush()
        return await view_in(session, row)


async def complete(
    services: Services, machine: MachineRef, job_id: int, result: Any = None, task_id: str | None = None
) -> JobView:
    """Record the job's result (CONCLUIDO); with ``task_id``, only if that is still its run.
    A result that cannot be stored (too large, NUL, lone surrogates) ends the job FALHA with the
    reason instead, and BadInput naming ``result`` tells the caller: the job never stays running."""
    refusal = result_refusal(result, services.settings.max_result_bytes)
    if refusal is not None:
        failure = {"exc_type": "ResultRejected", "exc_message": refusal.message, "traceback": None}
        values = {"status": JobStatus.FALHA.value, "mensagem_erro": refusal.message, "result": failure}
        view = await _finish(services, machine, job_id, values, task_id)
        await announce(services, EventKind.FAILED, [view])
        raise refusal
    view = await _finish(
        services,
        machine,
        job_id,
        {
            "status": JobStatus.CONCLUIDO.value,
            "progress": PROGRESS_MAX,
            "result": result,
            "mensagem_erro": None,
        },
        task_id,
    )
    await announce(services, EventKind.COMPLETED, [view])
    return view


async def fail(
    services: Services,
    machine: MachineRef,
    job_id: int,
    error: Any,
    exc_type: str | None = None,
    traceback: str | None = None,
    task_id: str | None = None,
) -> JobView:
    """Record the job's failure (FALHA); with ``task_id``, only if that is still its run."""
    if not isinstance(error, str) or not error.strip():
        raise BadInput("error", "error (mensagem do erro) e obrigatorio")
    failure = {
        "exc_type": exc_type or "AutomationError",
        "exc_message": error[:4000],
        "traceback": traceback[-4000:] if traceback else None,
    }
    values = {"status": JobStatus.FALHA.value, "mensagem_erro": error[:4000], "result": failure}
    ended = await fail_by_policy(services, machine, job_id, values, task_id, exc_type)
    if ended is not None:
        return ended
    view = await _finish(services, machine, job_id, values, task_id)
    await announce(services, EventKind.FAILED, [view])
    # A report that replaced a lost run: the retry policy applies to it now.
    return await after_failure(services, view, exc_type)
