"""Loading and re-reading job rows inside a resolver's transaction."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from sqlalchemy import ColumnElement, bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from worker_automation.domain.errors import Conflict, NotFound
from worker_automation.models import Cliente, Job, JobStatus
from worker_automation.models.database import Executor, ReturnedRow
from worker_automation.resolvers.job_views import CLIENT_NAME, ROW_FIELDS, JobView, view_of, view_of_columns
from worker_automation.resolvers.reads import MSG_JOB_NOT_FOUND


def _client_name() -> ColumnElement[Any]:
    return (
        select(Cliente.razao_social).where(Cliente.id == Job.cliente_id).scalar_subquery().label(CLIENT_NAME)
    )


# What an UPDATE or INSERT returns to build the changed row's view without reading it again:
# every column plus the client's name (a subquery, so no second round trip for it).
VIEW_RETURNING: tuple[ColumnElement[Any], ...] = (*Job.__table__.columns, _client_name())


# Where each of the view's columns stands in such a row.
_returned_columns = itemgetter(*(list(Job.__table__.columns.keys()).index(name) for name in ROW_FIELDS))


def returned_view(row: ReturnedRow) -> JobView:
    """The view of a row that starts with every column of the job's table and ends with its
    client's name (:data:`VIEW_RETURNING`, a creation's RETURNING), by SQLAlchemy or the driver.
    Read by position: the driver's rows look names up one call at a time."""
    return view_of_columns(_returned_columns(row), row[len(row) - 1])


# SQLite has no row locks, and its driver begins a transaction at the first write, not the first
# read: two actions on one job (two retries sent at once) would both read it still retryable.
# A write that changes nothing (and fires no trigger: they watch other columns) takes SQLite's
# write lock first, for the rest of the transaction; other writers wait for it (the busy timeout)
# and then read what it left.
_TAKE_WRITE_LOCK = text("UPDATE workers SET id = id WHERE id = :job_id")


async def lock_job(session: AsyncSession, job_id: int) -> Job:
    """The row, locked for the rest of the transaction (on SQLite, the whole database is)."""
    if session.get_bind().dialect.name == "sqlite":
        await session.execute(_TAKE_WRITE_LOCK, {"job_id": job_id})
    row = await session.scalar(select(Job).where(Job.id == job_id).with_for_update())
    if row is None:
        raise NotFound(MSG_JOB_NOT_FOUND, worker_id=job_id)
    return row


def require_status(row: Job, allowed: set[JobStatus], action: str) -> None:
    """Conflict (409) with the current status when ``action`` is illegal from it."""
    if JobStatus(row.status) not in allowed:
        names = ", ".join(sorted(s.value for s in allowed))
        raise Conflict(
            f"Nao e possivel {action} um worker com status {row.status} (permitido: {names}).",
            status=row.status,
        )


_CLIENT_NAME = select(Cliente.razao_social).where(Cliente.id == bindparam("cliente_id"))


async def client_name_of(session: Executor, cliente_id: int | None) -> str | None:
    """The name shown for ``cliente_id`` (None without a client, or for one that does not exist)."""
    if cliente_id is None:
        return None
    name: str | None = await session.scalar(_CLIENT_NAME, {"cliente_id": cliente_id})
    return name


async def view_in(session: AsyncSession, row: Job) -> JobView:
    """The enriched view of a row already loaded in ``session``."""
    return view_of(row, await client_name_of(session, row.cliente_id))
