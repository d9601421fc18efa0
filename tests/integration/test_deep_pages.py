"""Deep list pages found through the bucket counters are the pages plain ``OFFSET`` gives, for
every filter the counters cover, on PostgreSQL and SQLite."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import delete, insert, update

from tests.integration.job_rows import QUEUES, matching_ids, random_row
from tests.support.settings import MakeSettings
from worker_automation.models import BUCKET_IDS, Job, JobBucketCount
from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.resolvers import reads
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.reads import list_jobs

PER_PAGE = 25


async def _expected(db: Database, filters: JobFilter, offset: int) -> tuple[list[int], int]:
    """The page's ids by a plain ``OFFSET`` over the rows, and how many rows match."""
    ids = await matching_ids(db, filters)
    return ids[offset : offset + PER_PAGE], len(ids)


async def _pages_agree(db: Database, filters: JobFilter, offsets: list[int]) -> None:
    for offset in offsets:
        page = offset // PER_PAGE + 1
        found = await list_jobs(db, QUEUES, filters, page, PER_PAGE, documents=False)
        ids, total = await _expected(db, filters, (page - 1) * PER_PAGE)
        assert [view.id for view in found.items] == ids, (filters, page)
        assert found.total == total


FILTERS = [
    JobFilter(status="CONCLUIDO", queue="scan"),
    JobFilter(status="FALHA"),
    JobFilter(queue="certidao"),
    JobFilter(),
]


async def test_bucketed_pages_equal_offset_pages(
    database_url: str, make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    await migrate(database_url)
    db = Database(make_settings(database_url, None))
    rng = random.Random(3)
    # Every page is found through the counters, from the first one on.
    monkeypatch.setattr(reads, "BUCKETED_FROM", 0)
    try:
        # Ids with gaps, over several buckets, some of them empty, up to the largest 32-bit id.
        ids = [*sorted(rng.sample(range(1, 9 * BUCKET_IDS), 3000)), 20 * BUCKET_IDS + 5, 2**31 - 1]
        async with db.session() as session:
            await session.execute(insert(Job), [random_row(rng, job_id) for job_id in ids])
        for filters in FILTERS:
            _, total = await _expected(db, filters, 0)
            # The first pages, pages across every bucket boundary, the last page, past the end.
            offsets = sorted({0, PER_PAGE, *range(0, total + 2 * PER_PAGE, 7 * PER_PAGE), total - 1, total})
            await _pages_agree(db, filters, offsets)

        # After moves between statuses and queues and deletions, the pages still agree.
        async with db.session() as session:
            await session.execute(update(Job).where(Job.id.in_(ids[::3])).values(status="CONCLUIDO"))
            await session.execute(update(Job).where(Job.id.in_(ids[::5])).values(queue="scan"))
            await session.execute(delete(Job).where(Job.id.in_(ids[1::4])))
        for filters in FILTERS:
            _, total = await _expected(db, filters, 0)
            await _pages_agree(db, filters, sorted({0, total // 3, total // 2, total - 1, total + PER_PAGE}))
    finally:
        await db.close()


async def test_deep_pages_use_the_counters_and_shallow_ones_do_not(
    database_url: str, make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the service's own threshold: a page past it is found through the counters (a page
    built from counters that disagree with the rows would show it), one before it is not."""
    await migrate(database_url)
    db = Database(make_settings(database_url, None))
    rng = random.Random(4)
    monkeypatch.setattr(reads, "BUCKETED_FROM", 60)
    try:
        ids = list(range(1, 3 * BUCKET_IDS, 97))
        async with db.session() as session:
            rows = [random_row(rng, job_id) | {"queue": "scan"} for job_id in ids]
            await session.execute(insert(Job), rows)
        filters = JobFilter(queue="scan")
        await _pages_agree(db, filters, [0, 50, 75, 400])
        # Counters made wrong on purpose: only the pages found through them change.
        async with db.session() as session:
            await session.execute(update(JobBucketCount).where(JobBucketCount.bucket == 2).values(n=0))
        await _pages_agree(db, filters, [0, 50])
        with pytest.raises(AssertionError):
            await _pages_agree(db, filters, [75])
    finally:
        await db.close()
