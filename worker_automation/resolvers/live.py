"""Live views: per-queue state, broker snapshot, raw inspect, task status and the dashboard."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime, time
from functools import cache
from typing import Annotated, Any

from annotated_types import Ge
from sqlalchemy import CompoundSelect, select, union_all

from worker_automation.broker.inspect import InspectResult
from worker_automation.domain.errors import NotFound, Unavailable
from worker_automation.domain.shapes import Doc
from worker_automation.models import Job, JobStatus, utcnow
from worker_automation.models.database import Database
from worker_automation.resolvers import reads
from worker_automation.resolvers.earlier_tasks import earlier_task_status
from worker_automation.resolvers.job_views import (
    RUN_ORDER,
    RUNNING_ORDER,
    JobView,
    enriched_select,
    order_by,
    sort_key,
    views_of,
)
from worker_automation.resolvers.literals import written, written_count
from worker_automation.resolvers.live_reads import (
    DASHBOARD_QUEUED,
    Totals,
    read_dashboard_lists,
    read_totals,
)
from worker_automation.resolvers.pagination import Page
from worker_automation.resolvers.pauses import paused_queues
from worker_automation.resolvers.reads import MSG_TASK_NOT_FOUND, Stats, TaskStatus
from worker_automation.resolvers.services import Services

log = logging.getLogger(__name__)
# Task lists per queue in the live view are capped: the counts carry the totals.
LIVE_TASKS_PER_QUEUE = 20


@dataclass(frozen=True)
class QueueState:
    """One configured queue right now: counts, capacity and load, with its first running and
    queued jobs."""

    queue_name: Annotated[str, Doc("Queue name.")]
    workers_count: Annotated[int, Doc("Configured workers for the queue."), Ge(0)]
    active_count: Annotated[int, Doc("Jobs EXECUTANDO on it."), Ge(0)]
    pending_count: Annotated[int, Doc("Jobs AGENDADO on it."), Ge(0)]
    # Computed from the counts (see __post_init__); fields, not properties, so they stand here.
    capacity: Annotated[int, Doc("How many jobs it runs at once (= workersCount)."), Ge(0)] = field(
        init=False
    )
    load_percent: Annotated[float, Doc("activeCount / capacity * 100, one decimal."), Ge(0)] = field(
        init=False
    )
    active_tasks: Annotated[
        list[JobView], Doc("First 20 running jobs, longest running first (empty inside dashboard).")
    ] = field(default_factory=list)
    pending_tasks: Annotated[
        list[JobView], Doc("First 20 queued jobs in run order (empty inside dashboard).")
    ] = field(default_factory=list)
    paused: Annotated[bool, Doc("Paused: its jobs are accepted and none runs until it is resumed.")] = False

    def __post_init__(self) -> None:
        capacity = self.workers_count
        load = round(self.active_count / capacity * 100, 1) if capacity else 0.0
        object.__setattr__(self, "capacity", capacity)
        object.__setattr__(self, "load_percent", load)


@dataclass(frozen=True)
class Summary:
    """Totals across queues; "today" is the configured time zone's day."""

    total_active: Annotated[int, Doc("Jobs EXECUTANDO."), Ge(0)]
    total_pending: Annotated[int, Doc("Jobs AGENDADO."), Ge(0)]
    total_completed_today: Annotated[int, Doc("Jobs CONCLUIDO today."), Ge(0)]
    total_errors_today: Annotated[int, Doc("Jobs FALHA today."), Ge(0)]


@dataclass(frozen=True)
class QueueLiveStatus:
    """Every configured queue right now, and the totals."""

    queues: Annotated[list[QueueState], Doc("One entry per configured queue.")]
    summary: Annotated[Summary, Doc("Totals across queues.")]


def start_of_today(services: Services) -> datetime:
    tz = services.settings.tz
    local_now = utcnow().astimezone(tz)
    return datetime.combine(local_now.date(), time.min, tzinfo=tz)


def _list_order(status: JobStatus) -> tuple[str, ...]:
    """How a queue's list is ordered: running longest first, queued in run order."""
    return RUNNING_ORDER if status is JobStatus.EXECUTANDO else RUN_ORDER


@cache
def _tasks_statement(wanted: tuple[tuple[str, JobStatus], ...]) -> CompoundSelect[Any]:
    """One statement for the first tasks of every (queue, status) in ``wanted``, built once: every
    open screen polls it. Its values are written into its text (see ``literals``): planned anew
    on every call, its planning took longer than its execution."""
    parts = []
    for queue, status in wanted:
        first = (
            enriched_select()
            .where(Job.status == written(status.value), Job.queue == written(queue))
            .order_by(*order_by(_list_order(status)))
            .limit(written_count(LIVE_TASKS_PER_QUEUE))
            .subquery()
        )
        # Each part as a subquery: SQLite allows no ORDER BY or LIMIT on a bare UNION member.
        parts.append(select(first))
    return union_all(*parts)


async def _tasks_of(
    db: Database, wanted: tuple[tuple[str, JobStatus], ...]
) -> dict[tuple[str, JobStatus], list[JobView]]:
    """The first tasks of every (queue, status) in ``wanted``, in one statement for all of them."""
    found: dict[tuple[str, JobStatus], list[JobView]] = {key: [] for key in wanted}
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


