"""Why a queued job is not running yet, and where it stands in its queue.

A job waits for the first of these, checked in this order: its automation is disabled, its
queue is paused, its next attempt is not due yet (a retry's backoff), nobody could run it (no
ONLINE pool worker consumes its queue and no ONLINE machine serves its automation), its
automation already runs as many jobs as it may; otherwise it is simply queued behind others.

Its position counts the queued jobs of its queue claimed before it (claim order: priority, then
age), plus one: those of smaller priorities, read off trigger-kept counters (``queued_counts``),
and those of its own priority ahead of it, counted along the index of queued jobs from the job
towards the nearer end of its priority, a bounded walk (near the back: its priority's count less
the jobs behind it). A page of jobs is answered in one statement whatever its size; only a job
deep on both sides of its priority has its queue's backlog ranked, once for the page (why:
docs/decisions/0033-queue-positions-from-counters.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from sqlalchemy import func, literal, select, tuple_
from sqlalchemy.orm import aliased

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.models import AutomationSetting, Job, JobStatus, QueuedCount, QueuePause, utcnow
from worker_automation.models.database import Database
from worker_automation.resolvers.processes import ProcessView, online_consumers

QUEUED: Final = "QUEUED"
QUEUE_PAUSED: Final = "QUEUE_PAUSED"
CONCURRENCY_LIMIT: Final = "CONCURRENCY_LIMIT"
RETRY_BACKOFF: Final = "RETRY_BACKOFF"
NO_PROCESS_ON_QUEUE: Final = "NO_PROCESS_ON_QUEUE"
AUTOMATION_DISABLED: Final = "AUTOMATION_DISABLED"

# A retry's due time, when jobs have one.
_NEXT_ATTEMPT: Any = getattr(Job, "next_attempt_at", None)


@dataclass(frozen=True)
class Waiting:
    """Why one queued job waits and its 1-based place in its queue."""

    reason: str
    position: int
    # When its automatic retry is due (None: it waits for none).
    next_attempt_at: datetime | None = None


@dataclass(frozen=True)
class _Row:
    id: int
    queue: str
    automation: str
    position: int | None
    running: int
    paused: bool
    enabled: bool | None
    limit: int | None
    next_attempt_at: datetime | None


# How far a job's place among the queued jobs of its priority is counted from either end. A job
# within this of the front of its priority is placed by the jobs ahead of it, one within it of the
# back by its priority's count less the jobs behind it; only a page holding a job deeper than this
# on both sides has the backlogs of its queues ranked.
COUNT_CAP: Final = 500
# Written into the statement: the partial index of queued jobs (claim order) answers only a
# statement whose condition it can prove, which a parameter is not in a generic plan.
_QUEUED: Any = literal(JobStatus.AGENDADO.value, literal_execute=True)


def _nearby(before: bool) -> Any:
    """How many queued jobs of the job's queue and priority come before it (after it) in claim
    order, counted up to :data:`COUNT_CAP` along the index of queued jobs."""
    other = aliased(Job)
    mine = tuple_(Job.created_at, Job.id)
    theirs = tuple_(other.created_at, other.id)
    found = (
        select(other.id)
        .where(
            other.status == _QUEUED,
            other.queue == Job.queue,
            other.priority == Job.priority,
            theirs < mine if before else theirs > mine,
        )
        .limit(COUNT_CAP)
        .correlate(Job)
        .subquery()
    )
    return select(func.count()).select_from(found).scalar_subquery()


def _queued(priority: Callable[[Any], Any]) -> Any:
    """The counters' queued jobs of the job's queue whose priority satisfies ``priority``."""
    return (
        select(func.coalesce(func.sum(QueuedCount.n), 0))
        .where(QueuedCount.queue == Job.queue, priority(QueuedCount.priority))
        .scalar_subquery()
    )


def _statement(ids: Sequence[int]) -> Any:
    running = aliased(Job)
    running_count = (
        select(func.count())
        .select_from(running)
        .where(running.automation_type == Job.automation_type, running.status == JobStatus.EXECUTANDO.value)
        .scalar_subquery()
    )
    paused = select(QueuePause.queue).where(QueuePause.queue == Job.queue).exists()
    columns = [
        Job.id,
        Job.queue,
        Job.automation_type,
        _nearby(before=True),
        _nearby(before=False),
        _queued(lambda priority: priority < Job.priority),
        _queued(lambda priority: priority == Job.priority),
        running_count,
        paused,
        AutomationSetting.enabled,
        AutomationSetting.max_concurrent_jobs,
    ]
    if _NEXT_ATTEMPT is not None:
        columns.append(_NEXT_ATTEMPT)
    return (
        select(*columns)
        .outerjoin(AutomationSetting, AutomationSetting.key == Job.automation_type)
        .where(Job.id.in_(list(ids)), Job.status == JobStatus.AGENDADO.value)
    )


def _ranked(ids: Sequence[int]) -> Any:
    """The places of the queued jobs among ``ids``, their queues' backlogs ranked in claim order
    (one pass over each backlog for all of them)."""
    ranked = (
        select(
            Job.id.label("ranked_id"),
            func.row_number()
            .over(partition_by=Job.queue, order_by=(Job.priority, Job.created_at, Job.id))
            .label("position"),
        )
        .where(
            Job.status == _QUEUED,
            Job.queue.in_(select(Job.queue).where(Job.id.in_(list(ids))).scalar_subquery()),
        )
        .subquery()
    )
    return select(ranked.c.ranked_id, ranked.c.position).where(ranked.c.ranked_id.in_(list(ids)))


def _place(ahead: int, behind: int, before: int, alike: int) -> int | None:
    """A job's 1-based place from the jobs of its priority counted ahead of and behind it (up to
    :data:`COUNT_CAP`), those of smaller priorities (``before``) and of its own (``alike``), both
    from the counters; None when it is too deep among its own to be placed so (then ranked)."""
    if ahead < COUNT_CAP:
        return before + ahead + 1
    if behind < COUNT_CAP:
        return before + max(alike - behind, ahead + 1)
    return None


def _reason(row: _Row, now: datetime, consumers: tuple[set[str], set[str]] | None) -> str:
    registered = AUTOMATION_REGISTRY.get(row.automation)
    enabled = row.enabled if row.enabled is not None else (registered.enabled if registered else True)
    limit = row.limit if row.limit is not None else (registered.max_concurrent_jobs if registered else None)
    if not enabled:
        return AUTOMATION_DISABLED
    if row.paused:
        return QUEUE_PAUSED
    if row.next_attempt_at is not None and row.next_attempt_at > now:
        return RETRY_BACKOFF
    if consumers is not None:
        queues, automations = consumers
        if row.queue not in queues and row.automation not in automations:
            return NO_PROCESS_ON_QUEUE
    if limit is not None and row.running >= limit:
        return CONCURRENCY_LIMIT
    return QUEUED


async def waiting_of(
    db: Database, ids: Sequence[int], processes: Callable[[], Awaitable[list[ProcessView]]]
) -> dict[int, Waiting]:
    """Why each of the queued jobs among ``ids`` waits (jobs not queued are left out), in one
    statement; ``processes`` is asked only when a reason depends on who is up."""
    if not ids:
        return {}
    async with db.reader() as session:
        found: list[_Row] = []
        for row in (await session.execute(_statement(ids))).all():
            place = _place(*(int(n) for n in row[3:7]))
            running, paused, enabled, limit = row[7:11]
            found.append(
                _Row(row[0], row[1], row[2], place, running, paused, enabled, limit, _next_attempt(row))
            )
        deep = [row.id for row in found if row.position is None]
        if deep:
            ranks = dict((await session.execute(_ranked(deep))).all())
            found = [replace(row, position=ranks.get(row.id)) if row.id in deep else row for row in found]
    if not found:
        return {}
    now = utcnow()
    undecided = any(_reason(row, now, None) in (QUEUED, CONCURRENCY_LIMIT) for row in found)
    consumers = online_consumers(await processes()) if undecided else None
    return {
        row.id: Waiting(_reason(row, now, consumers), row.position, row.next_attempt_at)
        for row in found
        if row.position is not None
    }


def _next_attempt(row: Any) -> datetime | None:
    return row[11] if len(row) > 11 else None
