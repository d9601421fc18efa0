"""One automation's rollups are read from its stretch of the primary key, in the plan PostgreSQL
keeps for the prepared statement too. That generic plan is made without the values: with the
automation and the range as separate conditions it may pick the slot's index and read every
automation's rows of the range (seen at a million jobs: 84 ms for 30 days, against 9 on the
primary key), so the range is written on the primary key's leading columns as well."""

from __future__ import annotations

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from tests.support.plans import prepared_plan
from worker_automation.models import utcnow
from worker_automation.models.migrate import migrate
from worker_automation.models.rollup import COUNT_COLUMNS, DAY_SLOTS, DURATION_COLUMNS, SLOT_SECONDS
from worker_automation.resolvers.health import day_slots
from worker_automation.resolvers.rollup_reads import Scope, bucket_statement

pytestmark = pytest.mark.services

AUTOMATIONS = 30
DAYS = 100
SUMMED = (*COUNT_COLUMNS, *DURATION_COLUMNS)


async def _filled(database_url: str) -> asyncpg.Connection:
    """Rollups shaped like a month of a million jobs: ``AUTOMATIONS`` automations on five queues,
    about a fifth of the (automation, queue) pairs in each quarter hour of the last ``DAYS`` days,
    and their days."""
    await migrate(database_url)
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    columns = ", ".join(SUMMED)
    counts = ", ".join(["1"] * len(SUMMED))
    now_slot = int(utcnow().timestamp()) // SLOT_SECONDS
    pairs = (
        f"generate_series(1, {AUTOMATIONS}) AS a, (VALUES ('scan'), ('certidao'), ('scraping'),"
        " ('observer'), ('ui_automation')) AS q(name)"
    )
    await conn.execute(
        f"INSERT INTO automation_rollups (automation_type, slot, queue, {columns}) "
        f"SELECT 'demo.a' || a, s, q.name, {counts} FROM {pairs}, "
        f"generate_series({now_slot - DAYS * DAY_SLOTS}, {now_slot}) AS s "
        "WHERE (a * 7 + length(q.name) * 13 + s) % 5 = 0"
    )
    await conn.execute(
        f"INSERT INTO automation_rollups_daily (automation_type, day, queue, {columns}) "
        f"SELECT 'demo.a' || a, d, q.name, {counts} FROM {pairs}, "
        f"generate_series({now_slot // DAY_SLOTS - DAYS}, {now_slot // DAY_SLOTS}) AS d"
    )
    await conn.execute("ANALYZE")
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    return conn


@pytest.mark.parametrize("days", [30, 90])
async def test_one_automations_days_are_read_from_the_primary_key(pg_database_url: str, days: int) -> None:
    conn = await _filled(pg_database_url)
    try:
        tz = ZoneInfo("America/Sao_Paulo")
        first = utcnow().astimezone(tz).date() - timedelta(days=days - 1)
        bounds = day_slots(first, days, tz)
        width = (bounds[1] - bounds[0]) * SLOT_SECONDS
        statement = bucket_statement(
            SUMMED, bounds[0], bounds[-1], width, -bounds[0] * SLOT_SECONDS, Scope("demo.a5")
        )
        plan = await prepared_plan(conn, pg_database_url, statement, name="rollups")
        assert "Seq Scan" not in plan, plan
        # "Index Scan using <index> on ...", "Index Only Scan using ...", "Bitmap Index Scan on <index>"
        scans = re.findall(r"Index (?:Only )?Scan (?:Backward )?using (\w+)|Bitmap Index Scan on (\w+)", plan)
        used = {a or b for a, b in scans}
        assert used and used <= {"pk_automation_rollups", "pk_automation_rollups_daily"}, plan
        if days > 45:  # a long range: the days, and the quarter hours moved across the zone's midnight
            assert used == {"pk_automation_rollups", "pk_automation_rollups_daily"}, plan
    finally:
        await conn.close()
