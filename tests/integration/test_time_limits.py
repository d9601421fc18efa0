"""The API's time limit check: a run past its automation's limit plus the grace ends FALHA
``timeout: ...`` as one attempt (retried when the automation retries), a run within it is left
alone, a job that moved on meanwhile is untouched, and the late report of a timed-out run is
refused (409)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import redis
from prometheus_client import REGISTRY
from sqlalchemy import select, update

from tests.integration.operator_support import any_services, pool_machine
from tests.unit.graphql_support import make_api
from worker_automation.broker.gateway import BrokerGateway
from worker_automation.broker.queues import priority_keys
from worker_automation.catalog.registry import (
    AUTOMATION_REGISTRY,
    TIME_LIMIT_GRACE_SECONDS,
    TIMEOUT_EXC_TYPE,
    celery_time_limits,
)
from worker_automation.domain.errors import Conflict
from worker_automation.models import Attempt, AuditEntry, Job, utcnow
from worker_automation.process.housekeeping import _periodic
from worker_automation.resolvers import claims
from worker_automation.resolvers.audit import CLI_ACTOR, Actor
from worker_automation.resolvers.automations import update_settings
from worker_automation.resolvers.machines import MachineView, register_machine
from worker_automation.resolvers.services import Services
from worker_automation.resolvers.time_limits import end_overdue_run, end_overdue_runs, overdue_runs
from worker_automation.settings import Settings

__all__ = ["any_services"]

LIMITED = "demo.timeout"
LIMIT = AUTOMATION_REGISTRY[LIMITED].timeout_seconds or 0.0
TIMEOUT_MESSAGE = f"timeout: a execucao passou do limite de {LIMIT:g} s"


async def _machine(services: Services) -> MachineView:
    created = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="dedicated-timeout", automation=LIMITED
    )
    return created.machine


async def _running(services: Services, machine: MachineView, started_ago: float) -> tuple[int, str]:
    """A demo.timeout job ``machine`` claimed, its run started ``started_ago`` seconds ago."""
    api = await make_api(services)
    job = await api.dispatch(LIMITED, context={"seconds": 30})
    view = await claims.claim(services, machine, job["id"])
    assert view.task_id is not None
    async with services.db.session() as session:
        started = utcnow() - timedelta(seconds=started_ago)
        await session.execute(update(Job).where(Job.id == job["id"]).values(data_inicio=started))
    return job["id"], view.task_id


async def _row(services: Services, job_id: int) -> Job:
    async with services.db.reader() as session:
        row = await session.get(Job, job_id)
        assert row is not None
        return row


async def _attempts(services: Services, job_id: int) -> list[tuple[str | None, str | None]]:
    async with services.db.reader() as session:
        query = select(Attempt).where(Attempt.worker_id == job_id).order_by(Attempt.number)
        return [(a.outcome, a.error) for a in (await session.scalars(query)).all()]


def test_the_limits_of_a_task_message() -> None:
    assert celery_time_limits(AUTOMATION_REGISTRY[LIMITED].task_name) == (
        LIMIT + TIME_LIMIT_GRACE_SECONDS,
        LIMIT,
    )
    assert celery_time_limits(AUTOMATION_REGISTRY["demo.sleep"].task_name) == (None, None)
    assert celery_time_limits("probe.echo") == (None, None)
    assert "time_limits" in [periodic.name for periodic in _periodic()]


async def test_the_task_message_carries_the_automation_s_limits_as_celery_writes_them(
    redis_url: str, redis_prefix: str
) -> None:
    queue = f"{redis_prefix}-scan"
    gateway = BrokerGateway(Settings(queues={queue: 1}), redis_url)
    raw = redis.Redis.from_url(redis_url)
    limited = AUTOMATION_REGISTRY[LIMITED].task_name
    try:
        with gateway.app.producer_or_acquire() as producer:
            gateway.app.send_task(
                limited, args=[1], queue=queue, priority=0, task_id="celery", producer=producer,
                time_limit=LIMIT + TIME_LIMIT_GRACE_SECONDS, soft_time_limit=LIMIT,
            )  # fmt: skip
        await gateway.send(limited, queue=queue, priority=0, args=[1], task_id="ours")
        await gateway.send(AUTOMATION_REGISTRY["demo.sleep"].task_name, queue=queue, priority=0, args=[2])
        messages = [json.loads(m) for m in reversed(raw.lrange(priority_keys(queue)[0], 0, -1))]
        theirs, ours, unlimited = (m["headers"]["timelimit"] for m in messages)
        assert ours == theirs == [LIMIT + TIME_LIMIT_GRACE_SECONDS, LIMIT]
        assert unlimited == [None, None]
    finally:
        raw.delete(*priority_keys(queue))
        raw.close()
        await gateway.close()


async def test_a_run_past_its_limit_ends_falha_and_one_within_it_does_not(any_services: Services) -> None:
    services = any_services
    machine = await _machine(services)
    overdue, overdue_task = await _running(services, machine, LIMIT + TIME_LIMIT_GRACE_SECONDS + 1)
    within, _ = await _running(services, machine, LIMIT + TIME_LIMIT_GRACE_SECONDS - 2)

    assert [run.job_id for run in await overdue_runs(services)] == [overdue]
    timeouts = REGISTRY.get_sample_value("wa_timeouts_total", {"automation": LIMITED}) or 0.0
    assert await end_overdue_runs(services) == 1
    assert REGISTRY.get_sample_value("wa_timeouts_total", {"automation": LIMITED}) == timeouts + 1
    row = await _row(services, overdue)
    assert row.status == "FALHA" and row.mensagem_erro == TIMEOUT_MESSAGE
    assert row.result == {"exc_type": TIMEOUT_EXC_TYPE, "exc_message": TIMEOUT_MESSAGE, "traceback": None}
    assert row.retry_count == 0 and row.task_id == overdue_task and row.data_fim is not None
    assert await _attempts(services, overdue) == [("FALHA", TIMEOUT_MESSAGE)]
    assert (await _row(services, within)).status == "EXECUTANDO"
    async with services.db.reader() as session:
        audited = (await session.scalars(select(AuditEntry).where(AuditEntry.action == "time_limit"))).all()
    assert [(a.actor, a.target, a.result) for a in audited] == [("time_limits", f"worker:{overdue}", "ok")]

    # The machine's late reports of the timed-out run are refused: the timeout stays.
    with pytest.raises(Conflict):
        await claims.complete(services, machine, overdue, {"late": True}, overdue_task)
    with pytest.raises(Conflict):
        await claims.complete(services, machine, overdue, {"late": True})
    with pytest.raises(Conflict):
        await claims.report_progress(services, machine, overdue, 50)
    with pytest.raises(Conflict):
        await claims.fail(services, machine, overdue, "late", task_id=overdue_task)
    row = await _row(services, overdue)
    assert row.status == "FALHA" and row.mensagem_erro == TIMEOUT_MESSAGE
    assert await end_overdue_runs(services) == 0


async def test_a_job_that_moved_on_meanwhile_is_untouched(any_services: Services) -> None:
    services = any_services
    machine = await _machine(services)
    job_id, task_id = await _running(services, machine, LIMIT + TIME_LIMIT_GRACE_SECONDS + 1)
    (seen,) = await overdue_runs(services)
    # The run ends by itself between the look and the act.
    await claims.complete(services, machine, job_id, {"slept": 1}, task_id)
    assert await end_overdue_run(services, seen) is None
    row = await _row(services, job_id)
    assert row.status == "CONCLUIDO" and row.result == {"slept": 1}
    assert await _attempts(services, job_id) == [("CONCLUIDO", None)]


async def test_a_pool_run_past_its_limit_is_retried_by_its_policy(any_services: Services) -> None:
    services = any_services
    policy: dict[str, int | None] = {"max_attempts": 2, "retry_backoff_seconds": 60}
    await update_settings(services.db, LIMITED, actor=Actor("test"), retry_policy=policy)
    machine = await pool_machine(services)
    api = await make_api(services)
    job = await api.dispatch(LIMITED, context={"seconds": 30})
    await claims.claim(services, machine, job["id"], job["taskId"])
    async with services.db.session() as session:
        started = utcnow() - timedelta(seconds=LIMIT + TIME_LIMIT_GRACE_SECONDS + 1)
        await session.execute(update(Job).where(Job.id == job["id"]).values(data_inicio=started))

    assert await end_overdue_runs(services) == 1
    row = await _row(services, job["id"])
    assert row.status == "AGENDADO" and row.retry_count == 1 and row.task_id is None
    assert row.next_attempt_at is not None and row.next_attempt_at > utcnow()
    assert await _attempts(services, job["id"]) == [("FALHA", TIMEOUT_MESSAGE)]
    # The timed-out run's late report cannot touch the retry.
    with pytest.raises(Conflict):
        await claims.complete(services, machine, job["id"], {"late": True}, job["taskId"])
    assert (await _row(services, job["id"])).status == "AGENDADO"


async def test_a_timeout_reported_by_its_worker_is_counted(any_services: Services) -> None:
    services = any_services
    machine = await _machine(services)
    job_id, task_id = await _running(services, machine, 1)
    timeouts = REGISTRY.get_sample_value("wa_timeouts_total", {"automation": LIMITED}) or 0.0
    await claims.fail(services, machine, job_id, TIMEOUT_MESSAGE, TIMEOUT_EXC_TYPE, task_id=task_id)
    assert REGISTRY.get_sample_value("wa_timeouts_total", {"automation": LIMITED}) == timeouts + 1
    # Any other failure is not a timeout.
    other, other_task = await _running(services, machine, 1)
    await claims.fail(services, machine, other, "portal fora do ar", "RuntimeError", task_id=other_task)
    assert REGISTRY.get_sample_value("wa_timeouts_total", {"automation": LIMITED}) == timeouts + 1
