"""Demo data on SQLite: clients, users and jobs across every status and the five queues; re-runnable;
queued jobs only of automations that run here, and an attempt for every job that ran."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select

from tests.support.settings import MakeSettings
from worker_automation.catalog.forms import validate_context
from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.domain.documents import is_valid_cnpj
from worker_automation.models import TERMINAL_STATUSES, Attempt, Cliente, Job, JobStatus, Usuario
from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.process.seed import seed_demo
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.reads import list_jobs, stats
from worker_automation.settings import DEFAULT_QUEUES
from worker_automation.worker.implementations import load_implementations

QUEUES = dict(DEFAULT_QUEUES)


@pytest.fixture
async def db(sqlite_database_url: str, make_settings: MakeSettings) -> AsyncIterator[Database]:
    await migrate(sqlite_database_url)
    database = Database(make_settings(sqlite_database_url, None))
    try:
        yield database
    finally:
        await database.close()


async def count(db: Database, model: type) -> int:
    async with db.session() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def test_seed_inserts_clients_users_and_jobs(db: Database) -> None:
    summary = await seed_demo(db, jobs=1200, clientes=30, seed=7)

    assert (summary.clientes, summary.usuarios, summary.jobs) == (30, 3, 1200)
    assert await count(db, Cliente) == 30
    assert await count(db, Usuario) == 3
    assert await count(db, Job) == 1200


async def test_seed_covers_every_status_and_the_five_queues(db: Database) -> None:
    await seed_demo(db, jobs=1200, clientes=30, seed=7)

    result = await stats(db, QUEUES)

    assert result.total == 1200
    assert set(result.by_status) == {s.value for s in JobStatus}
    # Nothing runs seeded jobs: none is seeded running (it would look stuck forever).
    assert result.by_status[JobStatus.EXECUTANDO.value] == 0
    others = {s: n for s, n in result.by_status.items() if s != JobStatus.EXECUTANDO.value}
    assert all(n > 0 for n in others.values()), result.by_status
    assert set(result.by_queue) == {"certidao", "scraping", "scan", "observer", "ui_automation"}
    assert all(n > 0 for n in result.by_queue.values()), result.by_queue


async def test_seeded_rows_are_consistent(db: Database) -> None:
    await seed_demo(db, jobs=600, clientes=20, seed=3)

    async with db.session() as session:
        rows = (await session.scalars(select(Job))).all()
        cnpjs = (await session.scalars(select(Cliente.cnpj))).all()
    for row in rows:
        automation = AUTOMATION_REGISTRY[row.automation_type]
        assert row.queue == automation.queue
        assert 0 <= row.priority <= 9
        assert row.retry_count == 0
        status = JobStatus(row.status)
        if status is JobStatus.AGENDADO:
            assert row.data_inicio is None and row.data_fim is None
        else:
            assert not row.automation_type.startswith("demo.")
        if status is JobStatus.EXECUTANDO:
            assert row.data_inicio is not None and row.data_fim is None
        if status in TERMINAL_STATUSES:
            assert row.data_fim is not None
        if status in (JobStatus.CONCLUIDO, JobStatus.FALHA):
            start, end = row.data_inicio, row.data_fim
            assert start is not None and end is not None and start <= end
        if status is JobStatus.CANCELADO:  # cancelled before it started: no duration to show
            assert row.data_inicio is None
        if status is JobStatus.FALHA:
            assert row.mensagem_erro
            assert row.result is not None and row.result["exc_message"] == row.mensagem_erro
        if status is JobStatus.CONCLUIDO:
            assert row.progress == 100
    assert len({r.task_id for r in rows}) == len(rows)
    assert all(c is not None and is_valid_cnpj(c) for c in cnpjs)


async def test_seeded_rows_are_enriched_with_client_names(db: Database) -> None:
    await seed_demo(db, jobs=200, clientes=10, seed=11)

    page = await list_jobs(db, QUEUES, JobFilter(), 1, 100)

    named = [w for w in page.items if w.cliente_id is not None]
    assert named and all(w.client_name for w in named)
    assert all(w.display_name == AUTOMATION_REGISTRY[w.automation_type].display_name for w in page.items)


async def test_seed_twice_adds_jobs_not_clients(db: Database) -> None:
    await seed_demo(db, jobs=300, clientes=12, seed=5)
    second = await seed_demo(db, jobs=300, clientes=12)

    assert second.clientes == 0
    assert await count(db, Job) == 600
    assert await count(db, Usuario) == 3  # the demo users are added once
    assert await count(db, Cliente) == 12
    async with db.session() as session:
        cnpjs = (await session.scalars(select(Cliente.cnpj))).all()
    assert len(cnpjs) == len(set(cnpjs))


async def test_seed_twice_with_the_same_seed_tops_clients_up(db: Database) -> None:
    await seed_demo(db, jobs=50, clientes=12, seed=5)
    again = await seed_demo(db, jobs=50, clientes=15, seed=5)

    # Clients are topped up to the number asked for, never duplicated (same seed, same CNPJs
    # drawn first), and the jobs are added (task ids stay unique).
    assert again.clientes == 3
    assert await count(db, Cliente) == 12 + again.clientes
    assert await count(db, Job) == 100
    async with db.session() as session:
        cnpjs = (await session.scalars(select(Cliente.cnpj))).all()
        task_ids = (await session.scalars(select(Job.task_id))).all()
    assert len(cnpjs) == len(set(cnpjs))
    assert len(task_ids) == len(set(task_ids)) == 100


async def test_seed_with_no_jobs(db: Database) -> None:
    summary = await seed_demo(db, jobs=0, clientes=2, seed=1)

    assert summary.jobs == 0
    assert await count(db, Job) == 0
    assert await count(db, Cliente) == 2


async def test_seed_reports_progress_per_batch(db: Database) -> None:
    seen: list[int] = []
    await seed_demo(db, jobs=2500, clientes=3, seed=2, progress=seen.append)

    assert seen == [1000, 2000, 2500]


@pytest.mark.parametrize("jobs", [-5, 10**9])
async def test_seed_refuses_a_job_count_out_of_range(db: Database, jobs: int) -> None:
    with pytest.raises(ValueError, match="jobs"):
        await seed_demo(db, jobs=jobs, clientes=1)
    assert await count(db, Cliente) == 0


async def test_queued_jobs_are_of_automations_that_run_here(db: Database) -> None:
    await seed_demo(db, jobs=1500, clientes=5, seed=4)

    runnable = load_implementations()
    async with db.session() as session:
        queued = (await session.scalars(select(Job).where(Job.status == JobStatus.AGENDADO.value))).all()
    assert queued
    for job in queued:
        assert job.automation_type in runnable
        # Each would pass the automation's form, as a dispatched one does.
        validate_context(AUTOMATION_REGISTRY[job.automation_type].form, job.context)


async def test_every_job_that_ran_has_its_attempt_and_no_other_has_one(db: Database) -> None:
    await seed_demo(db, jobs=1500, clientes=5, seed=6)

    async with db.session() as session:
        jobs = {job.id: job for job in (await session.scalars(select(Job))).all()}
        attempts = (await session.scalars(select(Attempt))).all()
    by_job = {attempt.worker_id: attempt for attempt in attempts}
    assert len(by_job) == len(attempts)  # one each
    ran = {job_id for job_id, job in jobs.items() if job.data_inicio is not None}
    assert ran and set(by_job) == ran
    for job_id, attempt in by_job.items():
        job = jobs[job_id]
        assert attempt.number == 1 and attempt.task_id == job.task_id
        assert (attempt.started_at, attempt.ended_at) == (job.data_inicio, job.data_fim)
        assert attempt.outcome == job.status and attempt.error == job.mensagem_erro
