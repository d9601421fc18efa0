"""Read operations on job rows: list, detail, active, queued, stats, task status."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select

from worker_automation.errors import BadInput, NotFound
from worker_automation.models import CELERY_STATE, Cliente, JobStatus, Worker
from worker_automation.models.database import Database
from worker_automation.models.folding import fold, fold_text
from worker_automation.resolvers.counts import count_matching, counters
from worker_automation.resolvers.pagination import Page, PageRequest
from worker_automation.resolvers.views import WorkerView, enriched_select, views_of

MSG_WORKER_NOT_FOUND = "Worker nao encontrado."
MSG_TASK_NOT_FOUND = "Task nao encontrada."


def parse_status(value: str, field: str = "status") -> JobStatus:
    try:
        return JobStatus(value.strip().upper())
    except ValueError:
        allowed = ", ".join(s.value for s in JobStatus)
        raise BadInput(field, f"{field} invalido: {value!r} (use {allowed})") from None


def check_queue(value: str, queues: dict[str, int], field: str = "queue") -> str:
    if value not in queues:
        raise BadInput(field, f"{field} desconhecida: {value!r} (use {', '.join(queues)})")
    return value


@dataclass(frozen=True)
class WorkerFilter:
    """Filters of the job list; every field optional."""

    status: str | None = None
    queue: str | None = None
    automation_type: str | None = None
    cliente_id: int | None = None
    usuario_id: int | None = None
    task_id: str | None = None
    q: str | None = None

    @property
    def only_status_or_queue(self) -> bool:
        """True when the counters can give the total (no other filter narrows it)."""
        return not (
            self.automation_type
            or self.cliente_id is not None
            or self.usuario_id is not None
            or self.task_id
            or (self.q and self.q.strip())
        )

    def conditions(self, queues: dict[str, int]) -> list[ColumnElement[bool]]:
        """SQL conditions, after validating each value (BadInput names the field)."""
        from worker_automation.worker.registry import AUTOMATION_REGISTRY

        conds: list[ColumnElement[bool]] = []
        if self.status:
            conds.append(Worker.status == parse_status(self.status).value)
        if self.queue:
            conds.append(Worker.queue == check_queue(self.queue, queues))
        if self.automation_type:
            if self.automation_type not in AUTOMATION_REGISTRY:
                raise BadInput("automation_type", f"automation_type desconhecido: {self.automation_type!r}")
            conds.append(Worker.automation_type == self.automation_type)
        if self.cliente_id is not None:
            conds.append(Worker.cliente_id == self.cliente_id)
        if self.usuario_id is not None:
            conds.append(Worker.usuario_id == self.usuario_id)
        if self.task_id:
            conds.append(Worker.task_id == self.task_id)
        if self.q and self.q.strip():
            conds.append(_text_search(self.q.strip()))
        return conds


def _text_search(q: str) -> ColumnElement[bool]:
    """Free text, ignoring case and accents: task id, automation key or name, client, error."""
    from worker_automation.worker.registry import AUTOMATION_REGISTRY

    needle = fold_text(q)
    pattern = f"%{needle}%"
    keys = [
        a.key
        for a in AUTOMATION_REGISTRY.values()
        if needle in fold_text(a.display_name) or needle in fold_text(a.key)
    ]
    clients = select(Cliente.id).where(fold(Cliente.razao_social).like(pattern))
    options: list[ColumnElement[bool]] = [
        Worker.task_id == q,
        Worker.cliente_id.in_(clients),
        fold(Worker.mensagem_erro).like(pattern),
    ]
    if keys:
        options.append(Worker.automation_type.in_(keys))
    return or_(*options)


async def list_workers(
    db: Database,
    queues: dict[str, int],
    filters: WorkerFilter,
    page: int | None = None,
    per_page: int | None = None,
) -> Page[WorkerView]:
    """Newest first, filtered, paginated; two queries whatever the page size."""
    request = PageRequest.of(page, per_page, default_per_page=20)
    conds = filters.conditions(queues)
    where = and_(*conds) if conds else None
    # The page's ids first (an index-only scan skips ``offset`` entries without visiting their
    # rows), then only the page's rows are read and joined: a deep page no longer reads every row
    # it skips.
    page_ids = select(Worker.id).order_by(Worker.id.desc()).offset(request.offset).limit(request.per_page)
    if where is not None:
        page_ids = page_ids.where(where)
    rows_q = enriched_select().where(Worker.id.in_(page_ids.correlate(None))).order_by(Worker.id.desc())
    async with db.reader() as session:
        if filters.only_status_or_queue:
            status = parse_status(filters.status).value if filters.status else None
            total = await count_matching(session, status=status, queue=filters.queue or None)
        else:
            count = select(func.count()).select_from(Worker)
            if where is not None:
                count = count.where(where)
            total = int(await session.scalar(count) or 0)
        rows = await session.execute(rows_q)
        items = views_of(rows)
    return Page(items, total, request.page, request.per_page)


async def get_worker(db: Database, worker_id: int) -> WorkerView:
    async with db.reader() as session:
        row = (await session.execute(enriched_select().where(Worker.id == worker_id))).first()
    if row is None:
        raise NotFound(MSG_WORKER_NOT_FOUND, worker_id=worker_id)
    return views_of([row])[0]


async def active_workers(db: Database, limit: int | None = None) -> list[WorkerView]:
    """Every EXECUTANDO row, longest running first (``limit`` caps it for dashboards)."""
    query = (
        enriched_select()
        .where(Worker.status == JobStatus.EXECUTANDO.value)
        .order_by(Worker.data_inicio.asc(), Worker.id.asc())
    )
    if limit is not None:
        query = query.limit(limit)
    async with db.reader() as session:
        return views_of(await session.execute(query))


async def queued_workers(
    db: Database,
    queues: dict[str, int],
    page: int | None = None,
    per_page: int | None = None,
    queue: str | None = None,
) -> Page[WorkerView]:
    """AGENDADO rows in the order they will run: priority (0 first), then age."""
    request = PageRequest.of(page, per_page, default_per_page=10)
    conds: list[ColumnElement[bool]] = [Worker.status == JobStatus.AGENDADO.value]
    if queue:
        conds.append(Worker.queue == check_queue(queue, queues))
    async with db.reader() as session:
        total = await count_matching(session, status=JobStatus.AGENDADO.value, queue=queue or None)
        rows = await session.execute(
            enriched_select()
            .where(*conds)
            .order_by(Worker.priority.asc(), Worker.created_at.asc(), Worker.id.asc())
            .offset(request.offset)
            .limit(request.per_page)
        )
        items = views_of(rows)
    return Page(items, total, request.page, request.per_page)


async def recent_terminal(db: Database, limit: int = 20) -> list[WorkerView]:
    """The last ``limit`` rows that ended (CONCLUIDO, FALHA, CANCELADO), newest first."""
    terminal = [JobStatus.CONCLUIDO.value, JobStatus.FALHA.value, JobStatus.CANCELADO.value]
    async with db.reader() as session:
        rows = await session.execute(
            enriched_select()
            .where(Worker.status.in_(terminal), Worker.data_fim.is_not(None))
            .order_by(Worker.data_fim.desc(), Worker.id.desc())
            .limit(limit)
        )
        return views_of(rows)


@dataclass(frozen=True)
class Stats:
    """Totals by status and by queue."""

    total: int
    by_status: dict[str, int]
    by_queue: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total, "by_status": self.by_status, "by_queue": self.by_queue}


async def stats(db: Database, queues: dict[str, int]) -> Stats:
    """Every status and every configured queue appear, with zero when empty.

    Callers asking at the same moment share one read (each still gets one made after it asked).
    """
    return await db.shared.run(("stats", tuple(queues)), lambda: _stats(db, queues))


async def _stats(db: Database, queues: dict[str, int]) -> Stats:
    async with db.reader() as session:
        counts = await counters(session)
        by_status = {s.value: 0 for s in JobStatus}
        by_queue = dict.fromkeys(queues, 0)
        total = 0
        for (queue, status), count in counts.items():
            by_status[status] = by_status.get(status, 0) + count
            by_queue[queue] = by_queue.get(queue, 0) + count
            total += count
    return Stats(total, by_status, by_queue)


@dataclass(frozen=True)
class TaskStatus:
    """A task's state in Celery's vocabulary, from the database (or the result backend)."""

    task_id: str
    state: str
    result: dict[str, Any] | None
    worker: WorkerView | None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "task_id": self.task_id,
            "status": self.state,
            "state": self.state,
            "result": self.result,
        }
        if self.worker is not None:
            data["worker_id"] = self.worker.id
            data["progress"] = self.worker.progress
        return data


def result_object(status: JobStatus, worker: WorkerView) -> dict[str, Any] | None:
    """``result`` as an object: the return value on success, the error on failure, else null."""
    if status is JobStatus.CONCLUIDO:
        value = worker.result
        return value if isinstance(value, dict) else {"value": value}
    if status is JobStatus.FALHA:
        failure = worker.result if isinstance(worker.result, dict) else {}
        return {
            "exc_type": failure.get("exc_type", "AutomationError"),
            "exc_message": failure.get("exc_message", worker.mensagem_erro),
            "traceback": failure.get("traceback"),
        }
    if status is JobStatus.CANCELADO:
        return {"exc_type": "TaskRevokedError", "exc_message": worker.mensagem_erro or "revoked"}
    return None


async def task_status_from_db(db: Database, task_id: str) -> TaskStatus | None:
    """The status of ``task_id`` from its row, or None when no row has it."""
    if not task_id.strip():
        raise BadInput("task_id", "task_id nao pode ser vazio")
    async with db.reader() as session:
        row = (await session.execute(enriched_select().where(Worker.task_id == task_id))).first()
    if row is None:
        return None
    worker = views_of([row])[0]
    status = JobStatus(worker.status)
    return TaskStatus(task_id, CELERY_STATE[status], result_object(status, worker), worker)
