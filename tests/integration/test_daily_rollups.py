"""The daily rollups on PostgreSQL and SQLite: kept by the triggers that keep the quarter hours,
left by retention, and read for buckets of whole days of any zone with the same counts as the
jobs themselves give."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select, update

from tests.integration.operator_support import any_services
from worker_automation.models import Job, utcnow
from worker_automation.models.rollup import (
    COUNT_COLUMNS,
    DAY_SLOTS,
    DURATION_COLUMNS,
    SLOT_SECONDS,
    automation_rollups,
    automation_rollups_daily,
)
from worker_automation.resolvers.retention import delete_finished
from worker_automation.resolvers.rollup_reads import LONG_RANGE_DAYS, Scope, bucket_statement, bucket_sums
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]

SUMMED = (*COUNT_COLUMNS, *DURATION_COLUMNS)
STATUSES = ("CONCLUIDO", "FALHA", "CANCELADO")


def _row(end: datetime, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "automation_type": "demo.echo",
        "queue": "scan",
        "status": status,
        "priority": 0,
        "retry_count": 0,
        "progress": 0,
        "data_inicio": end - timedelta(milliseconds=250),
        "data_fim": end,
        "created_at": end - timedelta(minutes=1),
        "updated_at": end,
        **extra,
    }


def _ends() -> list[datetime]:
    """Ends spread over 70 days at every hour of the UTC day and on quarter-hour edges, so every
    zone's midnight falls between some of them."""
    now = utcnow().replace(microsecond=0)
    ends = [now - timedelta(days=n % 70, hours=(n * 7) % 24, minutes=(n * 15) % 60) for n in range(280)]
    return [end for end in ends if end < now]


async def _rollup_days(
    services: Services,
) -> tuple[dict[tuple[Any, ...], list[int]], dict[tuple[Any, ...], list[int]]]:
    """The daily rollups, and the quarter hours summed per UTC day, by (automation, day, queue)."""
    q, d = automation_rollups.c, automation_rollups_daily.c
    day = (q.slot // DAY_SLOTS).label("day")
    async with services.db.reader() as session:
        daily = (
            await session.execute(select(d.automation_type, d.day, d.queue, *(d[c] for c in SUMMED)))
        ).all()
        summed = (
            await session.execute(
                select(q.automation_type, day, q.queue, *(func.sum(q[c]) for c in SUMMED)).group_by(
                    q.automation_type, day, q.queue
                )
            )
        ).all()

    def keyed(rows: Any) -> dict[tuple[Any, ...], list[int]]:
        return {tuple(r[:3]): [int(n) for n in r[3:]] for r in rows if any(int(n) for n in r[3:])}

    return keyed(daily), keyed(summed)


async def test_days_are_kept_by_writes_and_left_by_retention(any_services: Services) -> None:
    services = any_services
    ends = _ends()
    async with services.db.session() as session:
        await session.execute(insert(Job), [_row(end, STATUSES[i % 3]) for i, end in enumerate(ends)])
        await session.execute(insert(Job), [_row(ends[0], "CONCLUIDO", automation_type="demo.sleep")])
    daily, summed = await _rollup_days(services)
    assert daily == summed and sum(v[0] + v[1] + v[2] for v in daily.values()) == len(ends) + 1

    # A late report, a retry and a move to another queue: the days follow.
    async with services.db.session() as session:
        await session.execute(update(Job).where(Job.status == "FALHA").values(status="CONCLUIDO"))
        await session.execute(
            update(Job)
            .where(Job.automation_type == "demo.sleep")
            .values(status="AGENDADO", data_inicio=None, data_fim=None)
        )
        await session.execute(update(Job).where(Job.status == "CANCELADO").values(queue="certidao"))
    daily, summed = await _rollup_days(services)
    assert daily == summed
    completed = sum(v[0] for v in daily.values())
    assert completed == sum(1 for i in range(len(ends)) if i % 3 != 2)

    # Retention deletes the jobs; their days keep them.
    assert await delete_finished(services.db, 5) > 0
    assert (await _rollup_days(services))[0] == daily


def _expected(
    ends: list[datetime], first_slot: int, end_slot: int | None, width: int, offset: int
) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for i, end in enumerate(ends):
        slot = math.floor(end.timestamp()) // SLOT_SECONDS
        if slot < first_slot or (end_slot is not None and slot >= end_slot):
            continue
        counts = found.setdefault(math.floor(end.timestamp() + offset) // width, [0, 0, 0])
        counts[i % 3] += 1
    return found


def _merged(*parts: dict[int, list[int]]) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for part in parts:
        for bucket, counts in part.items():
            into = found.setdefault(bucket, [0, 0, 0])
            for i, n in enumerate(counts):
                into[i] += n
    return found


async def test_buckets_of_whole_days_read_from_days_count_as_the_jobs_do(any_services: Services) -> None:
    services = any_services
    ends = _ends()
    # Another automation's jobs in another queue, which a scope of either leaves out.
    others = ends[::2]
    async with services.db.session() as session:
        await session.execute(insert(Job), [_row(end, STATUSES[i % 3]) for i, end in enumerate(ends)])
        await session.execute(
            insert(Job),
            [
                _row(end, STATUSES[i % 3], automation_type="demo.sleep", queue="certidao")
                for i, end in enumerate(others)
            ],
        )
    now_slot = math.floor(utcnow().timestamp()) // SLOT_SECONDS
    # A first slot inside a day, a window ending inside another, or open.
    windows = [
        (now_slot - (LONG_RANGE_DAYS + 20) * DAY_SLOTS - 7, None),
        (now_slot - (LONG_RANGE_DAYS + 5) * DAY_SLOTS + 5, now_slot - 3 * DAY_SLOTS - 41),
        # A short range: the quarter hours alone.
        (now_slot - 10 * DAY_SLOTS + 5, None),
    ]
    # UTC, America/Sao_Paulo, Asia/Tokyo, Asia/Kolkata, Asia/Kathmandu: midnights before and after
    # noon UTC, on whole and on half and quarter hours.
    offsets = (0, -3 * 3600, 9 * 3600, 19_800, 20_700)
    scopes = [Scope(), Scope("demo.echo"), Scope(queue="scan"), Scope("demo.echo", "scan")]
    async with services.db.reader() as session:
        for first_slot, end_slot in windows:
            for width in (86_400, 7 * 86_400):
                for offset in offsets:
                    own = _expected(ends, first_slot, end_slot, width, offset)
                    every = _merged(own, _expected(others, first_slot, end_slot, width, offset))
                    for scope in scopes:
                        shape = (first_slot, end_slot, width, offset)
                        found = await bucket_sums(session, bucket_statement(COUNT_COLUMNS, *shape, scope))
                        nonzero = {k: v for k, v in found.items() if any(v)}
                        wanted = every if scope == Scope() else own
                        assert nonzero == wanted, (shape, scope)
        for scope in (Scope("x"), Scope(queue="x"), Scope("demo.sleep", "scan")):
            statement = bucket_statement(COUNT_COLUMNS, windows[0][0], None, 86_400, -10_800, scope)
            assert not any(any(v) for v in (await bucket_sums(session, statement)).values()), scope
