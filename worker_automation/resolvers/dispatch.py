"""Creating a job: validate, record it AGENDADO, announce it, and hand it to its queue."""

from __future__ import annotations

import uuid
from typing import Any, cast

from sqlalchemy import Table, insert, select

from worker_automation.broker.events import EventKind
from worker_automation.errors import BadInput, Conflict, Unavailable
from worker_automation.models import JobStatus, Worker, utcnow
from worker_automation.resolvers.announce import announce
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.automations import effective
from worker_automation.resolvers.rows import check_priority, client_name_of
from worker_automation.resolvers.views import WorkerView, view_of
from worker_automation.services import Services
from worker_automation.worker.forms import validate_context

# A Core insert on the table, built once (the ORM's insert path cost more than the insert).
_WORKERS = cast(Table, Worker.__table__)
_INSERT_JOB = insert(_WORKERS).returning(*_WORKERS.columns)


async def enqueue(
    services: Services, worker_id: int, task_id: str, task_name: str, queue: str, priority: int
) -> None:
    """Send the job's task (``task_id`` already stored on the row) to ``queue``.

    When the broker is down the row keeps AGENDADO without a task id (nothing is lost: a
    dedicated machine, a retry or sync-orphans can still deal with it) and Unavailable says so.
    """
    try:
        await services.broker.send(
            task_name, queue=queue, priority=priority, args=[worker_id], task_id=task_id
        )
    except Unavailable:
        async with services.db.session() as session:
            stored = await session.scalar(select(Worker).where(Worker.id == worker_id).with_for_update())
            if stored is not None and stored.task_id == task_id:
                stored.task_id = None
        raise Unavailable(
            "Broker indisponivel: o worker ficou AGENDADO sem task no broker.", worker_id=worker_id
        ) from None


async def dispatch(
    services: Services,
    actor: Actor,
    *,
    automation_type: str,
    cliente_id: int | None,
    context: Any,
    priority: int = 0,
    usuario_id: int | None = None,
) -> WorkerView:
    """Create and enqueue a job. Broker down: the row stays AGENDADO and Unavailable names it."""
    if not isinstance(automation_type, str) or not automation_type:
        raise BadInput("automation_type", "automation_type e obrigatorio")
    check_priority(priority)
    if cliente_id is not None and (isinstance(cliente_id, bool) or not isinstance(cliente_id, int)):
        raise BadInput("cliente_id", "cliente_id deve ser um inteiro")
    async with audited(services.db, actor, "dispatch", None) as note:
        task_id = str(uuid.uuid4())
        async with services.db.transaction() as conn:
            automation = await effective(conn, automation_type)
            if not automation.enabled:
                raise Conflict(f"Automacao '{automation_type}' esta desabilitada.", status="disabled")
            clean = validate_context(automation.form, {} if context is None else context)
            now = utcnow()
            # RETURNING the row: the view without reading it back. (SQLite refuses the client
            # name subquery in an INSERT's RETURNING, hence the lookup of its own.)
            client_name = await client_name_of(conn, cliente_id)
            created = await conn.execute(
                _INSERT_JOB,
                {
                    "task_id": task_id,
                    "cliente_id": cliente_id,
                    "usuario_id": usuario_id,
                    "status": JobStatus.AGENDADO.value,
                    "automation_type": automation.key,
                    "queue": automation.queue,
                    "priority": priority,
                    "retry_count": 0,
                    "progress": 0,
                    "context": clean,
                    "created_at": now,
                    "updated_at": now,
                },
            )
            view = view_of(created.one(), client_name)
            note.target = f"worker:{view.id}"
            await note.record_in(conn, actor, "dispatch")
        await announce(services, EventKind.CREATED, [view])
        await enqueue(services, view.id, task_id, automation.task_name, automation.queue, priority)
    return view
