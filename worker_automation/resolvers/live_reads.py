"""The statements behind the live views, built once, each answering several sections at a time.

Every open screen polls the dashboard and the queues' state. Their figures come from two
statements: the per (queue, status) counters together with today's completed and failed totals
(from the counters of finish times per hour), and the dashboard's three job lists (running,
queued, recently ended) in one union. One statement costs a pooled connection, a round trip and
its result handling in Python whatever the rows it carries, and at 1M rows those fixed costs,
not PostgreSQL, were most of a build.

Why: docs/decisions/0029-live-reads-in-fewer-statements.md.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import CompoundSelect, Select, bindparam, func, literal, select, union_all

from worker_automation.models import FinishedCount, Job, JobCount, JobStatus
from worker_automation.models.database import Database
from worker_automation.resolvers.counts import CountKey, finished_parameters
from worker_automation.resolvers.job_views import (
    ROW_FIELDS,
    RUN_ORDER,
    RUNNING_ORDER,
    JobView,
    enriched_select,
    order_by,
    sort_key,
    views_of,
)
from worker_automation.resolvers.literals import written, written_count

DASHBOARD_ACTIVE_CAP = 50
DASHBOARD_HISTORY = 20
DASHBOARD_QUEUED = 10
TERMINAL = (JobStatus.CONCLUIDO.value, JobStatus.FALHA.value, JobStatus.CANCELADO.value)
_COUNTED, _TODAY = "count", "today"


@dataclass(frozen=True)
class Totals:
    """The counters by (queue, status) and today's completed and failed jobs."""

    counts: dict[CountKey, int]
    completed_today: int
    errors_today: int

    def by_status(self, status: JobStatus) -> int:
        return sum(n for (_, s), n in self.counts.items() if s == status.value)


@cache
def _totals_statement() -> CompoundSelect[Any]:
    counted = select(literal(_COUNTED).label("kind"), JobCount.queue, JobCount.status, JobCount.n)
    ended = [JobStatus.CONCLUIDO.value, JobStatus.FALHA.value]
    # Today's ended jobs: the finish-time counters of the whole hours since ``since`` (a day
    # holds tens of thousands of rows at a few million, whose count grew with the table), and a
    # count of the rows in the part of an hour before the first of them.
    whole_hours = (
        select(
            literal(_TODAY).label("kind"),
            literal("").label("queue"),
            FinishedCount.status,
            func.sum(FinishedCount.n),
        )
        .where(FinishedCount.status.in_(ended), FinishedCount.slot >= bindparam("slots_from"))
        .group_by(FinishedCount.status)
    )
    first_hour = (
        select(literal(_TODAY).label("kind"), literal("").label("queue"), Job.status, func.count())
        .where(
            Job.status.in_(ended),
            Job.data_fim >= bindparam("since"),
            Job.data_fim < bindparam("first_whole_hour"),
        )
        .group_by(Job.status)
    )
    # Each part as a subquery: SQLite allows no GROUP BY on a bare UNION member of this shape.
    return union_all(*(select(part.subquery()) for part in (counted, whole_hours, first_hour)))


async def read_totals(db: Database, since: datetime) -> Totals:
    """The counters and today's totals (jobs ended since ``since``), in one statement."""
    counts: dict[CountKey, int] = {}
    today: dict[str, int] = defaultdict(int)
    slots = finished_parameters(since, None)
    parameters = {"since": since, "slots_from": slots["slots_from"], "first_whole_hour": slots["head_to"]}
    async with db.connection() as conn:
        rows = await conn.execute(_totals_statement(), parameters)
        for kind, queue, status, n in rows:
            if not n:
                continue
            if kind == _COUNTED:
                counts[(queue, status)] = int(n)
            else:
                today[status] += int(n)
    return Totals(counts, today[JobStatus.CONCLUIDO.value], today[JobStatus.FALHA.value])


@dataclass(frozen=True)
class DashboardLists:
    """The dashboard's job lists: running (longest first), queued (run order), recently ended."""

    active: list[JobView]
    queued: list[JobView]
    history: list[JobView]


def _tagged(query: Select[Any], section: str) -> Select[Any]:
    # The section's name after the client name: views are built by position and ignore it.
    return select(query.add_columns(written(section).label("section")).subquery())


@cache
def _lists_statement() -> CompoundSelect[Any]:
    """The three lists, their values written into the statement's text (see ``literals``):
    planned anew on every call, its planning took longer than its execution."""
    active = (
        enriched_select()
        .where(Job.status == written(JobStatus.EXECUTANDO.value))
        .order_by(*order_by(RUNNING_ORDER))
        .limit(written_count(DASHBOARD_ACTIVE_CAP))
    )
    queued = (
        enriched_select()
        .where(Job.status == written(JobStatus.AGENDADO.value))
        .order_by(*order_by(RUN_ORDER))
        .limit(written_count(DASHBOARD_QUEUED))
    )
    history = (
        enriched_select()
        .where(Job.status.in_([written(status) for status in TERMINAL]), Job.data_fim.is_not(None))
        .order_by(Job.data_fim.desc(), Job.id.desc())
        .limit(written_count(DASHBOARD_HISTORY))
    )
    return union_all(_tagged(active, "active"), _tagged(queued, "queued"), _tagged(history, "history"))


def _ended_last(view: JobView) -> tuple[datetime, int]:
    assert view.data_fim is not None  # the statement keeps only rows that ended
    return view.data_fim, view.id


async def read_dashboard_lists(db: Database) -> DashboardLists:
    """The three lists in one statement, each put back in its own order (a union keeps none)."""
    sections: dict[str, list[Any]] = defaultdict(list)
    at = len(ROW_FIELDS) + 1
    async with db.connection() as conn:
        for row in await conn.execute(_lists_statement()):
            sections[row[at]].append(row)
    active = sorted(views_of(sections["active"]), key=sort_key(RUNNING_ORDER))
    queued = sorted(views_of(sections["queued"]), key=sort_key(RUN_ORDER))
    history = sorted(views_of(sections["history"]), key=_ended_last, reverse=True)
    return DashboardLists(active, queued, history)
