"""Live views: per-queue state, broker snapshot, raw inspect, task status and the dashboard."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, time
from functools import cache
from typing import Any

from sqlalchemy import CompoundSelect, func, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from worker_automation.broker.inspect import InspectResult
from worker_automation.errors import NotFound, Unavailable
from worker_automation.models import JobStatus, Worker, utcnow
from worker_automation.models.database import Database
from worker_automation.resolvers import reads
from worker_automation.resolvers.counts import counters
from worker_automation.resolvers.pagination import Page
from worker_automation.resolvers.reads import MSG_TASK_NOT_FOUND, Stats, TaskStatus
from worker_automation.resolvers.views import (
    RUN_ORDER,
    RUNNING_ORDER,
    WorkerView,
    enriched_select,
    order_by,
    sort_key,
    views_of,
)
from worker_automation.services import Services

log = logging.getLogger(__name__)
# Task lists per queue in the live view are capped: the counts carry the totals.
LIVE_TASKS_PER_QUEUE = 20


@dataclass(frozen=True)
class QueueState:
    """One configured queue right now."""

    queue_name: str
    workers_count: int
    active_count: int
    pending_count: int
    active_tasks: list[WorkerView] = field(default_factory=list)
    pending_tasks: list[WorkerView] = field(default_factory=list)

    @property
    def capacity(self) -> int:
        return self.workers_count

    @property
    def load_percent(self) -> float:
        return round(self.active_count / self.capacity * 100, 1) if self.capacity else 0.0


@dataclass(frozen=True)
class Summary:
    """Totals across queues; "today" is the configured time zone's day."""

    total_active: int
    total_pending: int
    total_completed_today: int
    total_errors_today: int

    def as_dict(self) -> dict[str, int]:
        return {
            "total_active": self.total_active,
            "total_pending": self.total_pending,
            "total_completed_today": self.total_completed_today,
            "total_errors_today": self.total_errors_today,
        }


@dataclass(frozen=True)
class QueueLiveStatus:
    queues: list[QueueState]
    summary: Summary


def start_of_today(services: Services) -> datetime:
    tz = services.settings.tz
    local_now = utcnow().astimezone(tz)
    return datetime.combine(local_now.date(), time.min, tzinfo=tz)


async def _today_counts(session: AsyncSession, since: datetime) -> tuple[int, int]:
    rows = await session.execute(
        select(Worker.status, func.count())
        .where(
            Worker.status.in_([JobStatus.CONCLUIDO.value, JobStatus.FALHA.value]),
            Worker.data_fim >= since,
        )
        .group_by(Worker.status)
    )
    counts = dict(rows.tuples().all())
    return counts.get(JobStatus.CONCLUIDO.value, 0), counts.get(JobStatus.FALHA.value, 0)


def _list_order(status: JobStatus) -> tuple[str, ...]:
    """How a queue's list is ordered: running longest first, queued in run order."""
    return RUNNING_ORDER if status is JobStatus.EXECUTANDO else RUN_ORDER


@cache
def _tasks_statement(wanted: tuple[tuple[str, JobStatus], ...]) -> CompoundSelect[Any]:
    """One statement for the first tasks of every (queue, status) in ``wanted``, built once: every
    open screen polls it."""
    parts = []
    for queue, status in wanted:
        first = (
            enriched_select()
            .where(Worker.status == status.value, Worker.queue == queue)
            .order_by(*order_by(_list_order(status)))
            .limit(LIVE_TASKS_PER_QUEUE)
            .subquery()
        )
        # Each part as a subquery: SQLite allows no ORDER BY or LIMIT on a bare UNION member.
        parts.append(select(first))
    return union_all(*parts)


async def _tasks_of(
    db: Database, wanted: tuple[tuple[str, JobStatus], ...]
) -> dict[tuple[str, JobStatus], list[WorkerView]]:
    """The first tasks of every (queue, status) in ``wanted``, in one statement for all of them."""
    found: dict[tuple[str, JobStatus], list[WorkerView]] = {key: [] for key in wanted}
    if not wanted:
        return found
    async with db.connection() as conn:
        rows = await conn.execute(_tasks_statement(wanted))
        views = views_of(rows)
    for view in views:
        found[(view.queue, JobStatus(view.status))].append(view)
    for (_, status), listed in found.items():
        # The union returns its parts in no particular order: each list is put back in its own.
        listed.sort(key=sort_key(_list_order(status)))
    return found


def _summary_of(counts: dict[tuple[str, str], int], completed: int, errors: int) -> Summary:
    active = sum(n for (_, s), n in counts.items() if s == JobStatus.EXECUTANDO.value)
    pending = sum(n for (_, s), n in counts.items() if s == JobStatus.AGENDADO.value)
    return Summary(active, pending, completed, errors)


async def summary(services: Services, counts: dict[tuple[str, str], int] | None = None) -> Summary:
    async with services.db.reader() as session:
        counts = await counters(session) if counts is None else counts
        completed, errors = await _today_counts(session, start_of_today(services))
    return _summary_of(counts, completed, errors)


async def queue_states(services: Services, *, with_tasks: bool) -> tuple[list[QueueState], Summary]:
    """Every configured queue with its counts (and first tasks), plus the totals.

    Polled by every open screen: callers asking at the same moment share one read.
    """
    return await services.db.shared.run(
        ("queue_states", with_tasks), lambda: _queue_states(services, with_tasks=with_tasks)
    )


