"""automationHealth from the daily rollups, on PostgreSQL and SQLite: counts and percentiles per
day of WA_TIMEZONE, kept after retention deletes the jobs, moved when a finished job changes."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

from sqlalchemy import insert, select, update

from tests.integration.operator_support import any_services
from tests.unit.graphql_support import make_api
from worker_automation.models import Job, utcnow
from worker_automation.models.database import make_engine
from worker_automation.models.migrate import migrate
from worker_automation.models.rollup import DURATION_BOUNDS_MS, automation_rollups
from worker_automation.resolvers.health import _read_days, day_slots
from worker_automation.resolvers.history import percentile
from worker_automation.resolvers.retention import delete_finished
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]

HEALTH = (
    "query($a: String!, $d: Int) { automationHealth(automationType: $a, days: $d) "
    "{ day completed failed cancelled successRate p50Ms p95Ms } }"
)


def _ended(services: Services, days_ago: int) -> datetime:
    """An instant on the day ``days_ago`` days before today in the service's zone, not in the future."""
    tz = services.settings.tz
    today = utcnow().astimezone(tz).date()
    noon = datetime.combine(today - timedelta(days=days_ago), time(12), tzinfo=tz)
    start = datetime.combine(today - timedelta(days=days_ago), time(0, 1), tzinfo=tz)
    return min(noon, max(start, utcnow() - timedelta(seconds=5)))


def _row(end: datetime, status: str, run_ms: float, **extra: Any) -> dict[str, Any]:
    return {
        "automation_type": "demo.echo",
        "queue": "scan",
        "status": status,
        "priority": 0,
        "retry_count": 0,
        "progress": 0,
        "data_inicio": end - timedelta(milliseconds=run_ms),
        "data_fim": end,
        "created_at": end - timedelta(minutes=1),
        "updated_at": end,
        **extra,
    }


def _bucket_width(ms: float) -> float:
    """The width of the run-time bucket holding ``ms``."""
    low = 0
    for bound in DURATION_BOUNDS_MS:
        if ms < bound:
            return bound - low
        low = bound
    return float("inf")


