"""Ending a run that no process carries on any more: the one place that decides whether it is
queued again (an idempotent automation, or a run that never started) or ends FALHA naming the
fault, for the reconciler (:mod:`~worker_automation.resolvers.recovery`) and for a machine that
reports, at its start, the runs it held when its process died."""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any, Final

from sqlalchemy import select

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.domain.errors import BadInput, Conflict, NotFound, Unavailable
from worker_automation.domain.vocabulary import REPORTED_FAULTS, EventKind, Fault
from worker_automation.infra.metrics import count_recovered
from worker_automation.models import Job, JobStatus, utcnow
from worker_automation.resolvers.announce import announce
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.dispatch import Send, send_all
from worker_automation.resolvers.job_actions import back_in_queue
from worker_automation.resolvers.job_views import JobView
from worker_automation.resolvers.late_reports import LOST_EXC_TYPES
from worker_automation.resolvers.machines import MachineView
from worker_automation.resolvers.reads import MSG_JOB_NOT_FOUND
from worker_automation.resolvers.retries import after_failure
from worker_automation.resolvers.rows import view_in
from worker_automation.resolvers.services import Services

log = logging.getLogger(__name__)

LOST_RUN_MESSAGE: Final = (
    "worker_lost: o processo que executava o job terminou sem relatar o resultado "
    "(worker encerrado a forca, maquina reiniciada ou serve interrompido)."
)
MACHINE_LOST_MESSAGE: Final = (
    "machine_lost: a maquina dedicada que executava o job desconectou e nao voltou dentro da "
    "janela de recuperacao (processo encerrado a forca, maquina desligada ou sem rede)."
)
# What a run recovery ends as failed says about itself, per fault (default: worker_lost's).
_LOST_MESSAGES: Final = {Fault.MACHINE_LOST: MACHINE_LOST_MESSAGE}


async def end_lost_run(
    services: Services,
    actor: Actor,
    job_id: int,
    task_id: str | None,
    fault: Fault,
    *,
    holder: int | None = None,
) -> JobView | None:
    """End a run that no process carries on: queued again (idempotent automation, or a run that
    never started) or FALHA.

    Only while the job is still EXECUTANDO under ``task_id`` (and, given ``holder``, held by that
    machine); None when it moved on meanwhile.
    """
    async with audited(services.db, actor, "recover", f"worker:{job_id}") as note:
        async with services.db.session() as session:
            row = await session.scalar(select(Job).where(Job.id == job_id).with_for_update())
            if row is None or row.status != JobStatus.EXECUTANDO.value or row.task_id != task_id:
                return None
            if holder is not None and row.machine_id != holder:
                return None
            automation = AUTOMATION_REGISTRY.get(row.automation_type)
            never_ran = fault == Fault.NOT_STARTED
            if automation is not None and (automation.idempotent or never_ran):
                new_task = str(uuid.uuid4())
                back_in_queue(row, new_task)
                row.retry_count += 0 if never_ran else 1
                row.data_fim = None
                row.mensagem_erro = None
                row.result = None
                outcome = "requeued"
            else:
                message = _LOST_MESSAGES.get(fault, LOST_RUN_MESSAGE)
                exc_type = LOST_EXC_TYPES.get(fault, LOST_EXC_TYPES[Fault.WORKER_LOST])
                row.status = JobStatus.FALHA.value
                row.data_fim = utcnow()
                row.mensagem_erro = message
                # The exc_type tells a late report of this same run that it may replace it.
                row.result = {"exc_type": exc_type, "exc_message": message, "traceback": None}
                outcome = "failed"
            note.detail = {"fault": fault.value, "outcome": outcome, "old_task_id": task_id}
            await session.flush()
            view = await view_in(session, row)
    count_recovered(fault.value)
    log.warning("recovery: job %s %s (%s), its run %s was lost", job_id, outcome, fault.value, task_id)
    if outcome == "failed":
        await announce(services, EventKind.FAILED, [view])
        # A lost run is one attempt: the automation's retry policy applies to it, and a retry
        # must not overlap the run should it be alive after all.
        retried = await after_failure(services, view, exc_type)
        if retried.status == JobStatus.AGENDADO and task_id:
            with contextlib.suppress(Unavailable):
                await services.broker.revoke(task_id, terminate=True)
        return retried
    await announce(services, EventKind.CREATED, [view])
    if task_id:
        # Should the run be alive after all, it must not overlap the next one.
        with contextlib.suppress(Unavailable):
            await services.broker.revoke(task_id, terminate=True)
    assert automation is not None and view.task_id is not None
    await send_all(services, [Send(job_id, view.task_id, automation.task_name, view.queue, view.priority)])
    return view


async def recover_lost(
    services: Services, machine: MachineView, job_id: int, fault: Any, task_id: str | None
) -> JobView:
    """A worker reports a run it held when its process died (``worker_lost``, at its start), or a
    claim it never had the answer to and so never ran (``not_started``)."""
    # Compared as a string only: an object or a list is not hashable, and is no fault either.
    if not isinstance(fault, str) or fault not in REPORTED_FAULTS:
        raise BadInput("fault", f"fault deve ser um de {sorted(REPORTED_FAULTS)}")
    async with services.db.reader() as session:
        row = await session.get(Job, job_id)
        if row is None:
            raise NotFound(MSG_JOB_NOT_FOUND, worker_id=job_id)
        status, holder, current_task = row.status, row.machine_id, row.task_id
    if status != JobStatus.EXECUTANDO.value or holder != machine.id:
        raise Conflict("Job nao esta em execucao por esta maquina.", status=status, reason="not_holder")
    if task_id is not None and current_task != task_id:
        raise Conflict("Relato de uma execucao anterior do job.", status=status, reason="stale_task")
    actor = Actor(f"machine:{machine.name}")
    view = await end_lost_run(services, actor, job_id, current_task, Fault(fault), holder=machine.id)
    if view is None:
        raise Conflict("Job nao esta mais em execucao por esta maquina.", reason="not_holder")
    return view
