"""Why a queued job is not running yet, and where it stands in its queue.

A job waits for the first of these, checked in this order: its automation is disabled, its
queue is paused, its next attempt is not due yet (a retry's backoff), nobody could run it (no
ONLINE pool worker consumes its queue and no ONLINE machine serves its automation), its
automation already runs as many jobs as it may; otherwise it is simply queued behind others.

Its position counts the queued jobs of its queue claimed before it (claim order: priority, then
age), plus one. A page of jobs is answered in one statement, whatever its size, which ranks the
backlog of the page's queues once: its cost grows with that backlog (why:
docs/decisions/0027-queue-positions-ranked-once.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import func, select
from sqlalchemy.orm import aliased

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.models import AutomationSetting, Job, JobStatus, QueuePause, utcnow
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
    position: int
    running: int
    paused: bool
    enabled: bool | None
    limit: int | None
    next_attempt_at: datetime | None


def _statement(ids: Sequence[int]) -> Any:
    running = aliased(Job)
    # The queued jobs of the page's queues ranked once in claim order (one pass over each queue's
    # backlog for the whole page, instead of a count of the jobs ahead for each job).
    ranked = (
        select(
            Job.id.label("ranked_id"),
            func.row_number()
            .over(partition_by=Job.queue, order_by=(Job.priority, Job.created_at, Job.id))
            .label("position"),
        )
        .where(
            Job.status == JobStatus.AGENDADO.value,
            Job.queue.in_(select(Job.queue).where(Job.id.in_(list(ids))).scalar_subquery()),
        )
        .subquery()
    )
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
        ranked.c.position,
        running_count,
        paused,
        AutomationSetting.enabled,
        AutomationSetting.max_concurrent_jobs,
    ]
    if _NEXT_ATTEMPT is not None:
        columns.append(_NEXT_ATTEMPT)
    return (
        select(*columns)
        .join(ranked, ranked.c.ranked_id == Job.id)
        .outerjoin(AutomationSetting, AutomationSetting.key == Job.automation_type)
        .where(Job.id.in_(list(ids)), Job.status == JobStatus.AGENDADO.value)
    )


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
        found = [
            _Row(*row[:8], next_attempt_at=row[8] if len(row) > 8 else None)  # type: ignore[misc]
            for row in (await session.execute(_statement(ids))).all()
        ]
    if not found:
        return {}
    now = utcnow()
    undecided = any(_reason(row, now, None) in (QUEUED, CONCURRENCY_LIMIT) for row in found)
    consumers = online_consumers(await processes()) if undecided else None
    return {
        row.id: Waiting(_reason(row, now, consumers), int(row.position), row.next_attempt_at) for row in found
    }
