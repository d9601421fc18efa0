"""Reading the audit trail: who did what, newest first, filtered and paginated."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from sqlalchemy import ColumnElement, and_, cast, exists, func, or_, select
from sqlalchemy.dialects.postgresql import JSONB

from worker_automation.domain.errors import BadInput
from worker_automation.domain.limits import INT32_MAX
from worker_automation.domain.shapes import Doc
from worker_automation.models import AuditEntry
from worker_automation.models.database import Database
from worker_automation.resolvers.pagination import Page, PageRequest

# A job's target; entries acting on many jobs at once name them in their detail instead.
_JOB_TARGET = re.compile(r"worker:([1-9][0-9]{0,9})")


@dataclass(frozen=True)
class AuditFilter:
    """``actor``: part of the actor's label (any case); ``action`` and ``target``: exact (a job's
    target, ``worker:N``, also finds the bulk actions and batch dispatches that included job N);
    ``since``: inclusive."""

    actor: str | None = None
    action: str | None = None
    since: datetime | None = None
    target: str | None = None


@dataclass(frozen=True)
class AuditView:
    """One entry of the audit trail."""

    id: Annotated[int, Doc("Internal id (rising).")]
    at: Annotated[datetime, Doc("When it was recorded.")]
    actor: Annotated[str, Doc("Who acted (key, machine or cli).")]
    perfil: Annotated[str | None, Doc("The actor's perfil, if known.")]
    action: Annotated[str, Doc("What was done (cancel, retry_workers, pause_queue, ...).")]
    target: Annotated[str | None, Doc("What it was done to (worker:12, queue:scan, ...).")]
    result: Annotated[str, Doc("ok, or the error's code.")]
    detail: Annotated[dict[str, Any] | None, Doc("Parameters and figures of the action.")]


def _names_job(job_id: int, dialect: str) -> ColumnElement[bool]:
    """The entry's ``detail`` lists ``job_id`` among the jobs it acted on (``worker_ids``: bulk
    cancels and retries, batch dispatches), which have no single target."""
    if dialect == "postgresql":
        return cast(AuditEntry.detail, JSONB).contains({"worker_ids": [job_id]})
    listed = func.json_each(AuditEntry.detail, "$.worker_ids").table_valued("value")
    return exists().select_from(listed).where(listed.c.value == job_id)


def _conditions(filters: AuditFilter, dialect: str) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if filters.actor:
        conds.append(func.lower(AuditEntry.actor).contains(filters.actor.lower(), autoescape=True))
    if filters.action:
        conds.append(AuditEntry.action == filters.action)
    if filters.target:
        job = _JOB_TARGET.fullmatch(filters.target)
        if job is not None and int(job.group(1)) <= INT32_MAX:
            conds.append(
                or_(
                    AuditEntry.target == filters.target,
                    and_(AuditEntry.target.is_(None), _names_job(int(job.group(1)), dialect)),
                )
            )
        else:
            conds.append(AuditEntry.target == filters.target)
    if filters.since is not None:
        if filters.since.tzinfo is None:
            raise BadInput("since", "since precisa de fuso horario (ex.: 2026-12-01T08:00:00-03:00)")
        conds.append(AuditEntry.at >= filters.since)
    return conds


async def audit_page(
    db: Database, filters: AuditFilter, page: int | None = None, per_page: int | None = None
) -> Page[AuditView]:
    """Entries matching ``filters``, newest first."""
    request = PageRequest.of(page, per_page, default_per_page=20)
    conds = _conditions(filters, db.dialect)
    async with db.reader() as session:
        total = int(await session.scalar(select(func.count()).select_from(AuditEntry).where(*conds)) or 0)
        rows = await session.scalars(
            select(AuditEntry)
            .where(*conds)
            .order_by(AuditEntry.id.desc())
            .offset(request.offset)
            .limit(request.per_page)
        )
        items = [
            AuditView(r.id, r.at, r.actor, r.perfil, r.action, r.target, r.result, r.detail) for r in rows
        ]
    return Page(items, total, request.page, request.per_page)
