"""retryWorkers and cancelWorkers: the list's filter, one transaction and one audit entry, each
job's own rules; on real PostgreSQL and Redis (and SQLite with the embedded broker)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, insert, select

from tests.integration.harness import Stack
from tests.integration.operator_support import any_services, pool_machine
from tests.support.counts import recount
from tests.unit.graphql_support import make_api
from worker_automation.models import AuditEntry, Job, utcnow
from worker_automation.resolvers import claims
from worker_automation.resolvers.counts import counters
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]

RETRY = "mutation($f: WorkerFilter!, $n: Int) { retryWorkers(filter: $f, limit: $n) { matched changed ids } }"
CANCEL = (
    "mutation($f: WorkerFilter!, $n: Int) { cancelWorkers(filter: $f, limit: $n) { matched changed ids } }"
)


def _failed(n: int, queue: str = "scan", automation: str = "demo.fail") -> list[dict[str, Any]]:
    now = utcnow()
    return [
        {
            "task_id": f"old-{automation}-{i}",
            "automation_type": automation,
            "queue": queue,
            "status": "FALHA",
            "priority": 0,
            "retry_count": 0,
            "progress": 100,
            "mensagem_erro": "boom",
            "data_inicio": now,
            "data_fim": now,
            "created_at": now,
            "updated_at": now,
        }
        for i in range(n)
    ]


async def _audit_count(services: Services, action: str) -> int:
    async with services.db.session() as session:
        return int(await session.scalar(select(func.count()).where(AuditEntry.action == action)) or 0)


async def test_bulk_retry_of_500_failed_jobs_in_one_call(services: Services) -> None:
    api = await make_api(services)
    async with services.db.session() as session:
        await session.execute(insert(Job), _failed(500))
        # Not matched by the filter: another automation's failures.
        await session.execute(insert(Job), _failed(3, automation="demo.echo"))

    data = await api.ok(RETRY, {"f": {"status": "FALHA", "automationType": "demo.fail"}, "n": 5000})
    result = data["retryWorkers"]
    assert (result["matched"], result["changed"], len(result["ids"])) == (500, 500, 500)

    async with services.db.session() as session:
        rows = (await session.execute(select(Job).where(Job.id.in_(result["ids"])))).scalars().all()
        states = {(r.status, r.retry_count, r.mensagem_erro, r.data_fim) for r in rows}
        assert states == {("AGENDADO", 1, None, None)}
        assert all(r.task_id is not None and not r.task_id.startswith("old-") for r in rows)
        assert await counters(session) == await recount(session)
    # Every task reached the broker.
    assert (await services.broker.queue_lengths())["scan"] == 500
    assert await _audit_count(services, "retry_workers") == 1

    # Retrying again matches the same jobs, now queued: nothing changes.
    again = (await api.ok(RETRY, {"f": {"automationType": "demo.fail"}}))["retryWorkers"]
    assert (again["matched"], again["changed"]) == (500, 0)


async def test_bulk_cancel_follows_each_jobs_rules(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    machine = await pool_machine(services)
    queued = [await api.dispatch("demo.echo") for _ in range(3)]
    running = await api.dispatch("demo.echo")
    await claims.claim(services, machine, running["id"], running["taskId"])
    done = await api.dispatch("demo.echo")
    await claims.claim(services, machine, done["id"], done["taskId"])
    await claims.complete(services, machine, done["id"], None, done["taskId"])

    result = (await api.ok(CANCEL, {"f": {"queue": "scan"}}))["cancelWorkers"]
    assert result["matched"] == 5 and result["changed"] == 4
    assert set(result["ids"]) == {j["id"] for j in queued} | {running["id"]}
    job = "query($id: Int!) { worker(id: $id) { status attempts { outcome } } }"
    assert (await api.ok(job, {"id": done["id"]}))["worker"]["status"] == "CONCLUIDO"
    stopped = (await api.ok(job, {"id": running["id"]}))["worker"]
    assert stopped == {"status": "CANCELADO", "attempts": [{"outcome": "CANCELADO"}]}
    assert await _audit_count(services, "cancel_workers") == 1

    # The limit takes the newest first; a bad limit or filter is refused naming the field.
    more = [await api.dispatch("demo.echo") for _ in range(3)]
    limited = (await api.ok(CANCEL, {"f": {"status": "AGENDADO"}, "n": 2}))["cancelWorkers"]
    assert limited["ids"] == [more[2]["id"], more[1]["id"]]
    error = await api.fails(CANCEL, {"f": {}, "n": 0})
    assert error.extensions and error.extensions["code"] == "BAD_USER_INPUT" and "limit" in error.message
    error = await api.fails(RETRY, {"f": {"queue": "nope"}})
    assert error.extensions and error.extensions["code"] == "BAD_USER_INPUT" and "queue" in error.message
    error = await api.fails(RETRY, {"f": {}}, caller="reader")
    assert error.extensions and error.extensions["code"] == "FORBIDDEN"


def test_bulk_cancel_terminates_a_running_job(stack: Stack) -> None:
    """A real pool worker (one slot) runs a long job: cancelWorkers ends it CANCELADO and frees the
    slot at once, so the next job runs long before the first would have finished."""
    stack.pool_worker("scan", concurrency=1)
    sleeper = stack.dispatch("demo.sleep", {"seconds": 60})
    stack.wait_status(sleeper, "EXECUTANDO", timeout=30)
    query = 'mutation { cancelWorkers(filter: {automationType: "demo.sleep"}) { matched changed ids } }'
    body = stack.http.post("/graphql", json={"query": query}, headers=stack.operator_headers).json()
    assert body["data"]["cancelWorkers"] == {"matched": 1, "changed": 1, "ids": [sleeper]}, body
    follower = stack.dispatch("demo.echo", {"value": 2})
    stack.wait_status(follower, "CONCLUIDO", timeout=30)
    assert stack.db.job(sleeper)["status"] == "CANCELADO"
