"""Which list pages keep one plan for any values (``reads.one_plan``), and the pool's share for them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from worker_automation.models.database import GENERIC_SHARE, generic_pool_size
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.job_order import Direction, JobOrder, OrderField
from worker_automation.resolvers.reads import one_plan
from worker_automation.settings import Settings

QUEUES = {"certidao": 4, "scan": 2}
WEEK_AGO = datetime(2026, 11, 30, tzinfo=UTC)
NOW = datetime(2026, 12, 7, tzinfo=UTC)
BY_FINISH = JobOrder(OrderField.FINISHED_AT, Direction.DESC)
BY_CREATION = JobOrder(OrderField.CREATED_AT, Direction.ASC)
BY_DURATION = JobOrder(OrderField.DURATION, Direction.DESC)


def decided(filters: JobFilter, order: JobOrder | None = None) -> bool:
    order = order if order is not None else filters.implied_order()
    return one_plan(filters, filters.values(QUEUES), order)


@pytest.mark.parametrize(
    ("filters", "order"),
    [
        (JobFilter(), None),
        (JobFilter(queue="scan"), None),
        (JobFilter(status="AGENDADO", queue="certidao"), None),
        (JobFilter(), BY_DURATION),
        (JobFilter(), BY_CREATION),
        (JobFilter(finished_from=WEEK_AGO, finished_to=NOW), None),
        (JobFilter(finished_from=WEEK_AGO), JobOrder(OrderField.FINISHED_AT, Direction.ASC)),
        (JobFilter(created_from=WEEK_AGO, created_to=NOW), None),
    ],
)
def test_a_page_along_the_index_of_its_filters_and_order_keeps_one_plan(
    filters: JobFilter, order: JobOrder | None
) -> None:
    assert decided(filters, order)


@pytest.mark.parametrize(
    ("filters", "order"),
    [
        # One status alone: its index holds the queue before the id, so a rare status (a few
        # running jobs) and a common one are best read differently.
        (JobFilter(status="EXECUTANDO"), None),
        (JobFilter(cliente_id=7), None),
        (JobFilter(usuario_id=3, queue="scan"), None),
        (JobFilter(automation_type="cnd_federal"), None),
        (JobFilter(task_id="abc"), None),
        (JobFilter(q="12.345.678/0001-90"), None),
        (JobFilter(status="FALHA"), BY_DURATION),
        (JobFilter(queue="scan"), BY_FINISH),
        # A range read along another order than its own time's.
        (JobFilter(finished_from=WEEK_AGO), BY_DURATION),
        (JobFilter(created_from=WEEK_AGO), BY_FINISH),
        (JobFilter(created_from=WEEK_AGO, finished_to=NOW), None),
        (JobFilter(finished_from=WEEK_AGO, status="FALHA"), None),
    ],
)
def test_a_page_whose_best_plan_depends_on_its_values_is_planned_for_them(
    filters: JobFilter, order: JobOrder | None
) -> None:
    assert not decided(filters, order)


@pytest.mark.parametrize(
    ("url", "pool", "expected"),
    [
        ("postgresql+asyncpg://u@h/db", 30, 30 // GENERIC_SHARE),
        ("postgresql+asyncpg://u@h/db", GENERIC_SHARE, 1),
        ("postgresql+asyncpg://u@h/db", GENERIC_SHARE - 1, 0),
        ("postgresql+psycopg://u@h/db", 30, 0),
        ("sqlite+aiosqlite:///wa.db", 30, 0),
    ],
)
def test_the_connections_kept_for_one_plan_are_a_share_of_the_pool(
    url: str, pool: int, expected: int
) -> None:
    settings = Settings(database_url=url, database_pool_size=pool)
    assert generic_pool_size(settings) == expected
    assert generic_pool_size(settings) < pool