def _summary_of(totals: Totals) -> Summary:
    return Summary(
        totals.by_status(JobStatus.EXECUTANDO),
        totals.by_status(JobStatus.AGENDADO),
        totals.completed_today,
        totals.errors_today,
    )


def _states_of(
    services: Services,
    totals: Totals,
    tasks: dict[tuple[str, JobStatus], list[JobView]],
    paused: set[str],
) -> list[QueueState]:
    counts = totals.counts
    return [
        QueueState(
            name,
            workers,
            counts.get((name, JobStatus.EXECUTANDO.value), 0),
            counts.get((name, JobStatus.AGENDADO.value), 0),
            tasks.get((name, JobStatus.EXECUTANDO), []),
            tasks.get((name, JobStatus.AGENDADO), []),
            name in paused,
        )
        for name, workers in services.settings.queues.items()
    ]


async def queue_states(services: Services, *, with_tasks: bool) -> tuple[list[QueueState], Summary]:
    """Every configured queue with its counts (and first tasks), plus the totals.

    Polled by every open screen: callers asking at the same moment share one read.
    """
    return await services.db.shared.run(
        ("queue_states", with_tasks), lambda: _queue_states(services, with_tasks=with_tasks)
    )


async def _queue_states(services: Services, *, with_tasks: bool) -> tuple[list[QueueState], Summary]:
    # The counters with today's totals (one statement) and the task lists (one statement for all
    # queues) are read at the same time on two connections.
    db = services.db

    async def read_tasks() -> dict[tuple[str, JobStatus], list[JobView]]:
        if not with_tasks:
            return {}
        shown = (JobStatus.EXECUTANDO, JobStatus.AGENDADO)
        wanted = tuple((queue, status) for queue in services.settings.queues for status in shown)
        return await _tasks_of(db, wanted)

    totals, tasks, paused = await asyncio.gather(
        read_totals(db, start_of_today(services)), read_tasks(), paused_queues(db)
    )
    return _states_of(services, totals, tasks, paused), _summary_of(totals)


async def queue_live_status(services: Services) -> QueueLiveStatus:
    states, totals = await queue_states(services, with_tasks=True)
    return QueueLiveStatus(states, totals)


@dataclass(frozen=True)
class BrokerStatus:
    """LLEN of each queue over all its priority lists."""

    available: Annotated[bool, Doc("False when Redis does not answer.")]
    queues: Annotated[dict[str, int], Doc('Map queue -> messages waiting, e.g. {"certidao": 4}.')]


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
    """From the job row; for a task id its job no longer holds, from the run it named; for task
    ids that never ran on a job, from Celery's result backend (503 while it cannot be read: the
    task may exist)."""
    found = await reads.task_status_from_db(services.db, task_id)
    if found is None:
        found = await earlier_task_status(services.db, task_id)
    if found is not None:
        return found
    meta = await services.broker.task_result(task_id)
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
    active: list[JobView] = field(default_factory=list)
    queued: Page[JobView] | None = None
    history: list[JobView] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


async def dashboard(services: Services) -> Dashboard:
    """One failing source empties only its own sections, which are named in ``errors``.

    Callers asking at the same moment share one build of it (each gets one made after it asked).
    """
    return await services.db.shared.run("dashboard", lambda: _dashboard(services))


def _failure(exc: BaseException) -> str:
    return exc.message if isinstance(exc, Unavailable) else type(exc).__name__


async def _dashboard(services: Services) -> Dashboard:
    # Three sources read at the same time: the counters with today's totals (stats, queues,
    # summary, the queued total), the three job lists in one statement, and the broker.
    board = Dashboard()
    db = services.db
    totals, lists, broker, paused = await asyncio.gather(
        read_totals(db, start_of_today(services)),
        read_dashboard_lists(db),
        broker_status(services),
        paused_queues(db),
        return_exceptions=True,
    )
    if isinstance(totals, BaseException):
        _failed(board, totals, "stats", "queues", "summary", "queued")
    else:
        board.stats = reads.stats_of(totals.counts, services.settings.queues)
        board.queues = _states_of(services, totals, {}, paused if isinstance(paused, set) else set())
        board.summary = _summary_of(totals)
    if isinstance(lists, BaseException):
        _failed(board, lists, "active", "queued", "history")
    else:
        board.active, board.history = lists.active, lists.history
        if not isinstance(totals, BaseException):
            queued_total = totals.by_status(JobStatus.AGENDADO)
            board.queued = Page(lists.queued, queued_total, 1, DASHBOARD_QUEUED)
    if isinstance(broker, BaseException):
        _failed(board, broker, "broker")
    else:
        board.broker = broker
        if not broker.available:
            _failed(board, Unavailable("Broker indisponivel"), "broker")
    return board


def _failed(board: Dashboard, exc: BaseException, *sections: str) -> None:
    for name in sections:
        if name not in board.errors:
            log.warning("dashboard section %s failed: %s", name, exc)
            board.errors[name] = _failure(exc)
