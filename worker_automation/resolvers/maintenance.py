"""Destructive maintenance (managers only): clear-queue, purge-queue, cleanup-no-client, sync-orphans."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Annotated

from annotated_types import Ge
from sqlalchemy import ColumnElement, and_, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from worker_automation.domain.errors import BadInput, Unavailable
from worker_automation.domain.shapes import Doc
from worker_automation.domain.vocabulary import EventKind
from worker_automation.models import Cliente, Job, JobStatus, Machine, MachineStatus, utcnow
from worker_automation.resolvers.announce import announce
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.job_filter import check_queue
from worker_automation.resolvers.job_views import JobView, enriched_select, views_of
from worker_automation.resolvers.retries import waiting_for_its_send
from worker_automation.resolvers.services import Services


class ClearScope(StrEnum):
    """Which jobs clear-queue cancels."""

    ALL = "all"
    QUEUED = "queued"
    RUNNING = "running"


_SCOPE_STATUSES: dict[ClearScope, list[str]] = {
    ClearScope.ALL: [JobStatus.AGENDADO.value, JobStatus.EXECUTANDO.value],
    ClearScope.QUEUED: [JobStatus.AGENDADO.value],
    ClearScope.RUNNING: [JobStatus.EXECUTANDO.value],
}
OPEN = [JobStatus.AGENDADO.value, JobStatus.EXECUTANDO.value]


def parse_scope(value: str | None) -> ClearScope:
    try:
        return ClearScope((value or "all").strip().lower())
    except ValueError:
        raise BadInput("scope", f"scope invalido: {value!r} (use all, queued ou running)") from None


async def _require_broker(services: Services) -> None:
    if not await services.broker.ping():
        raise Unavailable("Broker indisponivel: nenhuma alteracao foi feita.")


async def _revoke_all(services: Services, views: list[JobView]) -> None:
    for view in views:
        if view.task_id:
            await services.broker.revoke(view.task_id, terminate=view.status == JobStatus.EXECUTANDO.value)


async def _cancel_many(
    session: AsyncSession, ids: list[int], message: str, *conds: ColumnElement[bool]
) -> list[JobView]:
    """Mark the still-open rows among ``ids`` CANCELADO; the views of those that changed."""
    if not ids:
        return []
    return await _cancel_where(session, message, Job.id.in_(ids), *conds)


async def _cancel_where(session: AsyncSession, message: str, *conds: ColumnElement[bool]) -> list[JobView]:
    """Mark the still-open rows matching ``conds`` CANCELADO, in one statement; their views."""
    now = utcnow()
    changed_ids = (
        await session.scalars(
            update(Job)
            .where(Job.status.in_(OPEN), *conds)
            .values(status=JobStatus.CANCELADO.value, data_fim=now, mensagem_erro=message, updated_at=now)
            .returning(Job.id)
            .execution_options(synchronize_session=False)
        )
    ).all()
    if not changed_ids:
        return []
    return views_of(await session.execute(enriched_select().where(Job.id.in_(changed_ids))))


# Every maintenance result carries the summary the REST API answers with, in the documented wording.
SUMMARY_DOC = Doc("Human summary, as the REST API words it.")


@dataclass(frozen=True)
class ClearResult:
    """Jobs cancelled in bulk."""

    cancelled: Annotated[int, Doc("Jobs marked CANCELADO (their tasks revoked)."), Ge(0)]
    scope: Annotated[ClearScope, Doc("The scope applied.")]
    queue: Annotated[str | None, Doc("The queue it was limited to, if any.")]

    @property
    def message(self) -> Annotated[str, SUMMARY_DOC]:
        return f"{self.cancelled} worker(s) cancelado(s) com sucesso"


async def clear_queue(
    services: Services, actor: Actor, scope: str | None, queue: str | None = None
) -> ClearResult:
    """Cancel every job of ``scope`` (optionally in one queue), revoking each task."""
    parsed = parse_scope(scope)
    if queue:
        check_queue(queue, services.settings.queues)
    async with audited(services.db, actor, "clear_queue", f"queue:{queue or '*'}") as note:
        await _require_broker(services)
        conds: list[ColumnElement[bool]] = [Job.status.in_(_SCOPE_STATUSES[parsed])]
        if queue:
            conds.append(Job.queue == queue)
        async with services.db.session() as session:
            targets = views_of(await session.execute(enriched_select().where(*conds).with_for_update(of=Job)))
            await _revoke_all(services, targets)
            changed = await _cancel_many(session, [v.id for v in targets], "Cancelado em massa (clear-queue)")
        note.detail = {"scope": parsed.value, "cancelled": len(changed)}
    await announce(services, EventKind.CANCELLED, changed)
    return ClearResult(len(changed), parsed, queue)


@dataclass(frozen=True)
class PurgeResult:
    """Broker lists deleted, and the queued jobs whose messages went with them."""

    queue_name: Annotated[str, Doc("The queue purged.")]
    redis_keys_deleted: Annotated[int, Doc("Priority lists deleted."), Ge(0)]
    cancelled: Annotated[
        int, Doc("Queued jobs whose message was discarded, marked CANCELADO so none runs later."), Ge(0)
    ] = 0

    @property
    def message(self) -> Annotated[str, SUMMARY_DOC]:
        return f"Fila '{self.queue_name}' purgada no broker"


PURGED_MESSAGE = "Cancelado: mensagem descartada da fila (purge-queue)"
# Task ids per statement when the purged jobs are marked (SQLite allows 32,766 parameters).
_PURGE_CHUNK = 5000


async def purge_queue(services: Services, actor: Actor, queue_name: str, confirm: bool) -> PurgeResult:
    """Delete every list of ``queue_name`` in the broker (messages already delivered still run).

    A queued job whose message is discarded would otherwise wait with no message, until recovery
    sent it again and it ran after all: it ends CANCELADO instead, as the operator asked.
    """
    check_queue(queue_name, services.settings.queues, "queue_name")
    if not confirm:
        raise BadInput("confirm", "Operacao destrutiva: informe confirm=true para purgar a fila")
    async with audited(services.db, actor, "purge_queue", f"queue:{queue_name}") as note:
        purged = await services.broker.purge(queue_name)
        changed: list[JobView] = []
        task_ids = sorted(purged.task_ids)
        async with services.db.session() as session:
            for start in range(0, len(task_ids), _PURGE_CHUNK):
                chunk = task_ids[start : start + _PURGE_CHUNK]
                changed += await _cancel_where(
                    session, PURGED_MESSAGE, Job.task_id.in_(chunk), Job.status == JobStatus.AGENDADO.value
                )
        note.detail = {"redis_keys_deleted": purged.lists_deleted, "cancelled": len(changed)}
    await announce(services, EventKind.CANCELLED, changed)
    return PurgeResult(queue_name, purged.lists_deleted, len(changed))


@dataclass(frozen=True)
class CleanupResult:
    """Open jobs without a client, deleted."""

    deleted: Annotated[int, Doc("Rows deleted (their tasks revoked first)."), Ge(0)]

    @property
    def message(self) -> Annotated[str, SUMMARY_DOC]:
        return f"{self.deleted} worker(s) sem cliente removido(s) do banco"


async def cleanup_no_client(services: Services, actor: Actor) -> CleanupResult:
    """Delete open jobs whose client is null or unknown, revoking their tasks first."""
    async with audited(services.db, actor, "cleanup_no_client", None) as note:
        await _require_broker(services)
        known = select(Cliente.id)
        async with services.db.session() as session:
            targets = views_of(
                await session.execute(
                    enriched_select()
                    .where(
                        Job.status.in_(OPEN),
                        or_(Job.cliente_id.is_(None), Job.cliente_id.not_in(known)),
                    )
                    .with_for_update(of=Job)
                )
            )
            await _revoke_all(services, targets)
            if targets:
                await session.execute(
                    delete(Job)
                    .where(Job.id.in_([v.id for v in targets]))
                    .execution_options(synchronize_session=False)
                )
        note.detail = {"deleted": len(targets)}
    await announce(services, EventKind.DELETED, targets)
    return CleanupResult(len(targets))


@dataclass(frozen=True)
class SyncResult:
    """Open jobs that had lost their task, cancelled."""

    orphans_found: Annotated[int, Doc("Jobs marked CANCELADO."), Ge(0)]
    total_checked: Annotated[int, Doc("Open jobs examined."), Ge(0)]

    @property
    def message(self) -> Annotated[str, SUMMARY_DOC]:
        return f"{self.orphans_found} worker(s) orfao(s) detectado(s) e cancelado(s)"


async def sync_orphans(services: Services, actor: Actor) -> SyncResult:
    """Cancel open jobs that lost their task: no task id, or sent longer ago than the orphan age
    and neither waiting in its queue nor known to Celery (PENDING). A job that a machine that is
    on is running is never touched."""
    cutoff = utcnow() - timedelta(seconds=services.settings.orphan_age_seconds)
    async with audited(services.db, actor, "sync_orphans", None) as note:
        async with services.db.session() as session:
            candidates = views_of(await session.execute(enriched_select().where(Job.status.in_(OPEN))))
            # Retries waiting for their next attempt have no task yet by design: none was lost.
            waiting = set((await session.scalars(select(Job.id).where(waiting_for_its_send()))).all())
            machines_on = set(
                (
                    await session.scalars(
                        select(Machine.id).where(Machine.status == MachineStatus.LIGADO.value)
                    )
                ).all()
            )
        orphan_ids: list[int] = []
        # Old means sent long ago: a retry, a move, a reorder or the reconciler sends a job again
        # under a new task (and stamps its row) however long ago it was created. A task whose
        # message still waits in its queue is not lost, however long it has waited.
        old = [
            view
            for view in candidates
            if view.id not in waiting
            and not (view.status == JobStatus.EXECUTANDO.value and view.machine_id in machines_on)
        ]
        queued = (
            await services.broker.waiting_task_ids()
            if any(v.task_id is not None and v.updated_at < cutoff for v in old)
            else set()
        )
        for view in old:
            if view.task_id is None or (
                view.updated_at < cutoff
                and view.task_id not in queued
                and await services.broker.task_result(view.task_id) is None
            ):
                orphan_ids.append(view.id)
        async with services.db.session() as session:
            # Re-checked at write time: a machine may have claimed one of them meanwhile.
            held = and_(
                Job.status == JobStatus.EXECUTANDO.value,
                Job.machine_id.is_not(None),  # NULL would make the negation NULL, not true
                Job.machine_id.in_(machines_on),
            )
            changed = await _cancel_many(
                session, orphan_ids, "Task perdida no broker (sync-orphans)", ~held, ~waiting_for_its_send()
            )
        note.detail = {"orphans_found": len(changed), "total_checked": len(candidates)}
    await announce(services, EventKind.CANCELLED, changed)
    return SyncResult(len(changed), len(candidates))
