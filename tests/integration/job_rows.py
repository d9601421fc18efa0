"""Job rows written straight into the table, for tests of reads over many rows: two queues,
three states, drawn at random."""

from __future__ import annotations

import random

from sqlalchemy import select

from worker_automation.models import Job, utcnow
from worker_automation.models.database import Database
from worker_automation.resolvers.job_filter import JobFilter

QUEUES = {"certidao": 0, "scan": 0}
STATUSES = ["AGENDADO", "CONCLUIDO", "FALHA"]


def random_row(rng: random.Random, job_id: int) -> dict[str, object]:
    """A row of the ``workers`` table with id ``job_id``, on a random queue in a random state."""
    now = utcnow()
    return {
        "id": job_id,
        "automation_type": "demo.echo",
        "queue": rng.choice(list(QUEUES)),
        "status": rng.choice(STATUSES),
        "priority": 0,
        "retry_count": 0,
        "progress": 0,
        "created_at": now,
        "updated_at": now,
    }


async def matching_ids(db: Database, filters: JobFilter) -> list[int]:
    """The ids of every job ``filters`` matches, newest first, by a plain query over the rows."""
    conds = [getattr(Job, name) == value for name, value in filters.values(QUEUES).items()]
    async with db.session() as session:
        return list((await session.scalars(select(Job.id).where(*conds).order_by(Job.id.desc()))).all())
