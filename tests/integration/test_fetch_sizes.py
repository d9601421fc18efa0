"""List statements fetch a number of rows written into their text, rounded up to a short ladder of
sizes, and cut the page to its size after: every page size and cursor slice still gives exactly
its jobs, on PostgreSQL and SQLite; and on PostgreSQL the statements keep a generic plan instead
of being planned anew on every page."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from sqlalchemy import insert

from tests.integration.job_rows import QUEUES, matching_ids, random_row
from tests.support.plans import prepared_plan
from tests.support.reads import list_jobs_after
from tests.support.settings import MakeSettings
from worker_automation.domain.ranges import MAX_PER_PAGE
from worker_automation.models import Job
from worker_automation.models.database import Database, driver_statement, make_engine
from worker_automation.models.migrate import migrate
from worker_automation.resolvers import reads
from worker_automation.resolvers.counts import finished_parameters
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.job_order import Direction, JobOrder, OrderField
from worker_automation.resolvers.reads import (
    FETCH_SIZES,
    _list_statements,
    fetch_size,
    list_jobs,
)

JOBS = 260
SIZES = [1, 2, 3, 7, 20, 21, 26, 33, 51, 99, 100]


def test_every_size_has_a_fetch_that_holds_it_and_no_more_than_twice_it_plus_one() -> None:
    for rows in range(1, MAX_PER_PAGE + 2):
        fetch = fetch_size(rows)
        assert fetch in FETCH_SIZES
        assert rows <= fetch <= 2 * rows + 1
    # The common sizes and their cursor slices (one row more) are fetched exactly.
    for rows in (10, 20, 25, 50, 100):
        assert fetch_size(rows) == rows
        assert fetch_size(rows + 1) == rows + 1


def test_the_number_of_rows_is_written_into_the_statement() -> None:
    rows_q, _ = _list_statements(("status",), with_text=False, total="counters", fetch=21)
    text = str(rows_q.compile())
    assert "LIMIT 21" in text
    assert "page_size" not in text


async def _loaded(database_url: str, make_settings: MakeSettings) -> Database:
    await migrate(database_url)
    db = Database(make_settings(database_url, None))
    rng = random.Random(11)
    rows = [random_row(rng, job_id) for job_id in sorted(rng.sample(range(1, 5 * JOBS), JOBS))]
    async with db.session() as session:
        await session.execute(insert(Job), rows)
    return db


FILTERS = [JobFilter(), JobFilter(status="CONCLUIDO", queue="scan")]


@pytest.mark.parametrize("bucketed", [False, True], ids=["offset", "bucketed"])
async def test_pages_of_every_size_hold_exactly_their_jobs(
    database_url: str, make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch, bucketed: bool
) -> None:
    if bucketed:
        monkeypatch.setattr(reads, "BUCKETED_FROM", 0)
    db = await _loaded(database_url, make_settings)
    try:
        for filters in FILTERS:
            ids = await matching_ids(db, filters)
            for per_page in SIZES:
                pages = -(-len(ids) // per_page)
                for page in sorted({1, 2, pages - 1, pages, pages + 1} - {0}):
                    found = await list_jobs(db, QUEUES, filters, page, per_page, documents=False)
                    offset = (page - 1) * per_page
                    assert [view.id for view in found.items] == ids[offset : offset + per_page], (
                        filters,
                        per_page,
                        page,
                    )
                    assert found.total == len(ids)
                    assert found.pages == pages
    finally:
        await db.close()


async def test_cursor_slices_of_every_size_walk_every_job_once(
    database_url: str, make_settings: MakeSettings
) -> None:
    db = await _loaded(database_url, make_settings)
    try:
        for filters in FILTERS:
            ids = await matching_ids(db, filters)
            for first in SIZES:
                walked: list[int] = []
                after: int | None = None
                while True:
                    part = await list_jobs_after(db, QUEUES, filters, first, after, documents=False)
                    assert len(part.items) <= first
                    assert part.total == len(ids)
                    walked += [view.id for view in part.items]
                    if not part.has_next:
                        break
                    assert len(part.items) == first
                    after = part.items[-1].id
                assert walked == ids, (filters, first)
    finally:
        await db.close()


async def _filled(pg_database_url: str, row: str) -> asyncpg.Connection:
    """A connection to the migrated database after 60,000 jobs were inserted, each the ``row``
    (a SELECT over ``n`` of id, automation, queue, status, priority, retries, progress, created,
    updated and finished), and the tables analysed."""
    await migrate(pg_database_url)
    conn = await asyncpg.connect(pg_database_url.replace("postgresql+asyncpg://", "postgresql://"))
    await conn.execute(
        "INSERT INTO workers (id, automation_type, queue, status, priority, retry_count, progress,"
        f" created_at, updated_at, data_fim) {row} FROM generate_series(1, 60000) AS n"
    )
    await conn.execute("ANALYZE")
    return conn


async def test_page_statements_keep_a_generic_plan_on_postgresql(pg_database_url: str) -> None:
    """PostgreSQL plans a prepared statement anew for its first five runs, then keeps a generic
    plan only if that costs no more than the custom ones. With the row count a parameter, the
    generic plan assumed a tenth of the matching rows, which over a large table made it far
    costlier than the custom plans: every list page paid the planning again."""
    # Enough rows for a tenth of one status and queue to be far more than a page.
    conn = await _filled(
        pg_database_url,
        "SELECT n, 'demo.echo', (ARRAY['certidao','scan'])[1 + n % 2],"
        " (ARRAY['AGENDADO','CONCLUIDO','FALHA'])[1 + n % 3], 0, 0, 0, now(), now(), NULL",
    )
    try:
        engine = make_engine(pg_database_url)
        seeks: list[reads.Seek] = ["bucketed", "after", "first"]
        for seek in seeks:
            statement, _ = _list_statements(
                ("status", "queue"), with_text=False, total="counters", seek=seek, documents=False, fetch=21
            )
            prepared = driver_statement(engine, statement)
            assert prepared is not None
            for run in range(10):
                values = {
                    "filter_status": "CONCLUIDO",
                    "filter_queue": "scan",
                    "page_offset": 2000 + 20 * run,
                    "after_id": 50000 - 37 * run,
                }
                await conn.fetch(prepared.sql, *[values.get(n, prepared.defaults[n]) for n in prepared.names])
        await engine.dispose()
        plans = await conn.fetch(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%FROM workers%LIMIT 21%'"
            " AND statement NOT LIKE '%pg_prepared_statements%'"
        )
        assert len(plans) == len(seeks)
        for plan in plans:
            assert plan["generic_plans"] >= 5, (plan["custom_plans"], plan["statement"][:200])
    finally:
        await conn.close()


# Finished jobs, one every 40 seconds back from now.
FINISHED_ROWS = (
    "SELECT n, 'demo.echo', 'scan', 'CONCLUIDO', 0, 0, 0, now(), now(), now() - n * interval '40 seconds'"
)


async def test_a_finish_time_range_keeps_its_index_in_the_generic_plan(pg_database_url: str) -> None:
    """Sorted by finish time (as a range of finish times is by default), the page is a stretch of
    the sort key's index between the bounds in the plan PostgreSQL keeps for the prepared
    statement too, which is made without the bounds' values: no second index combined with it,
    no sort of every row in the range."""
    conn = await _filled(pg_database_url, FINISHED_ROWS)
    try:
        start, end = datetime.now(UTC) - timedelta(days=14), datetime.now(UTC) - timedelta(days=7)
        filters = JobFilter(finished_from=start, finished_to=end)
        statement, _ = _list_statements(
            (),
            with_text=False,
            total=filters.total_source,
            documents=False,
            fetch=20,
            ranges=tuple(filters.ranges()),
            order=filters.implied_order(),
        )
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        values = {
            "range_finished_from": start,
            "range_finished_to": end,
            "page_offset": 100,
            **finished_parameters(start, end),
        }
        plan = await prepared_plan(conn, pg_database_url, statement, values)
        # The page's ids: the first scan under the LIMIT is the key's index, read in order.
        under_limit = plan[plan.index("Limit") :]
        first_scan = next(line for line in under_limit.splitlines() if "Scan" in line)
        assert "Scan Backward using ix_workers_finished_desc" in first_scan, plan
    finally:
        await conn.close()


@pytest.mark.parametrize("direction", list(Direction))
@pytest.mark.parametrize("field", [OrderField.FINISHED_AT, OrderField.DURATION])
async def test_a_sorted_page_skips_its_offset_in_the_index_alone(
    pg_database_url: str, field: OrderField, direction: Direction
) -> None:
    """Sorted by finish time or duration, the entries a page skips are read from its order's
    index without visiting their rows: the index carries the columns its key is computed from."""
    conn = await _filled(pg_database_url, FINISHED_ROWS)
    try:
        await conn.execute("UPDATE workers SET data_inicio = data_fim - (id % 97) * interval '1 second'")
        await conn.execute("VACUUM (ANALYZE) workers")
        order = JobOrder(field, direction)
        statement, _ = _list_statements((), with_text=False, total="counters", documents=False, order=order)
        plan = await prepared_plan(
            conn, pg_database_url, statement, {"page_offset": 5000}, "(ANALYZE, COSTS OFF)"
        )
        named = "finished" if field is OrderField.FINISHED_AT else "duration"
        index = f"ix_workers_{named}_{direction.value.lower()}"
        lines = plan.splitlines()
        scan = next(i for i, line in enumerate(lines) if f"using {index}" in line)
        assert "Index Only Scan" in lines[scan], plan
        assert "rows=5020" in lines[scan], plan
        assert "Heap Fetches: 0" in "\n".join(lines[scan : scan + 3]), plan
    finally:
        await conn.close()
