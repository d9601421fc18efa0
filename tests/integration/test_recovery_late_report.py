"""A finished run keeps its outcome: the late report of a run recovery ended replaces its failure.

On real PostgreSQL and Redis, through the worker protocol's routes: a completion or failure of the
same run (task id) by the machine that held it wins over ``worker_lost`` / ``machine_lost``, is
audited as ``late_report`` and announced; a report of an older run (the job retried since), of
another machine, or about a failure that was not recovery's is still refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from tests.integration.test_recovery import running_job
from worker_automation.asgi.app import create_app
from worker_automation.domain.vocabulary import EventKind, Fault
from worker_automation.infra.metrics import JOB_TRANSITIONS
from worker_automation.models import AuditEntry, Job
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.job_actions import retry
from worker_automation.resolvers.lost_runs import end_lost_run
from worker_automation.resolvers.machines import RegisteredMachine, register_machine
from worker_automation.resolvers.services import Services
from worker_automation.schema.streams import Feed

pytestmark = pytest.mark.services


async def _lost(services: Services, machine_id: int, task_id: str, fault: Fault = Fault.WORKER_LOST) -> int:
    job_id = await running_job(services, "demo.sleep", machine_id, task_id)
    view = await end_lost_run(services, CLI_ACTOR, job_id, task_id, fault)
    assert view is not None and view.status == "FALHA"
    return job_id


async def _row(services: Services, job_id: int) -> Any:
    async with services.db.reader() as session:
        return (await session.execute(select(Job).where(Job.id == job_id))).scalar_one()


async def _late_entries(services: Services, job_id: int) -> list[Any]:
    async with services.db.reader() as session:
        found = await session.scalars(
            select(AuditEntry).where(
                AuditEntry.action == "late_report", AuditEntry.target == f"worker:{job_id}"
            )
        )
        return list(found.all())


@pytest.fixture
async def http(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(services.settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


async def _machine(services: Services, name: str) -> RegisteredMachine:
    return await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name=name, automation="demo.sleep"
    )


def _concluded() -> float:
    return float(JOB_TRANSITIONS.labels("demo.sleep", "scan", "CONCLUIDO")._value.get())


async def test_a_late_completion_replaces_worker_lost(services: Services, http: httpx.AsyncClient) -> None:
    own = await _machine(services, "own")
    job_id = await _lost(services, own.machine.id, "t-1")
    headers = {"X-Worker-Api-Key": own.api_key}
    feed = Feed(services.events)
    before = _concluded()
    try:
        answer = await http.post(
            f"/api/v1/jobs/{job_id}/complete", json={"result": {"ok": 1}, "task_id": "t-1"}, headers=headers
        )
        assert answer.status_code == 200, answer.text
        # Announced as any completion: subscribers and counters see the job enter CONCLUIDO.
        # (The failure recovery announced may still be on its way: skipped.)
        event = await feed.next(within=5.0)
        while event is not None and (event.job.get("id"), event.kind) != (job_id, EventKind.COMPLETED):
            event = await feed.next(within=5.0)
    finally:
        feed.close()
    assert event is not None and event.kind is EventKind.COMPLETED
    assert event.job["status"] == "CONCLUIDO"
    assert _concluded() == before + 1
    row = await _row(services, job_id)
    assert (row.status, row.result, row.mensagem_erro, row.progress) == ("CONCLUIDO", {"ok": 1}, None, 100)
    [entry] = await _late_entries(services, job_id)
    assert entry.actor == "machine:own" and entry.result == "ok"
    assert entry.detail == {"replaced": "WorkerLost", "status": "CONCLUIDO", "task_id": "t-1"}
    # Sent again (the answer was lost): the run is over, nothing changes.
    again = await http.post(
        f"/api/v1/jobs/{job_id}/complete", json={"result": {"ok": 2}, "task_id": "t-1"}, headers=headers
    )
    assert again.status_code == 409
    assert (await _row(services, job_id)).result == {"ok": 1}


async def test_a_late_failure_replaces_machine_lost(services: Services, http: httpx.AsyncClient) -> None:
    own = await _machine(services, "own")
    job_id = await _lost(services, own.machine.id, "t-2", Fault.MACHINE_LOST)
    assert (await _row(services, job_id)).mensagem_erro.startswith("machine_lost: ")
    body = {"error": "site fora do ar", "exc_type": "Timeout", "task_id": "t-2"}
    answer = await http.post(
        f"/api/v1/jobs/{job_id}/fail", json=body, headers={"X-Worker-Api-Key": own.api_key}
    )
    assert answer.status_code == 200, answer.text
    row = await _row(services, job_id)
    assert (row.status, row.mensagem_erro, row.result["exc_type"]) == ("FALHA", "site fora do ar", "Timeout")
    [entry] = await _late_entries(services, job_id)
    assert entry.detail["replaced"] == "MachineLost"


async def test_reports_of_other_runs_are_still_refused(services: Services, http: httpx.AsyncClient) -> None:
    own = await _machine(services, "own")
    other = await _machine(services, "other")
    headers = {"X-Worker-Api-Key": own.api_key}
    body = {"result": {"ok": 1}, "task_id": "t-3"}

    # Another machine's report about the run: not its run.
    lost = await _lost(services, own.machine.id, "t-3")
    refused = await http.post(
        f"/api/v1/jobs/{lost}/complete", json=body, headers={"X-Worker-Api-Key": other.api_key}
    )
    assert refused.status_code == 409
    # Without the run's task id nothing says which run the report is about.
    untold = await http.post(f"/api/v1/jobs/{lost}/complete", json={"result": 1}, headers=headers)
    assert untold.status_code == 409

    # Retried by an operator after worker_lost: a new task, maybe a new run; the old one's report
    # is about an older run and may not touch it.
    await retry(services, CLI_ACTOR, lost)
    stale = await http.post(f"/api/v1/jobs/{lost}/complete", json=body, headers=headers)
    assert stale.status_code == 409
    assert (await _row(services, lost)).status == "AGENDADO"

    # A failure the worker itself reported is not recovery's guess: it stands.
    reported = await running_job(services, "demo.sleep", own.machine.id, "t-4")
    failed = await http.post(
        f"/api/v1/jobs/{reported}/fail", json={"error": "boom", "task_id": "t-4"}, headers=headers
    )
    assert failed.status_code == 200
    late = await http.post(
        f"/api/v1/jobs/{reported}/complete", json={"result": 1, "task_id": "t-4"}, headers=headers
    )
    assert late.status_code == 409
    assert (await _row(services, reported)).status == "FALHA"
    assert not await _late_entries(services, lost) and not await _late_entries(services, reported)