async def test_days_counts_and_percentiles_survive_retention(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    ten_days_ago = _ended(services, 10)
    runs = [50.0 * (i + 1) for i in range(40)]  # 50 ms .. 2000 ms
    rows = [_row(ten_days_ago, "CONCLUIDO", ms) for ms in runs[:36]]
    rows += [_row(ten_days_ago, "FALHA", ms) for ms in runs[36:]]
    rows += [_row(ten_days_ago, "CANCELADO", 1)] * 3
    rows += [_row(_ended(services, 0), "CONCLUIDO", 700)] * 2
    rows += [_row(_ended(services, 0), "CONCLUIDO", 5, automation_type="demo.sleep")]  # another one
    rows += [_row(_ended(services, 45), "FALHA", 90)]  # outside 30 days
    async with services.db.session() as session:
        await session.execute(insert(Job), rows)
        # A job still queued is in no day.
        await session.execute(insert(Job), [{**_row(_ended(services, 0), "AGENDADO", 0), "data_fim": None}])

    days = (await api.ok(HEALTH, {"a": "demo.echo"}))["automationHealth"]
    tz = services.settings.tz
    today = utcnow().astimezone(tz).date()
    assert [d["day"] for d in days] == [(today - timedelta(days=29 - i)).isoformat() for i in range(30)]
    old = days[-11]
    assert (old["completed"], old["failed"], old["cancelled"]) == (36, 4, 3)
    assert old["successRate"] == 0.9
    for name, fraction in (("p50Ms", 0.5), ("p95Ms", 0.95)):
        exact = percentile(sorted(runs), fraction)
        assert abs(old[name] - exact) <= _bucket_width(exact), (name, old[name], exact)
    assert (days[-1]["completed"], days[-1]["failed"]) == (2, 0)
    assert 500 <= days[-1]["p50Ms"] <= 750
    assert sum(d["completed"] + d["failed"] + d["cancelled"] for d in days) == 45
    assert days[0] == {
        "day": days[0]["day"], "completed": 0, "failed": 0, "cancelled": 0,
        "successRate": None, "p50Ms": None, "p95Ms": None,
    }  # fmt: skip
    longer = (await api.ok(HEALTH, {"a": "demo.echo", "d": 60}))["automationHealth"]
    assert len(longer) == 60 and longer[-46]["failed"] == 1

    # Retention deletes the old jobs: their day keeps its counts.
    assert await delete_finished(services.db, 5) == 44
    after = (await api.ok(HEALTH, {"a": "demo.echo", "d": 60}))["automationHealth"]
    assert after == longer


async def test_a_changed_outcome_moves_in_the_rollup(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    end = _ended(services, 0)
    async with services.db.session() as session:
        await session.execute(insert(Job), [_row(end, "FALHA", 300)])
    first = (await api.ok(HEALTH, {"a": "demo.echo", "d": 1}))["automationHealth"]
    assert (first[0]["completed"], first[0]["failed"]) == (0, 1)
    # A late report turns the failure into a completion; a retry takes it out of its day.
    async with services.db.session() as session:
        await session.execute(update(Job).values(status="CONCLUIDO", progress=100))
    late = (await api.ok(HEALTH, {"a": "demo.echo", "d": 1}))["automationHealth"]
    assert (late[0]["completed"], late[0]["failed"], late[0]["successRate"]) == (1, 0, 1.0)
    async with services.db.session() as session:
        await session.execute(update(Job).values(status="AGENDADO", data_inicio=None, data_fim=None))
    retried = (await api.ok(HEALTH, {"a": "demo.echo", "d": 1}))["automationHealth"]
    assert (retried[0]["completed"], retried[0]["failed"], retried[0]["p50Ms"]) == (0, 0, None)


async def test_bad_arguments_and_scopes(any_services: Services) -> None:
    api = await make_api(any_services)
    for variables, name in (
        ({"a": "demo.echo", "d": 0}, "days"),
        ({"a": "demo.echo", "d": 401}, "days"),
        ({"a": "nope", "d": 3}, "automation_type"),
    ):
        error = await api.fails(HEALTH, variables)
        assert error.extensions == {"code": "BAD_USER_INPUT", "field": name}, error.extensions
    assert (
        len((await api.ok(HEALTH, {"a": "demo.echo", "d": 400}, caller="reader"))["automationHealth"]) == 400
    )


async def test_the_migration_counts_jobs_that_ended_before_it(database_url: str) -> None:
    """Upgrading a database that already holds finished jobs fills the rollups from them."""
    engine = make_engine(database_url)
    try:
        await migrate(database_url, "0009")
        end = utcnow() - timedelta(minutes=1)
        async with engine.begin() as conn:
            await conn.execute(insert(Job), [_row(end, "CONCLUIDO", 120), _row(end, "CANCELADO", 1)])
        await migrate(database_url)
        r = automation_rollups.c
        async with engine.connect() as conn:
            found = (await conn.execute(select(r.completed, r.failed, r.cancelled, r.d05))).all()
        assert [tuple(row) for row in found] == [(1, 0, 1, 1)]  # 120 ms: the 100-150 ms bucket
    finally:
        await engine.dispose()


async def test_throughput_by_day_over_90_days_counts_pruned_jobs(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    async with services.db.session() as session:
        await session.execute(insert(Job), [_row(_ended(services, 60), "CONCLUIDO", 10)] * 3)
        await session.execute(insert(Job), [_row(_ended(services, 0), "FALHA", 10)])
        # Ended two minutes ago: inside a window that starts one minute before it, whatever the
        # quarter hour (the part before the first whole quarter hour is read from the jobs).
        await session.execute(insert(Job), [_row(utcnow() - timedelta(minutes=2), "CANCELADO", 10)])
    assert await delete_finished(services.db, 30) == 3
    query = (
        "query($s: DateTime, $m: Int!) { throughput(since: $s, bucketMinutes: $m, "
        'automationType: "demo.echo") { bucketStart completed failed cancelled } }'
    )
    since = (utcnow() - timedelta(days=90)).isoformat()
    days = (await api.ok(query, {"s": since, "m": 1440}))["throughput"]
    assert len(days) in (90, 91) and all(d["bucketStart"][11:19] == "00:00:00" for d in days)
    assert sum(d["completed"] for d in days) == 3 and days[-1]["failed"] == 1
    tz = services.settings.tz
    day_60 = (utcnow().astimezone(tz).date() - timedelta(days=60)).isoformat()
    assert [d["completed"] for d in days if d["bucketStart"].startswith(day_60)] == [3]
    recent = (utcnow() - timedelta(minutes=3)).isoformat()
    for minutes in (1, 15):
        buckets = (await api.ok(query, {"s": recent, "m": minutes}))["throughput"]
        assert sum(b["cancelled"] for b in buckets) == 1, minutes


async def test_days_of_unequal_length_are_read_by_ranges(any_services: Services) -> None:
    """A window with a change of offset (days of 23 or 25 hours) joins slots to day ranges: both
    ways of reading give the same days."""
    services = any_services
    async with services.db.session() as session:
        await session.execute(insert(Job), [_row(_ended(services, n), "CONCLUIDO", 40 * n) for n in range(6)])
    tz = services.settings.tz
    first = utcnow().astimezone(tz).date() - timedelta(days=5)
    bounds = day_slots(first, 6, tz)
    by_division = await _read_days(services, "demo.echo", bounds, by_ranges=False)
    assert sorted(by_division) == list(range(6))
    assert await _read_days(services, "demo.echo", bounds, by_ranges=True) == by_division