async def _queue_states(services: Services, *, with_tasks: bool) -> tuple[list[QueueState], Summary]:
    # The counters, the task lists (one statement for all queues) and today's totals are read
    # at the same time on three connections: the answer comes in the time of the slowest.
    since = start_of_today(services)
    db = services.db

    async def read_counts() -> dict[tuple[str, str], int]:
        async with db.reader() as session:
            return await counters(session)

    async def read_tasks() -> dict[tuple[str, JobStatus], list[WorkerView]]:
        if not with_tasks:
            return {}
        shown = (JobStatus.EXECUTANDO, JobStatus.AGENDADO)
        wanted = tuple((queue, status) for queue in services.settings.queues for status in shown)
        return await _tasks_of(db, wanted)

    async def read_today() -> tuple[int, int]:
        async with db.reader() as session:
            return await _today_counts(session, since)

    counts, tasks, (completed, errors) = await asyncio.gather(read_counts(), read_tasks(), read_today())
    states = [
        QueueState(
            name,
            workers,
            counts.get((name, JobStatus.EXECUTANDO.value), 0),
            counts.get((name, JobStatus.AGENDADO.value), 0),
            tasks.get((name, JobStatus.EXECUTANDO), []),
            tasks.get((name, JobStatus.AGENDADO), []),
        )
        for name, workers in services.settings.queues.items()
    ]
    return states, _summary_of(counts, completed, errors)


async def queue_live_status(services: Services) -> QueueLiveStatus:
    states, totals = await queue_states(services, with_tasks=True)
    return QueueLiveStatus(states, totals)


@dataclass(frozen=True)
class BrokerStatus:
    available: bool
    queues: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {"available": self.available, "queues": self.queues}


async def broker_status(services: Services) -> BrokerStatus:
    """LLEN of every configured queue over all its priority lists; unavailable when Redis is down."""
    try:
        return BrokerStatus(True, await services.broker.queue_lengths())
    except Unavailable:
        return BrokerStatus(False, {})


async def broker_priority_lengths(services: Services) -> dict[str, list[int]]:
    """Messages waiting per queue and priority (index = priority); empty when Redis is down."""
    try:
        return await services.broker.priority_lengths()
    except Unavailable:
        return {}


async def workers_inspect(services: Services) -> InspectResult:
    return await services.broker.inspect()


async def task_status(services: Services, task_id: str) -> TaskStatus:
    """From the job row; for task ids with no row, from Celery's result backend."""
    found = await reads.task_status_from_db(services.db, task_id)
    if found is not None:
        return found
    try:
        meta = await services.broker.task_result(task_id)
    except Unavailable:
        meta = None
    if meta is None:
        raise NotFound(MSG_TASK_NOT_FOUND, task_id=task_id)
    result: dict[str, Any] | None
    if meta.state == "FAILURE":
        result = {"exc_type": meta.exc_type, "exc_message": meta.exc_message, "traceback": meta.traceback}
    elif meta.state == "SUCCESS":
        result = meta.result if isinstance(meta.result, dict) else {"value": meta.result}
    else:
        result = None
    return TaskStatus(task_id, meta.state, result, None)


@dataclass
class Dashboard:
    """Every section the frontend polls, each filled independently."""

    stats: Stats | None = None
    queues: list[QueueState] = field(default_factory=list)
    summary: Summary | None = None
    broker: BrokerStatus | None = None
    active: list[WorkerView] = field(default_factory=list)
    queued: Page[WorkerView] | None = None
    history: list[WorkerView] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


DASHBOARD_ACTIVE_CAP = 50
DASHBOARD_HISTORY = 20


async def dashboard(services: Services) -> Dashboard:
    """One failing source empties only its own section, which is named in ``errors``.

    Callers asking at the same moment share one build of it (each gets one made after it asked).
    """
    return await services.db.shared.run("dashboard", lambda: _dashboard(services))


async def _dashboard(services: Services) -> Dashboard:
    board = Dashboard()

    async def section(name: str, load: Callable[[], Awaitable[None]]) -> None:
        try:
            await load()
        except Exception as exc:
            log.warning("dashboard section %s failed: %s", name, exc)
            board.errors[name] = exc.message if isinstance(exc, Unavailable) else type(exc).__name__

    async def load_stats() -> None:
        board.stats = await reads.stats(services.db, services.settings.queues)

    async def load_queues() -> None:
        board.queues, board.summary = await queue_states(services, with_tasks=False)

    async def load_broker() -> None:
        status = await broker_status(services)
        if not status.available:
            board.broker = status
            raise Unavailable("Broker indisponivel")
        board.broker = status

    async def load_active() -> None:
        board.active = await reads.active_workers(services.db, limit=DASHBOARD_ACTIVE_CAP)

    async def load_queued() -> None:
        board.queued = await reads.queued_workers(services.db, services.settings.queues, 1, 10)

    async def load_history() -> None:
        board.history = await reads.recent_terminal(services.db, DASHBOARD_HISTORY)

    await asyncio.gather(
        section("stats", load_stats),
        section("queues", load_queues),
        section("broker", load_broker),
        section("active", load_active),
        section("queued", load_queued),
        section("history", load_history),
    )
    if "queues" in board.errors:
        board.errors.setdefault("summary", board.errors["queues"])
    return board
