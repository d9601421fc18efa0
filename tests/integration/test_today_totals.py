"""Today's completed and failed totals of the live views come from the counters of finish times
per hour plus a count of the part of an hour before the first whole one: equal to a count of the
rows, whatever the day's start, on SQLite and PostgreSQL."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert, update

from tests.support.settings import MakeSettings
from worker_automation.models import Job, JobStatus
from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.resolvers.live_reads import read_totals

ENDED = ["CONCLUIDO", "FALHA", "CANCELADO"]


async def test_today_totals_equal_a_count(database_url: str, make_settings: MakeSettings) -> None:
    await migrate(database_url)
    db = Database(make_settings(database_url, None))
    rng = random.Random(23)
    base = datetime(2026, 3, 2, tzinfo=UTC)
    rows: list[dict[str, object]] = []
    for n in range(400):
        finished = base + timedelta(seconds=rng.randrange(3 * 86400))
        if n % 9 == 0:  # on an hour exactly
            finished = finished.replace(minute=0, second=0, microsecond=0)
        rows.append(
            {
                "automation_type": "demo.echo",
                "queue": "scan",
                "status": rng.choice(ENDED) if n % 6 else JobStatus.EXECUTANDO.value,
                "priority": 0,
                "retry_count": 0,
                "progress": 0,
                "created_at": finished - timedelta(minutes=5),
                "updated_at": finished,
                "data_fim": finished if n % 6 else None,
            }
        )
    try:
        async with db.session() as session:
            await session.execute(insert(Job), rows)
            # Finished again later (a retried job ending once more) moves it to another hour.
            await session.execute(
                update(Job).where(Job.id % 17 == 0).values(data_fim=base + timedelta(days=2, minutes=7))
            )
        async with db.session() as session:
            ended = [(r.status, r.data_fim) for r in (await session.execute(Job.__table__.select())).all()]

        # A local midnight at -03:00, an hour's start, a minute in, and before every row.
        for since in (
            base + timedelta(days=1, hours=3),
            base + timedelta(days=1, hours=5, minutes=1, seconds=30),
            base + timedelta(hours=17),
            base - timedelta(days=1),
        ):
            totals = await read_totals(db, since)
            for status, figure in (("CONCLUIDO", totals.completed_today), ("FALHA", totals.errors_today)):
                counted = sum(1 for s, at in ended if s == status and at is not None and at >= since)
                assert figure == counted, (since, status)
    finally:
        await db.close()
