"""A job's attempts: one per claim, kept across retries, ended by every way a run ends, gone with
the job; read for a page of jobs in one query; existing runs carried over by the migration."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import delete, func, insert, select

from tests.integration.operator_support import StatementCounter, any_services, pool_machine
from tests.support.settings import MakeSettings
from tests.unit.graphql_support import make_api
from worker_automation.models import Attempt, Job
from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.resolvers import claims
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]

ATTEMPTS = (
    "query($id: Int!) { worker(id: $id) { status retryCount attempts "
    "{ number machineId machineName taskId startedAt endedAt outcome error } } }"
)


async def test_attempts_follow_claims_retries_and_cancel(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    machine = await pool_machine(services)
    job = await api.dispatch("demo.echo")

    await claims.claim(services, machine, job["id"], job["taskId"])
    await claims.fail(services, machine, job["id"], "portal fora do ar")
    retried = await api.ok("mutation($id: Int!) { retryWorker(id: $id) { taskId } }", {"id": job["id"]})
    second_task = retried["retryWorker"]["taskId"]
    await claims.claim(services, machine, job["id"], second_task)
    await claims.complete(services, machine, job["id"], {"ok": True}, second_task)

    data = (await api.ok(ATTEMPTS, {"id": job["id"]}))["worker"]
    assert data["status"] == "CONCLUIDO" and data["retryCount"] == 1
    first, second = data["attempts"]
    assert (first["number"], first["outcome"], first["error"]) == (1, "FALHA", "portal fora do ar")
    assert first["taskId"] == job["taskId"] and first["endedAt"] is not None
    assert (second["number"], second["outcome"], second["error"]) == (2, "CONCLUIDO", None)
    assert second["taskId"] == second_task
    assert {a["machineId"] for a in (first, second)} == {machine.id}
    assert {a["machineName"] for a in (first, second)} == {machine.name}

    # A running job cancelled: its run ends CANCELADO; a move ends it as queued again.
    other = await api.dispatch("demo.echo")
    await claims.claim(services, machine, other["id"], other["taskId"])
    running = (await api.ok(ATTEMPTS, {"id": other["id"]}))["worker"]["attempts"]
    assert len(running) == 1 and running[0]["endedAt"] is None and running[0]["outcome"] is None
    await api.ok("mutation($id: Int!) { cancelWorker(id: $id) { id } }", {"id": other["id"]})
    (cancelled,) = (await api.ok(ATTEMPTS, {"id": other["id"]}))["worker"]["attempts"]
    assert cancelled["outcome"] == "CANCELADO" and cancelled["endedAt"] is not None

    moved = await api.dispatch("demo.echo")
    await claims.claim(services, machine, moved["id"], moved["taskId"])
    await api.ok(
        'mutation($id: Int!) { moveWorker(id: $id, targetQueue: "certidao") { id } }', {"id": moved["id"]}
    )
    (requeued,) = (await api.ok(ATTEMPTS, {"id": moved["id"]}))["worker"]["attempts"]
    assert requeued["outcome"] == "REENFILEIRADO"

    # Deleting jobs deletes their attempts.
    async with services.db.session() as session:
        await session.execute(delete(Job).where(Job.id.in_([job["id"], other["id"]])))
        left = await session.scalar(select(func.count()).select_from(Attempt))
    assert left == 1


async def test_attempts_of_a_page_cost_one_query(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    machine = await pool_machine(services)
    for _ in range(12):
        job = await api.dispatch("demo.echo")
        await claims.claim(services, machine, job["id"], job["taskId"])
        await claims.complete(services, machine, job["id"], None, job["taskId"])
    query = "{ workers(perPage: 50) { items { id attempts { number machineName } } } }"
    with StatementCounter(services) as counter:
        data = await api.ok(query)
    items = data["workers"]["items"]
    assert len(items) == 12 and all(len(i["attempts"]) == 1 for i in items)
    assert sum("FROM attempts" in s for s in counter.statements) == 1


async def test_migration_carries_existing_runs_over(database_url: str, make_settings: MakeSettings) -> None:
    await migrate(database_url, "0002")
    db = Database(make_settings(database_url, None))
    start, end = datetime(2026, 5, 1, 12, tzinfo=UTC), datetime(2026, 5, 1, 12, 5, tzinfo=UTC)
    base = {"automation_type": "demo.echo", "queue": "scan", "priority": 0, "progress": 0}
    base |= {"created_at": start, "updated_at": end}
    try:
        async with db.session() as session:
            await session.execute(
                insert(Job),
                [
                    {**base, "status": "AGENDADO", "retry_count": 0},
                    {
                        **base,
                        "status": "FALHA",
                        "retry_count": 2,
                        "data_inicio": start,
                        "data_fim": end,
                        "mensagem_erro": "boom",
                        "machine_id": 7,
                        "task_id": "t-failed",
                    },
                    {
                        **base,
                        "status": "EXECUTANDO",
                        "retry_count": 0,
                        "data_inicio": start,
                        "task_id": "t-run",
                    },
                ],
            )
        await migrate(database_url)
        async with db.session() as session:
            rows = (await session.execute(select(Attempt).order_by(Attempt.worker_id))).scalars().all()
        failed, running = rows
        assert (failed.number, failed.outcome, failed.error, failed.machine_id) == (3, "FALHA", "boom", 7)
        assert failed.started_at == start and failed.ended_at == end and failed.task_id == "t-failed"
        assert (running.number, running.outcome, running.ended_at) == (1, None, None)
    finally:
        await db.close()
