"""Why a queued job is not running yet, and where it stands in its queue.

A job waits for the first of these, checked in this order: its automation is disabled, its
queue is paused, its next attempt is not due yet (a retry's backoff), nobody could run it (no
ONLINE pool worker consumes its queue and no ONLINE machine serves its automation), its
automation already runs as many jobs as it may; otherwise it is simply queued behind others.

Its position counts the queued jobs of its queue claimed before it (claim order: priority, then
age), plus one: those of smaller priorities, read off trigger-kept counters (``queued_counts``),
and those of its own priority ahead of it, counted along the index of queued jobs from the job
towards the nearer end of its priority, a bounded walk (from the back: its priority's count less
the jobs behind it). A page of jobs is answered in one statement whatever its size; only a job
far from both ends of its priority has its queue's backlog ranked, once for the page (why:
docs/decisions/0033-queue-positions-from-counters.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from sqlalchemy import String, bindparam, case, func, literal_column, select, tuple_
from sqlalchemy.orm import aliased

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.models import AutomationSetting, Job, JobStatus, QueuedCount, QueuePause, utcnow
from worker_automation.models.database import Database
from worker_automation.resolvers.one_of import one_of
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


# How far a job's place among the queued jobs of its priority is counted, from the end of its
# priority it is nearer to (told by its id between those of the first and last of them). Only a
# job further than this from both ends is placed by ranking its queue's backlog.
COUNT_CAP: Final = 1000
# Written into the statement's text: the partial index of queued jobs (claim order) answers only a
# statement whose condition it can prove, which a parameter is not in a generic plan. (A literal
# rendered at execution would leave the statement to SQLAlchemy: the driver cannot run it.)
_QUEUED: Any = literal_column(f"'{JobStatus.AGENDADO.value}'", String)
# The queued jobs walked along (a job's own row is ``Job``).
_OTHER = aliased(Job, name="other")


def _of_its_priority() -> list[Any]:
    return [_OTHER.status == _QUEUED, _OTHER.queue == Job.queue, _OTHER.priority == Job.priority]


def _edge(last: bool) -> Any:
    """The id of the first (last) queued job of the job's queue and priority in claim order: one
    probe of the index of queued jobs."""
    order = (_OTHER.created_at.desc(), _OTHER.id.desc()) if last else (_OTHER.created_at, _OTHER.id)
    return (
        select(_OTHER.id)
        .where(*_of_its_priority())
        .order_by(*order)
        .limit(1)
        .correlate(Job)
        .scalar_subquery()
    )


def _walk(ahead: bool) -> Any:
    """How many queued jobs of the job's queue and priority come before it (after it) in claim
    order, counted along the index of queued jobs up to the parameter ``cap``."""
    mine = tuple_(Job.created_at, Job.id)
    theirs = tuple_(_OTHER.created_at, _OTHER.id)
    found = (
        select(_OTHER.id)
        .where(*_of_its_priority(), theirs < mine if ahead else theirs > mine)
        .limit(bindparam("cap"))
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


def _statement() -> Any:
    """Each queued job among the parameter ``ids``: what its reason depends on, and its place's
    terms: the jobs walked (ahead of it, or behind it when counted from the back of its priority,
    up to ``cap``; see :func:`_place`), the queued jobs of smaller priorities and of its own."""
    running = aliased(Job, name="running")
    running_count = (
        select(func.count())
        .select_from(running)
        .where(running.automation_type == Job.automation_type, running.status == JobStatus.EXECUTANDO.value)
        .scalar_subquery()
    )
    paused = select(QueuePause.queue).where(QueuePause.queue == Job.queue).exists()
    # Nearer the back: the walk goes that way (a CASE evaluates only the walk it takes). The
    # direction is told by the sign rather than by a column of its own, which would probe the two
    # edges once more for each job.
    from_back = Job.id - _edge(last=False) > _edge(last=True) - Job.id
    columns = [
        Job.id,
        Job.queue,
        Job.automation_type,
        case((from_back, -1 - _walk(ahead=False)), else_=_walk(ahead=True)),
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
        .where(one_of(Job.id, bindparam("ids")), Job.status == JobStatus.AGENDADO.value)
    )


def _ranked() -> Any:
    """The places of the queued jobs among the parameter ``ids``, their queues' backlogs ranked in
    claim order (one pass over each backlog for all of them)."""
    ids: Any = bindparam("ids", expanding=True)
    queues = select(Job.queue).where(Job.id.in_(ids)).scalar_subquery()
    ranked = (
        select(
            Job.id.label("ranked_id"),
            func.row_number()
            .over(partition_by=Job.queue, order_by=(Job.priority, Job.created_at, Job.id))
            .label("position"),
        )
        .where(Job.status == _QUEUED, Job.queue.in_(queues))
        .subquery()
    )
    return select(ranked.c.ranked_id, ranked.c.position).where(ranked.c.ranked_id.in_(ids))


# Built once: SQLAlchemy then compiles each of them once.
_STATEMENT = _statement()
_RANKED = _ranked()


def _place(signed: int, before: int, alike: int) -> int | None:
    """A job's 1-based place from its walk (``signed``: the jobs of its priority walked ahead of it,
    or ``-1 - walked`` for those walked behind it, from the back), those of smaller priorities
    (``before``) and of its own (``alike``), both from the counters; None when the walk reached
    the cap (then ranked)."""
    from_back = signed < 0
    walked = -1 - signed if from_back else signed
    if walked >= COUNT_CAP:
        return None
    return before + (alike - walked if from_back else walked + 1)


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
    found: list[_Row] = []
    # A page of queued jobs runs this: on the driver's fast path, with one plan for any page
    # (each job is found by its key, each count along its own index; see Database.rows).
    for row in await db.rows(_STATEMENT, {"ids": list(ids), "cap": COUNT_CAP}, generic=True):
        place = _place(int(row[3]), int(row[4]), int(row[5]))
        running, paused, enabled, limit = row[6:10]
        found.append(_Row(row[0], row[1], row[2], place, running, paused, enabled, limit, _next_attempt(row)))
    deep = [row.id for row in found if row.position is None]
    if deep:
        async with db.connection() as conn:
            ranks = dict((await conn.execute(_RANKED, {"ids": deep})).all())
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
    return row[10] if len(row) > 10 else None
