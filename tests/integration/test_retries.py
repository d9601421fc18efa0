"""Automatic retries: a failed run with attempts left waits AGENDADO for its backoff (claims refuse
it before ``nextAttemptAt``), is sent when due under a new task id, and the last one ends FALHA
with ``retries_exhausted``; ``PermanentError`` skips them; a paused queue holds a due retry."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta

import pytest
from sqlalchemy import update

from tests.integration.operator_support import any_services, pool_machine
from tests.unit.graphql_support import Api, make_api
from worker_automation.catalog.registry import AUTOMATION_REGISTRY, Automation
from worker_automation.domain.errors import Conflict
from worker_automation.models import Job, utcnow
from worker_automation.resolvers import claims, retries
from worker_automation.resolvers.machines import MachineView
from worker_automation.resolvers.retries import backoff_seconds, schedule_send, send_due
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]

JOB = (
    "query($id: Int!) { worker(id: $id) { status taskId retryCount nextAttemptAt waitingReason "
    "mensagemErro attempts { number outcome error taskId } } }"
)
SETTINGS = (
    "mutation($key: String!, $n: Int, $base: Int, $cap: Int) { updateAutomationSettings(key: $key, "
    "maxAttempts: $n, retryBackoffSeconds: $base, retryBackoffMaxSeconds: $cap) "
    "{ maxAttempts retryBackoffSeconds retryBackoffMaxSeconds } }"
)


async def _policy(api: Api, n: int, base: int = 60, cap: int = 600) -> dict[str, int]:
    data = await api.ok(SETTINGS, {"key": "demo.echo", "n": n, "base": base, "cap": cap})
    return dict(data["updateAutomationSettings"])


async def _job(api: Api, job_id: int) -> dict[str, object]:
    return dict((await api.ok(JOB, {"id": job_id}))["worker"])


async def _failed_once(services: Services, api: Api, error: str) -> tuple[MachineView, int]:
    """A pool machine, and a demo.echo job whose first run it failed with ``error`` (attempts: 2)."""
    await _policy(api, 2)
    machine = await pool_machine(services)
    job = await api.dispatch("demo.echo")
    await claims.claim(services, machine, job["id"], job["taskId"])
    await claims.fail(services, machine, job["id"], error)
    return machine, job["id"]


async def _make_due(services: Services, job_id: int) -> None:
    async with services.db.session() as session:
        await session.execute(update(Job).where(Job.id == job_id).values(next_attempt_at=utcnow()))


@pytest.fixture(autouse=True)
def full_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each failure waits its whole backoff (a minute here): with full jitter the wait could be a
    fraction of a second, and the failure's own timer would then send the retry before a test
    looks at it."""

    def whole(automation: Automation, retry_count: int) -> float:
        return backoff_seconds(automation, retry_count, lambda: 1.0)

    monkeypatch.setattr(retries, "backoff_seconds", whole)


def test_backoff_is_exponential_capped_and_fully_jittered() -> None:
    automation = AUTOMATION_REGISTRY["demo.echo"]
    policy = dataclasses.replace(automation, retry_backoff_seconds=10, retry_backoff_max_seconds=60)
    assert [backoff_seconds(policy, n, lambda: 1.0) for n in range(4)] == [10, 20, 40, 60]
    assert backoff_seconds(policy, 2, lambda: 0.5) == 20
    assert backoff_seconds(policy, 9, lambda: 0.0) == 0


