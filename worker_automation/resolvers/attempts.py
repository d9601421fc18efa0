"""A job's runs: the attempts table read for many jobs at once (one query per page of jobs)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from sqlalchemy import bindparam, select

from worker_automation.domain.shapes import Doc
from worker_automation.models import Attempt, Machine
from worker_automation.models.database import Database

_BY_JOBS = (
    select(
        Attempt.worker_id,
        Attempt.number,
        Attempt.machine_id,
        Machine.name,
        Attempt.task_id,
        Attempt.started_at,
        Attempt.ended_at,
        Attempt.outcome,
        Attempt.error,
    )
    .outerjoin(Machine, Machine.id == Attempt.machine_id)
    .where(Attempt.worker_id.in_(bindparam("ids", expanding=True)))
    .order_by(Attempt.worker_id, Attempt.number)
)


@dataclass(frozen=True)
class AttemptView:
    """One run of a job; ``machine_name`` is None when the machine was removed since."""

    worker_id: int
    number: Annotated[int, Doc("1 for the first run, then one more per claim.")]
    machine_id: Annotated[int | None, Doc("Machine that claimed it.")]
    machine_name: Annotated[str | None, Doc("That machine's name (null if removed).")]
    task_id: Annotated[str | None, Doc("The task id the run was claimed under.")]
    started_at: Annotated[datetime, Doc("When it was claimed.")]
    ended_at: Annotated[datetime | None, Doc("When the run ended; null while running.")]
    outcome: Annotated[
        str | None,
        Doc("CONCLUIDO, FALHA, CANCELADO, or REENFILEIRADO (moved or queued again); null while running."),
    ]
    error: Annotated[str | None, Doc("The error or cancellation message of the run.")]


async def attempts_by_job(db: Database, ids: list[int]) -> dict[int, list[AttemptView]]:
    """Every attempt of each job of ``ids``, oldest first (for DataLoaders)."""
    found: dict[int, list[AttemptView]] = defaultdict(list)
    if not ids:
        return found
    async with db.reader() as session:
        for row in await session.execute(_BY_JOBS, {"ids": sorted(set(ids))}):
            found[row[0]].append(AttemptView(*row))
    return found
