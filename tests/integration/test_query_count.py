"""Reads cost a fixed number of SQL statements whatever the page size (no query per row), on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, insert

from tests.support.reads import recent_terminal
from tests.support.settings import MakeSettings
from worker_automation.models import Cliente, Job, JobStatus
from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.reads import (
    active_jobs,
    list_jobs,
    queued_jobs,
)
from worker_automation.settings import DEFAULT_QUEUES

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
QUEUES = dict(DEFAULT_QUEUES)
ROWS = 150
CLIENTS = 40
STATUSES = [s.value for s in JobStatus]


@pytest.fixture
async def db(pg_database_url: str, make_settings: MakeSettings) -> AsyncIterator[Database]:
    """A migrated PostgreSQL database with many clients and rows of every status."""
    await migrate(pg_database_url)
    database = Database(make_settings(pg_database_url, None))
    async with database.session() as session:
        await session.execute(
            insert(Cliente),
            [{"razao_social": f"Cliente {i}", "cnpj": None, "created_at": T0} for i in range(CLIENTS)],
        )
        rows: list[dict[str, Any]] = []
        for i in range(ROWS):
            status = STATUSES[i % len(STATUSES)]
            ended = status in ("CONCLUIDO", "FALHA", "CANCELADO")
            rows.append(
                {
                    "task_id": f"count-{i}",
                    # Spread over distinct clients, some missing, so a per-row lookup would show.
                    "cliente_id": (i % (CLIENTS + 5)) + 1,
                    "usuario_id": None,
                    "path_file": None,
                    "status": status,
                    "data_inicio": T0 if status != "AGENDADO" else None,
                    "data_fim": T0 + timedelta(seconds=i) if ended else None,
                    "mensagem_erro": None,
                    "automation_type": "cnd_federal" if i % 2 else "simples_nacional",
                    "queue": "certidao" if i % 2 else "scraping",
                    "priority": i % 10,
                    "retry_count": 0,
                    "progress": 0,
                    "metadata_json": None,
                    "context": None,
                    "result": None,
                    "created_at": T0 + timedelta(seconds=i),
                    "updated_at": T0 + timedelta(seconds=i),
                    "machine_id": None,
                }
            )
        await session.execute(insert(Job), rows)
    try:
        yield database
    finally:
        await database.close()


class StatementCounter:
    """Counts the statements sent to the database while active."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.active = False

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if self.active:
            self.statements.append(statement)

    @contextmanager
    def counting(self) -> Iterator[list[str]]:
        self.statements = []
        self.active = True
        try:
            yield self.statements
        finally:
            self.active = False


@pytest.fixture
def counter(db: Database) -> Iterator[StatementCounter]:
    counting = StatementCounter()
    event.listen(db.engine.sync_engine, "before_cursor_execute", counting)
    try:
        yield counting
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", counting)


async def statements_for(counter: StatementCounter, call: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    with counter.counting() as seen:
        result = await call()
    return len(seen), result


async def test_list_page_of_100_costs_as_much_as_a_page_of_5(db: Database, counter: StatementCounter) -> None:
    # Warm the pool so connection set-up statements are not counted.
    await list_jobs(db, QUEUES, JobFilter(), 1, 1)

    small, small_page = await statements_for(counter, lambda: list_jobs(db, QUEUES, JobFilter(), 1, 5))
    large, large_page = await statements_for(counter, lambda: list_jobs(db, QUEUES, JobFilter(), 1, 100))

    assert len(small_page.items) == 5
    assert len(large_page.items) == 100
    # Enrichment really happened, so it was not skipped to save queries.
    assert any(w.client_name for w in large_page.items)
    assert any(w.client_name is None for w in large_page.items)
    # One statement: the page's rows, each carrying the total.
    assert large == small == 1
    assert small_page.total == large_page.total == ROWS


async def test_list_totals_match_a_count_on_every_page_and_past_the_end(
    db: Database, counter: StatementCounter
) -> None:
    await list_jobs(db, QUEUES, JobFilter(), 1, 1)
    for filters in (
        JobFilter(status="CONCLUIDO"),  # from the counters
        JobFilter(status="CONCLUIDO", queue="certidao"),
        JobFilter(automation_type="cnd_federal"),  # counted
        JobFilter(q="cliente 1"),
    ):
        everything = await list_jobs(db, QUEUES, filters, 1, 500)
        assert everything.total == len(everything.items) > 0, filters
        seen: list[int] = []
        for page in range(1, ROWS):
            with counter.counting() as sent:
                found = await list_jobs(db, QUEUES, filters, page, 7)
            statements = len(sent)
            assert found.total == everything.total, (filters, page)
            if not found.items:
                assert statements == 2, filters  # past the end: the total is asked for alone
                break
            assert statements == 1, filters
            seen.extend(w.id for w in found.items)
        assert seen == [w.id for w in everything.items], filters


async def test_filtered_list_by_client_text_costs_the_same(db: Database, counter: StatementCounter) -> None:
    await list_jobs(db, QUEUES, JobFilter(), 1, 1)
    filters = JobFilter(q="cliente", status="CONCLUIDO")

    small, _ = await statements_for(counter, lambda: list_jobs(db, QUEUES, filters, 1, 5))
    large, page = await statements_for(counter, lambda: list_jobs(db, QUEUES, filters, 1, 100))

    assert page.total > 5
    assert large == small


async def test_queued_page_size_does_not_change_statement_count(
    db: Database, counter: StatementCounter
) -> None:
    await queued_jobs(db, QUEUES, 1, 1)

    small, _ = await statements_for(counter, lambda: queued_jobs(db, QUEUES, 1, 5))
    large, page = await statements_for(counter, lambda: queued_jobs(db, QUEUES, 1, 100))

    assert len(page.items) == ROWS // len(STATUSES)
    assert large == small


async def test_active_and_recent_are_one_statement(db: Database, counter: StatementCounter) -> None:
    await active_jobs(db)

    few, _ = await statements_for(counter, lambda: active_jobs(db, limit=2))
    every, running = await statements_for(counter, lambda: active_jobs(db))
    recent_few, _ = await statements_for(counter, lambda: recent_terminal(db, 2))
    recent_many, ended = await statements_for(counter, lambda: recent_terminal(db, 100))

    assert len(running) == ROWS // len(STATUSES)
    assert len(ended) == 90
    assert few == every == 1
    assert recent_few == recent_many == 1
