"""The reconciler on real PostgreSQL and Redis: which jobs it puts right, how, and which it leaves.

No Celery worker runs here, so the workers hold nothing: a job is accounted for only by a message
waiting in its queue's Redis lists. (Runs held by live workers are covered by the fault tests.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select, text, update

from tests.support.settings import MakeSettings
from worker_automation.asgi.app import create_app
from worker_automation.broker import queues
from worker_automation.domain.vocabulary import Fault
from worker_automation.models import AuditEntry, Job, utcnow
from worker_automation.process.housekeeping import Leadership
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.dispatch import dispatch
from worker_automation.resolvers.lost_runs import LOST_RUN_MESSAGE, end_lost_run
from worker_automation.resolvers.machines import register_machine
from worker_automation.resolvers.recovery import Reconciler, reconcile
from worker_automation.resolvers.resending import resend_all
from worker_automation.resolvers.services import Services

pytestmark = pytest.mark.services


async def _age(services: Services, *job_ids: int) -> None:
    """Make rows look settled (last changed a minute ago)."""
    async with services.db.session() as session:
        await session.execute(
            update(Job).where(Job.id.in_(job_ids)).values(updated_at=utcnow() - timedelta(minutes=1))
        )


async def _row(services: Services, job_id: int) -> Any:
    async with services.db.reader() as session:
        return (await session.execute(select(Job).where(Job.id == job_id))).scalar_one()


async def running_job(services: Services, automation: str, machine_id: int, task_id: str) -> int:
    now = utcnow() - timedelta(minutes=1)
    values = {
        "automation_type": automation,
        "queue": "scan",
        "status": "EXECUTANDO",
        "priority": 0,
        "retry_count": 0,
        "progress": 40,
        "created_at": now,
        "updated_at": now,
        "data_inicio": now,
        "task_id": task_id,
        "machine_id": machine_id,
    }
    async with services.db.session() as session:
        return int((await session.execute(insert(Job).values(**values).returning(Job.id))).scalar_one())


async def _waiting(services: Services) -> set[str]:
    return await queues.waiting_task_ids(services.broker.redis, services.settings.queues)


async def test_a_queued_job_whose_message_is_lost_is_sent_again_under_a_new_task(services: Services) -> None:
    kept = await dispatch(services, CLI_ACTOR, automation_type="demo.echo", cliente_id=None, context={})
    lost = await dispatch(services, CLI_ACTOR, automation_type="demo.echo", cliente_id=None, context={"n": 1})
    # Redis lost the second message (a restart without persistence, say).
    redis = services.broker.redis
    for key in queues.priority_keys("scan"):
        for message in await redis.lrange(key, 0, -1):
            assert isinstance(message, bytes)  # the broker's connection does not decode replies
            if queues.task_id_of(message) == lost.task_id:
                await redis.lrem(key, 0, message.decode())  # a JSON envelope: UTF-8 both ways
    assert await _waiting(services) == {kept.task_id}
    await _age(services, kept.id, lost.id)

    reconciler = Reconciler()
    first = await reconciler.run_pass(services)
    assert first.broker_checked and first.total == 0 and first.suspects == 1, "one look is not enough"
    second = await reconciler.run_pass(services)
    assert (second.resent, second.job_ids) == (1, [lost.id])

    row = await _row(services, lost.id)
    assert row.status == "AGENDADO" and row.task_id not in (None, lost.task_id)
    assert await _waiting(services) == {kept.task_id, row.task_id}
    assert (await _row(services, kept.id)).task_id == kept.task_id
    async with services.db.reader() as session:
        entry = (await session.execute(select(AuditEntry).where(AuditEntry.action == "recover"))).scalar_one()
    assert entry.target == f"worker:{lost.id}" and entry.actor == "reconciler"
    assert entry.detail is not None and entry.detail["fault"] == "message_lost"

    third = await reconciler.run_pass(services)
    assert third.total == 0 and third.suspects == 0


async def test_queued_jobs_are_sent_again_together_each_with_its_own_record(services: Services) -> None:
    jobs = [
        await dispatch(services, CLI_ACTOR, automation_type="demo.echo", cliente_id=None, context={"n": n})
        for n in range(4)
    ]
    await services.broker.redis.delete(*queues.priority_keys("scan"))
    unsent, moved_on = jobs[1], jobs[2]
    async with services.db.session() as session:
        await session.execute(update(Job).where(Job.id == unsent.id).values(task_id=None))
        # An operator acted after the look: the job holds another task than the one seen.
        await session.execute(update(Job).where(Job.id == moved_on.id).values(task_id="t-operator"))
    seen = [(job.id, None if job is unsent else job.task_id) for job in jobs]

    sent = await resend_all(services, CLI_ACTOR, seen)

    assert sent == [job.id for job in jobs if job is not moved_on]
    rows = {job.id: await _row(services, job.id) for job in jobs}
    assert rows[moved_on.id].task_id == "t-operator", "a job that moved on is left as it is"
    new_tasks = {rows[job_id].task_id for job_id in sent}
    assert None not in new_tasks and not new_tasks & {job.task_id for job in jobs}
    assert await _waiting(services) == new_tasks
    assert len({rows[job_id].updated_at for job_id in sent}) == 1, "one statement changed them all"
    async with services.db.reader() as session:
        entries = (
            await session.scalars(
                select(AuditEntry).where(AuditEntry.action == "recover").order_by(AuditEntry.id)
            )
        ).all()
    assert [e.target for e in entries] == [f"worker:{job_id}" for job_id in sent]
    details = {e.target: e.detail or {} for e in entries}
    faults = {target: detail["fault"] for target, detail in details.items()}
    assert faults[f"worker:{unsent.id}"] == "not_sent" and faults[f"worker:{jobs[0].id}"] == "message_lost"
    assert all(e.actor == "cli" and e.result == "ok" for e in entries)
    assert all(detail["outcome"] == "resent" for detail in details.values())


async def test_a_queued_job_the_broker_refused_is_sent_at_the_first_look(services: Services) -> None:
    job = await dispatch(services, CLI_ACTOR, automation_type="demo.echo", cliente_id=None, context={})
    async with services.db.session() as session:
        await session.execute(update(Job).where(Job.id == job.id).values(task_id=None))
    await _age(services, job.id)

    report = await Reconciler().run_pass(services)

    assert report.resent == 1
    row = await _row(services, job.id)
    assert row.task_id is not None and row.task_id in await _waiting(services)


async def test_lost_runs_of_pool_machines_end_failed_or_queued_again(services: Services) -> None:
    pool = await register_machine(services.db, CLI_ACTOR, services.settings.queues, name="pool", queue="scan")
    dedicated = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="own", automation="demo.sleep"
    )
    not_idempotent = await running_job(services, "demo.sleep", pool.machine.id, "t-sleep")
    idempotent = await running_job(services, "demo.echo", pool.machine.id, "t-echo")
    on_a_dedicated_machine = await running_job(services, "demo.sleep", dedicated.machine.id, "t-own")

    # No worker answers the inspection and none was ever seen running these: no evidence either
    # way (a broadcast that failed looks the same), so the reconciler leaves them alone.
    reconciler = Reconciler()
    for _ in range(2):
        assert (await reconciler.run_pass(services)).total == 0

    # How a lost run ends once it is known to be lost (a silent worker, a start-up report).
    for job_id, task_id in ((not_idempotent, "t-sleep"), (idempotent, "t-echo")):
        assert await end_lost_run(services, CLI_ACTOR, job_id, task_id, Fault.WORKER_LOST) is not None
    failed = await _row(services, not_idempotent)
    assert failed.status == "FALHA" and failed.mensagem_erro == LOST_RUN_MESSAGE
    assert failed.mensagem_erro.startswith("worker_lost")
    again = await _row(services, idempotent)
    assert (again.status, again.retry_count, again.machine_id, again.progress) == ("AGENDADO", 1, None, 0)
    assert again.task_id not in (None, "t-echo") and again.task_id in await _waiting(services)
    # Nothing tells the reconciler whether a dedicated machine still runs its job.
    assert (await _row(services, on_a_dedicated_machine)).status == "EXECUTANDO"


async def test_a_worker_reports_the_run_it_held_before_it_died(services: Services) -> None:
    own = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="own", automation="demo.sleep"
    )
    other = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="other", automation="demo.sleep"
    )
    job = await running_job(services, "demo.sleep", own.machine.id, "t-1")
    app = create_app(services.settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            url = f"/api/v1/jobs/{job}/lost"
            bad = await http.post(url, json={"fault": "nope"}, headers={"X-Worker-Api-Key": own.api_key})
            assert bad.status_code == 422 and bad.json()["data"]["field"] == "fault"
            # Not a string at all (an object, a list, a number): refused the same way, never a 500.
            for odd in ({"fault": "worker_lost"}, ["worker_lost"], 3, True):
                odd_answer = await http.post(
                    url, json={"fault": odd, "task_id": "t-1"}, headers={"X-Worker-Api-Key": own.api_key}
                )
                assert odd_answer.status_code == 422, (odd, odd_answer.text)
                assert odd_answer.json()["data"]["field"] == "fault"
            body = {"fault": "worker_lost", "task_id": "t-1"}
            refused = await http.post(url, json=body, headers={"X-Worker-Api-Key": other.api_key})
            assert refused.status_code == 409
            stale = await http.post(
                url, json={**body, "task_id": "t-0"}, headers={"X-Worker-Api-Key": own.api_key}
            )
            assert stale.status_code == 409 and stale.json()["data"]["reason"] == "stale_task"
            assert (await _row(services, job)).status == "EXECUTANDO"
            answer = await http.post(url, json=body, headers={"X-Worker-Api-Key": own.api_key})
            assert answer.status_code == 200, answer.text
            assert answer.json()["data"]["status"] == "FALHA"
            again = await http.post(url, json=body, headers={"X-Worker-Api-Key": own.api_key})
            assert again.status_code == 409


async def test_a_broker_that_cannot_be_read_decides_nothing(
    services: Services, make_settings: MakeSettings
) -> None:
    job = await dispatch(services, CLI_ACTOR, automation_type="demo.echo", cliente_id=None, context={})
    await services.broker.redis.delete(*queues.priority_keys("scan"))
    await _age(services, job.id)
    down = await Services.start(
        make_settings(services.settings.database_url, "redis://127.0.0.1:1/0"), migrate_db=False
    )
    try:
        reconciler = Reconciler()
        for _ in range(2):
            report = await reconciler.run_pass(down)
            assert not report.broker_checked and report.total == 0
    finally:
        await down.close()
    assert (await _row(services, job.id)).task_id == job.task_id


async def test_reconcile_by_hand_is_audited(services: Services) -> None:
    job = await dispatch(services, CLI_ACTOR, automation_type="demo.echo", cliente_id=None, context={})
    await services.broker.redis.delete(*queues.priority_keys("scan"))
    await _age(services, job.id)

    report = await reconcile(services, CLI_ACTOR)

    assert report.resent == 1 and report.job_ids == [job.id]
    async with services.db.reader() as session:
        actions = (await session.scalars(select(AuditEntry.action).order_by(AuditEntry.id))).all()
    assert actions[-2:] == ["recover", "reconcile"]


async def test_one_replica_leads_at_a_time(services: Services, make_settings: MakeSettings) -> None:
    other = await Services.start(make_settings(services.settings.database_url, None), migrate_db=False)
    first, second = Leadership(services), Leadership(other)
    try:
        assert await first.held()
        assert not await second.held()
        assert await first.held(), "the leader keeps its lock"
        await first.release()
        assert await second.held()
        assert not await first.held()
    finally:
        await first.release()
        await second.release()
        await other.close()


async def test_the_leader_holds_its_lock_outside_any_transaction(services: Services) -> None:
    leader = Leadership(services)
    try:
        assert await leader.held()
        assert await leader.held(), "the leader keeps its lock"
        async with services.db.reader() as session:
            states = (
                await session.scalars(
                    text(
                        "SELECT a.state FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid)"
                        " WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()"
                    )
                )
            ).all()
        assert states == ["idle"]
    finally:
        await leader.release()


async def test_a_claim_whose_answer_never_arrived_is_queued_again(services: Services) -> None:
    own = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="own", automation="demo.sleep"
    )
    job = await running_job(services, "demo.sleep", own.machine.id, "t-1")
    app = create_app(services.settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            answer = await http.post(
                f"/api/v1/jobs/{job}/lost",
                json={"fault": "not_started", "task_id": "t-1"},
                headers={"X-Worker-Api-Key": own.api_key},
            )
    assert answer.status_code == 200, answer.text
    row = await _row(services, job)
    # demo.sleep is not safe to run again, but this run never began: it simply waits again.
    assert (row.status, row.retry_count, row.machine_id) == ("AGENDADO", 0, None)
    assert row.task_id not in (None, "t-1") and row.task_id in await _waiting(services)


async def test_the_workers_are_asked_only_when_the_rows_leave_a_doubt(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []
    inspect = services.broker.inspect

    async def counted() -> Any:
        asked.append(1)
        return await inspect()

    monkeypatch.setattr(services.broker, "inspect", counted)
    reconciler = Reconciler()
    # Nothing at all, then a queued job whose message waits in its queue: nothing to ask about.
    assert (await reconciler.run_pass(services)).broker_checked
    queued = await dispatch(services, CLI_ACTOR, automation_type="demo.echo", cliente_id=None, context={})
    await _age(services, queued.id)
    report = await reconciler.run_pass(services)
    assert report.broker_checked and report.total == 0 and asked == []

    # A run on a pool machine, even one that started a moment ago: only its worker can tell.
    pool = await register_machine(services.db, CLI_ACTOR, services.settings.queues, name="pool", queue="scan")
    running = await running_job(services, "demo.sleep", pool.machine.id, "t-running")
    async with services.db.session() as session:
        await session.execute(update(Job).where(Job.id == running).values(updated_at=utcnow()))
    await reconciler.run_pass(services)
    assert len(asked) == 1
    async with services.db.session() as session:
        await session.execute(update(Job).where(Job.id == running).values(status="CONCLUIDO"))
    await reconciler.run_pass(services)
    assert len(asked) == 1

    # A queued job whose message is in no queue: a worker may hold it.
    redis = services.broker.redis
    for key in queues.priority_keys("scan"):
        await redis.delete(key)
    await reconciler.run_pass(services)
    assert len(asked) == 2
