"""The (queue, status) counters, and those by bucket of ids, by priority of queued jobs and by hour
of finish time, never drift from a full recount, on PostgreSQL and SQLite."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

from sqlalchemy import Executable, delete, func, insert, select, update

from tests.support.counts import (
    bucket_counters,
    bucket_recount,
    finished_counters,
    finished_recount,
    queued_counters,
    queued_recount,
    recount,
)
from tests.support.settings import MakeSettings
from worker_automation.models import BUCKET_IDS, Job, JobStatus, utcnow
from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.models.rollup import (
    COUNT_COLUMNS,
    DAY_SLOTS,
    DURATION_COLUMNS,
    SLOT_SECONDS,
    automation_rollups,
    automation_rollups_daily,
)
from worker_automation.resolvers.counts import counters

QUEUES = ["certidao", "scraping", "scan", "observer", "ui_automation"]
STATUSES = [s.value for s in JobStatus]


def _row(rng: random.Random, job_id: int | None = None) -> dict[str, object]:
    now = utcnow()
    return {
        **({"id": job_id} if job_id is not None else {}),
        "automation_type": "demo.echo",
        "queue": rng.choice(QUEUES),
        "status": rng.choice(STATUSES),
        "priority": rng.randrange(10),
        "retry_count": 0,
        "progress": 0,
        "created_at": now,
        "updated_at": now,
        # A third unfinished; the rest spread over two days of finish times, a few on the hour.
        "data_fim": rng.choice(
            [
                None,
                now - timedelta(seconds=rng.randrange(2 * 86400)),
                now.replace(minute=0, second=0, microsecond=0),
            ]
        ),
    }


async def _check(db: Database) -> dict[tuple[str, str], int]:
    async with db.session() as session:
        kept, scanned = await counters(session), await recount(session)
        by_bucket, rescanned = await bucket_counters(session), await bucket_recount(session)
        queued, requeued = await queued_counters(session), await queued_recount(session)
        finished, refinished = await finished_counters(session), await finished_recount(session)
    assert kept == scanned
    assert finished == refinished
    assert by_bucket == rescanned
    assert queued == requeued
    return kept


async def test_counters_follow_every_kind_of_write(database_url: str, make_settings: MakeSettings) -> None:
    await migrate(database_url)
    db = Database(make_settings(database_url, None))
    rng = random.Random(11)
    try:
        async with db.session() as session:
            # Ids spread over a dozen buckets, so that every write moves counts of several.
            ids = rng.sample(range(1, 12 * BUCKET_IDS), 2000)
            await session.execute(insert(Job), [_row(rng, job_id) for job_id in ids])
        totals = await _check(db)
        assert sum(totals.values()) == 2000
        async with db.session() as session:
            assert len({bucket for _, _, bucket in await bucket_counters(session)}) >= 10

        # Bulk updates of priority, status and queue, a no-op update, and progress-only updates.
        async with db.session() as session:
            await session.execute(update(Job).where(Job.id % 4 == 0).values(priority=Job.priority + 1))
            await session.execute(update(Job).where(Job.id % 6 == 0).values(queue="scan", status="AGENDADO"))
            await session.execute(update(Job).where(Job.status == "AGENDADO").values(status="CANCELADO"))
            await session.execute(update(Job).where(Job.id % 7 == 0).values(queue="scan"))
            await session.execute(update(Job).where(Job.id % 5 == 0).values(progress=50))
            await session.execute(update(Job).where(Job.id % 3 == 0).values(status=Job.status))
            # Finish times set, moved to another hour and cleared (a job sent back to its queue).
            await session.execute(update(Job).where(Job.id % 8 == 1).values(data_fim=utcnow()))
            await session.execute(
                update(Job)
                .where(Job.id % 9 == 2, Job.data_fim.is_not(None))
                .values(data_fim=utcnow() - timedelta(hours=5))
            )
            await session.execute(update(Job).where(Job.id % 10 == 3).values(data_fim=None))
        await _check(db)

        async with db.session() as session:
            await session.execute(delete(Job).where(Job.id.in_(ids[::4])))
        totals = await _check(db)
        assert sum(totals.values()) == 1500

        # A rolled-back change leaves the counters as they were.
        try:
            async with db.session() as session:
                await session.execute(update(Job).values(status="FALHA"))
                raise RuntimeError("abort")
        except RuntimeError:
            pass
        assert await _check(db) == totals
    finally:
        await db.close()


async def _check_rollups(db: Database) -> None:
    """Each quarter hour's and day's counts by outcome and runs measured, against the finished
    rows (valid while no finished row was deleted: retention leaves its counts)."""
    ended = {"CONCLUIDO": "completed", "FALHA": "failed", "CANCELADO": "cancelled"}
    quarters: dict[tuple[str, int, str], list[int]] = {}
    async with db.session() as session:
        jobs = (
            await session.execute(
                select(Job.automation_type, Job.queue, Job.status, Job.data_inicio, Job.data_fim).where(
                    Job.status.in_(ended), Job.data_fim.is_not(None)
                )
            )
        ).all()
        for automation, queue, status, started, finished in jobs:
            assert finished is not None
            slot = int(finished.timestamp()) // SLOT_SECONDS
            totals = quarters.setdefault((automation, slot, queue), [0] * 4)
            totals[COUNT_COLUMNS.index(ended[status])] += 1
            totals[3] += status != "CANCELADO" and started is not None
        days: dict[tuple[str, int, str], list[int]] = {}
        for (automation, slot, queue), totals in quarters.items():
            day = days.setdefault((automation, slot // DAY_SLOTS, queue), [0] * 4)
            day[:] = [a + b for a, b in zip(day, totals, strict=True)]
        for table, key, expected in (
            (automation_rollups, automation_rollups.c.slot, quarters),
            (automation_rollups_daily, automation_rollups_daily.c.day, days),
        ):
            measured = sum(table.c[name] for name in DURATION_COLUMNS)
            rows = await session.execute(
                select(
                    table.c.automation_type,
                    key,
                    table.c.queue,
                    *(func.sum(table.c[name]) for name in COUNT_COLUMNS),
                    func.sum(measured),
                ).group_by(table.c.automation_type, key, table.c.queue)
            )
            kept = {(a, k, q): [int(n) for n in sums] for a, k, q, *sums in rows if any(sums)}
            assert kept == expected, table.name


async def test_one_row_writes_of_a_jobs_life_keep_every_count(
    database_url: str, make_settings: MakeSettings
) -> None:
    """Statements of one row, as a job's life writes them: most change nothing some counter
    counts (an insert or a claim finishes nothing, which the rollups' trigger skips), and each
    counter stays exact."""
    await migrate(database_url)
    db = Database(make_settings(database_url, None))
    rng = random.Random(3)

    async def write(statement: Executable) -> None:
        async with db.session() as session:
            await session.execute(statement)

    try:
        queued = {**_row(rng), "status": "AGENDADO", "data_fim": None}
        for n in range(24):
            await write(insert(Job).values({**queued, "queue": QUEUES[n % 5], "priority": n % 3}))
        for job_id in range(1, 19):
            await write(update(Job).where(Job.id == job_id).values(status="EXECUTANDO", data_inicio=utcnow()))
        for job_id in range(1, 6):
            await write(update(Job).where(Job.id == job_id).values(progress=40))
        for job_id in range(1, 15):
            status = "FALHA" if job_id % 4 == 0 else "CONCLUIDO"
            await write(update(Job).where(Job.id == job_id).values(status=status, data_fim=utcnow()))
        # A failure sent back to its queue; queued jobs cancelled; one run ended late and moved.
        await write(update(Job).where(Job.id == 4).values(status="AGENDADO", data_inicio=None, data_fim=None))
        for job_id in (19, 20):
            await write(update(Job).where(Job.id == job_id).values(status="CANCELADO", data_fim=utcnow()))
        await write(update(Job).where(Job.id == 1).values(data_fim=utcnow() - timedelta(hours=30)))
        await write(update(Job).where(Job.id == 2).values(queue="scan"))
        # Jobs written already finished, and queued ones deleted.
        done = {**queued, "status": "CONCLUIDO", "data_inicio": utcnow() - timedelta(seconds=3)}
        await write(insert(Job).values({**done, "data_fim": utcnow()}))
        await write(insert(Job).values({**done, "status": "CANCELADO", "data_fim": utcnow()}))
        for job_id in (21, 22):
            await write(delete(Job).where(Job.id == job_id))
        totals = await _check(db)
        assert sum(totals.values()) == 24
        await _check_rollups(db)
    finally:
        await db.close()


async def test_counters_under_concurrent_transitions(
    pg_database_url: str, make_settings: MakeSettings
) -> None:
    """Many concurrent single-row transitions in opposite directions: exact, and no deadlock."""
    await migrate(pg_database_url)
    db = Database(make_settings(pg_database_url, None))
    rng = random.Random(5)
    try:
        async with db.session() as session:
            await session.execute(insert(Job), [_row(rng) for _ in range(400)])

        async def flip(job_id: int, seed: int) -> None:
            local = random.Random(seed)
            for _ in range(10):
                async with db.session() as session:
                    await session.execute(
                        update(Job)
                        .where(Job.id == job_id)
                        .values(
                            status=local.choice(STATUSES),
                            queue=local.choice(QUEUES),
                            priority=local.randrange(10),
                            data_fim=local.choice([None, utcnow() - timedelta(hours=local.randrange(3))]),
                        )
                    )

        await asyncio.gather(*(flip(i, i) for i in range(1, 401, 10)))
        totals = await _check(db)
        assert sum(totals.values()) == 400
    finally:
        await db.close()


async def test_bucket_counters_start_from_the_rows_already_there(
    database_url: str, make_settings: MakeSettings
) -> None:
    """Upgrading a database that already holds jobs counts them into their buckets; the triggers
    then keep the counts from there."""
    await migrate(database_url, "0007")
    db = Database(make_settings(database_url, None))
    rng = random.Random(8)
    try:
        ids = rng.sample(range(1, 6 * BUCKET_IDS), 500)
        async with db.session() as session:
            await session.execute(insert(Job), [_row(rng, job_id) for job_id in ids])
        await migrate(database_url)
        async with db.session() as session:
            assert len(await bucket_counters(session)) > 5
            await session.execute(update(Job).where(Job.id.in_(ids[::2])).values(status="FALHA"))
        await _check(db)
    finally:
        await db.close()