async def test_a_failed_run_waits_its_backoff_then_runs_under_a_new_task(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    policy = await _policy(api, 3)
    assert policy == {"maxAttempts": 3, "retryBackoffSeconds": 60, "retryBackoffMaxSeconds": 600}
    machine = await pool_machine(services)
    job = await api.dispatch("demo.echo")
    await claims.claim(services, machine, job["id"], job["taskId"])
    failed_at = utcnow()
    view = await claims.fail(services, machine, job["id"], "portal fora do ar")
    assert view.status == "AGENDADO" and view.retry_count == 1 and view.task_id is None

    data = await _job(api, job["id"])
    assert data["status"] == "AGENDADO" and data["waitingReason"] == "RETRY_BACKOFF"
    due_at = datetime.fromisoformat(str(data["nextAttemptAt"]))
    assert (
        failed_at.replace(microsecond=0) <= due_at <= failed_at.replace(microsecond=0) + timedelta(seconds=61)
    )
    attempts = data["attempts"]
    assert isinstance(attempts, list) and [(a["outcome"], a["error"]) for a in attempts] == [
        ("FALHA", "portal fora do ar")
    ]
    # Not due: nothing sends it, and a claim is refused.
    assert not await send_due(services, job["id"])
    with pytest.raises(Conflict) as refused:
        await claims.claim(services, machine, job["id"])
    assert refused.value.details.get("next_attempt_at")
    assert [j.id for j in await claims.pending_jobs(services, machine, None)] == []

    await _make_due(services, job["id"])
    assert await send_due(services, job["id"])
    data = await _job(api, job["id"])
    new_task = data["taskId"]
    assert isinstance(new_task, str) and new_task != job["taskId"]
    assert data["waitingReason"] != "RETRY_BACKOFF" and data["nextAttemptAt"] is not None
    assert not await send_due(services, job["id"])  # sent once
    await claims.claim(services, machine, job["id"], new_task)
    await claims.complete(services, machine, job["id"], {"ok": True}, new_task)
    data = await _job(api, job["id"])
    assert data["status"] == "CONCLUIDO" and data["retryCount"] == 1


async def test_a_timer_woken_before_the_retry_is_due_waits_out_the_rest(any_services: Services) -> None:
    """The timer sleeps on the loop's clock and the row's time is on the wall clock: when they
    drift apart, the timer wakes early, and it must still send the retry once due."""
    services = any_services
    api = await make_api(services)
    _, job_id = await _failed_once(services, api, "fora do ar")
    due_at = utcnow() + timedelta(seconds=0.4)
    async with services.db.session() as session:
        await session.execute(update(Job).where(Job.id == job_id).values(next_attempt_at=due_at))
    loop = asyncio.get_running_loop()
    for timer in list(retries._PENDING):  # the failure's own timer, which could send it instead
        if timer.get_loop() is loop:
            timer.cancel()
    schedule_send(services, job_id, 0.0)  # woken 0.4 s early
    for _ in range(100):
        data = await _job(api, job_id)
        if data["taskId"] is not None:
            break
        await asyncio.sleep(0.05)
    assert data["taskId"] is not None, "the retry was never sent"


async def test_exhausted_and_permanent_failures_end_falha(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    machine, job_id = await _failed_once(services, api, "primeira")
    await _make_due(services, job_id)
    assert await send_due(services, job_id)
    task = (await _job(api, job_id))["taskId"]
    await claims.claim(services, machine, job_id, str(task))
    view = await claims.fail(services, machine, job_id, "segunda", task_id=str(task))
    assert view.status == "FALHA" and view.mensagem_erro == "retries_exhausted: segunda"
    data = await _job(api, job_id)
    attempts = data["attempts"]
    assert isinstance(attempts, list)
    assert [(a["outcome"], a["error"]) for a in attempts] == [
        ("FALHA", "primeira"),
        ("FALHA", "retries_exhausted: segunda"),
    ]

    permanent = await api.dispatch("demo.echo")
    await claims.claim(services, machine, permanent["id"], permanent["taskId"])
    view = await claims.fail(services, machine, permanent["id"], "CNPJ invalido", exc_type="PermanentError")
    assert view.status == "FALHA" and view.retry_count == 0 and view.mensagem_erro == "CNPJ invalido"


async def test_a_paused_queue_holds_a_due_retry_and_bad_settings_are_refused(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    machine, job_id = await _failed_once(services, api, "fora do ar")
    await api.ok('mutation { pauseQueue(queue: "scan") { queue } }')
    await _make_due(services, job_id)
    assert await send_due(services, job_id)
    data = await _job(api, job_id)
    assert data["waitingReason"] == "QUEUE_PAUSED"
    with pytest.raises(Conflict) as refused:
        await claims.claim(services, machine, job_id, str(data["taskId"]))
    assert refused.value.details.get("reason") == "queue_paused"
    await api.ok('mutation { resumeQueue(queue: "scan") { queue } }')
    claimed = await claims.claim(services, machine, job_id, str(data["taskId"]))
    assert claimed.status == "EXECUTANDO"

    error = await api.fails(SETTINGS, {"key": "demo.echo", "n": 0})
    assert (error.extensions or {}).get("field") == "max_attempts"


async def test_a_retry_waiting_its_backoff_keeps_waiting_when_reordered(any_services: Services) -> None:
    from worker_automation.resolvers import job_actions
    from worker_automation.resolvers.audit import CLI_ACTOR

    services = any_services
    api = await make_api(services)
    machine, job_id = await _failed_once(services, api, "fora do ar")

    view = await job_actions.reorder(services, CLI_ACTOR, job_id, 3)

    # Nothing was sent: the retry still waits for its next attempt, now with the new priority.
    assert view.priority == 3 and view.task_id is None
    data = await _job(api, job_id)
    assert data["waitingReason"] == "RETRY_BACKOFF" and data["nextAttemptAt"] is not None
    await _make_due(services, job_id)
    assert await send_due(services, job_id)
    sent = await _job(api, job_id)
    claimed = await claims.claim(services, machine, job_id, str(sent["taskId"]))
    assert claimed.status == "EXECUTANDO" and claimed.priority == 3


async def test_the_same_action_sent_many_times_at_once_is_done_once(any_services: Services) -> None:
    """Ten retries of one cancelled job at once: one queues it, the others find it queued (409),
    on SQLite as on PostgreSQL; ten cancels of the queued job: one cancels it."""
    from worker_automation.resolvers import job_actions
    from worker_automation.resolvers.audit import CLI_ACTOR

    services = any_services
    api = await make_api(services)
    job = await api.dispatch("demo.echo")
    await job_actions.cancel(services, CLI_ACTOR, job["id"])
    for act, done_status in ((job_actions.retry, "AGENDADO"), (job_actions.cancel, "CANCELADO")):
        outcomes = await asyncio.gather(
            *(act(services, CLI_ACTOR, job["id"]) for _ in range(10)), return_exceptions=True
        )
        done = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(done) == 1, outcomes
        assert all(isinstance(o, Conflict) for o in outcomes if isinstance(o, BaseException)), outcomes
        assert done[0].status == done_status
    data = await _job(api, job["id"])
    assert data["status"] == "CANCELADO" and data["retryCount"] == 1
