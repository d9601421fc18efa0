"""Claims under contention on real PostgreSQL: one winner per job, the limit never exceeded, and
every refusal carries the right reason (resolver and HTTP), plus each single refusal case."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, func, select, update

from tests.support.settings import MakeSettings
from worker_automation.asgi.app import create_app
from worker_automation.domain.errors import Conflict, NotFound
from worker_automation.models import AutomationSetting, Job, JobStatus
from worker_automation.resolvers import claims
from worker_automation.resolvers.audit import CLI_ACTOR, Actor
from worker_automation.resolvers.automations import update_settings
from worker_automation.resolvers.machines import MachineView, register_machine, set_machine_status
from worker_automation.resolvers.services import Services

pytestmark = pytest.mark.services

LIMIT = 5
CLAIMERS = 64
# Each round costs 64 serialised claim attempts and admits at most LIMIT winners; 60 jobs keep it
# to a dozen rounds (the bench runs the 10,000-job version).
JOBS = 60
# Jobs still AGENDADO offered to the claimers each round, and running jobs kept between rounds
# (so every round starts with some slots taken and ends at the limit).
FRESH_PER_ROUND = 8
KEEP_RUNNING = 1
CLAIMED = "claimed"


async def add_jobs(services: Services, count: int, automation: str = "demo.sleep") -> list[int]:
    """AGENDADO rows inserted directly (no broker message: only claims matter here)."""
    async with services.db.session() as session:
        rows = [
            Job(
                task_id=None,
                status=JobStatus.AGENDADO.value,
                automation_type=automation,
                queue="scan",
                priority=0,
                retry_count=0,
                progress=0,
                context={"seconds": 1},
            )
            for _ in range(count)
        ]
        session.add_all(rows)
        await session.flush()
        return [r.id for r in rows]


async def machines_for(
    services: Services, count: int, *, automation: str | None = "demo.sleep", queue: str | None = None
) -> list[MachineView]:
    made = []
    for n in range(count):
        created = await register_machine(
            services.db,
            CLI_ACTOR,
            services.settings.queues,
            name=f"claimer-{automation or queue}-{n}",
            automation=automation,
            queue=queue,
        )
        made.append(created.machine)
    return made


async def statuses(services: Services, ids: list[int]) -> dict[int, tuple[str, int | None]]:
    async with services.db.session() as session:
        rows = await session.execute(select(Job.id, Job.status, Job.machine_id).where(Job.id.in_(ids)))
        return {r.id: (r.status, r.machine_id) for r in rows}


async def running_count(services: Services, automation: str = "demo.sleep") -> int:
    async with services.db.session() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(Job)
            .where(Job.automation_type == automation, Job.status == JobStatus.EXECUTANDO.value)
        )
        return int(count or 0)


async def row_of(services: Services, job_id: int) -> dict[str, Any]:
    """Every column of the row, to prove a refused operation changed nothing."""
    async with services.db.session() as session:
        row = await session.get(Job, job_id, populate_existing=True)
        assert row is not None
        return {c.key: getattr(row, c.key) for c in Job.__mapper__.column_attrs}


async def try_claim(services: Services, machine: MachineView, job_id: int) -> str:
    try:
        await claims.claim(services, machine, job_id)
    except Conflict as exc:
        return str(exc.details["reason"])
    return CLAIMED


def check_round(
    attempts: list[tuple[int, int]],
    outcomes: list[str],
    already_running: set[int],
    after: dict[int, tuple[str, int | None]],
) -> dict[int, int]:
    """The winners of one round (job -> machine) after checking every outcome's reason."""
    winners: dict[int, int] = {}
    for (machine_id, job_id), outcome in zip(attempts, outcomes, strict=True):
        if outcome == CLAIMED:
            assert job_id not in winners, f"job {job_id} claimed twice in one round"
            assert job_id not in already_running, f"running job {job_id} claimed again"
            winners[job_id] = machine_id
    for (_machine_id, job_id), outcome in zip(attempts, outcomes, strict=True):
        status, holder = after[job_id]
        if job_id in winners:
            assert status == JobStatus.EXECUTANDO.value and holder == winners[job_id]
            if outcome != CLAIMED:
                assert outcome == "already_claimed", (job_id, outcome)
        elif job_id in already_running:
            assert outcome == "already_claimed", (job_id, outcome)
        else:
            # Nobody got it this round: the only legitimate reason is the limit.
            assert status == JobStatus.AGENDADO.value and holder is None
            assert outcome == "concurrency_limit", (job_id, outcome)
    return winners


async def test_64_claimers_never_double_claim_nor_exceed_the_limit(services: Services) -> None:
    await update_settings(services.db, "demo.sleep", actor=Actor("test"), max_concurrent_jobs=LIMIT)
    machines = await machines_for(services, CLAIMERS)
    by_id = {m.id: m for m in machines}
    pending = await add_jobs(services, JOBS)
    claimed_by: dict[int, int] = {}
    running: list[int] = []
    reasons: Counter[str] = Counter()
    rounds = 0
    while pending or running:
        rounds += 1
        offered = pending[:FRESH_PER_ROUND] + running[:2]
        attempts = [(m.id, offered[i % len(offered)]) for i, m in enumerate(machines)]
        outcomes = await asyncio.gather(*(try_claim(services, by_id[m], j) for m, j in attempts))
        after = await statuses(services, offered)
        winners = check_round(attempts, list(outcomes), set(running), after)
        reasons.update(outcomes)
        for job_id, machine_id in winners.items():
            assert job_id not in claimed_by, f"job {job_id} claimed a second time"
            claimed_by[job_id] = machine_id
            pending.remove(job_id)
            running.append(job_id)
        now_running = await running_count(services)
        assert now_running == len(running) <= LIMIT
        if pending and len(offered) > len(running):
            assert now_running == LIMIT, "a claim was refused while there was room"
        # Finish all but the newest, by their holders (every seventh one fails).
        finish = running if not pending else running[:-KEEP_RUNNING]
        for job_id in list(finish):
            holder = by_id[claimed_by[job_id]]
            if job_id % 7 == 0:
                await claims.fail(services, holder, job_id, "erro de teste")
            else:
                await claims.complete(services, holder, job_id, {"ok": job_id})
            running.remove(job_id)
        assert rounds < JOBS, "no progress"
    assert sorted(claimed_by) == sorted(set(claimed_by))
    assert len(claimed_by) == JOBS
    final = await statuses(services, list(claimed_by))
    assert all(s in (JobStatus.CONCLUIDO.value, JobStatus.FALHA.value) for s, _ in final.values())
    assert all(final[j][1] == m for j, m in claimed_by.items())
    assert reasons[CLAIMED] == JOBS
    assert reasons["already_claimed"] > 0 and reasons["concurrency_limit"] > 0
    assert set(reasons) == {CLAIMED, "already_claimed", "concurrency_limit"}


@pytest.fixture
async def client(
    services: Services, pg_database_url: str, redis_url: str, make_settings: MakeSettings
) -> AsyncIterator[httpx.AsyncClient]:
    """The served app on the same database as ``services`` (a second process would be the same)."""
    app = create_app(make_settings(pg_database_url, redis_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            yield http


async def test_64_claimers_over_http(services: Services, client: httpx.AsyncClient) -> None:
    await update_settings(services.db, "demo.sleep", actor=Actor("test"), max_concurrent_jobs=LIMIT)
    keys: list[str] = []
    for n in range(CLAIMERS):
        created = await register_machine(
            services.db, CLI_ACTOR, services.settings.queues, name=f"http-{n}", automation="demo.sleep"
        )
        keys.append(created.api_key)
    jobs = await add_jobs(services, 3 * LIMIT)
    holder_key: dict[int, str] = {}
    for _ in range(3):
        offered = [j for j in jobs if j not in holder_key][:FRESH_PER_ROUND]
        calls = [(key, offered[i % len(offered)]) for i, key in enumerate(keys)]
        responses = await asyncio.gather(
            *(client.post(f"/api/v1/jobs/{j}/start", headers={"X-Worker-Api-Key": k}) for k, j in calls)
        )
        won: dict[int, str] = {}
        for (key, job_id), response in zip(calls, responses, strict=True):
            body = response.json()
            if response.status_code == 200:
                assert job_id not in won, f"job {job_id} claimed twice"
                assert body["data"]["status"] == "EXECUTANDO"
                won[job_id] = key
            else:
                assert response.status_code == 409, response.text
                assert body["status"] == "error" and body["data"]["reason"] in (
                    "already_claimed",
                    "concurrency_limit",
                ), body
        after = await statuses(services, offered)
        for (_key, job_id), response in zip(calls, responses, strict=True):
            if response.status_code == 409:
                expected = "already_claimed" if job_id in won else "concurrency_limit"
                assert response.json()["data"]["reason"] == expected, (job_id, after[job_id])
        assert len(won) == LIMIT
        assert await running_count(services) == LIMIT
        holder_key.update(won)
        for job_id, key in won.items():
            done = await client.post(
                f"/api/v1/jobs/{job_id}/complete",
                json={"result": {"n": job_id}},
                headers={"X-Worker-Api-Key": key},
            )
            assert done.status_code == 200, done.text
    assert sorted(holder_key) == jobs
    final = await statuses(services, jobs)
    assert all(status == JobStatus.CONCLUIDO.value for status, _ in final.values())


async def test_a_claim_waiting_for_the_settings_lock_counts_the_jobs_started_meanwhile(
    services: Services,
) -> None:
    """The claim counts the running jobs only once it holds its automation's settings row: a job
    that started under another claim's lock takes the last slot, and the waiting claim is refused
    instead of exceeding the limit."""
    await update_settings(services.db, "demo.sleep", actor=Actor("test"), max_concurrent_jobs=1)
    (machine,) = await machines_for(services, 1)
    first, second = await add_jobs(services, 2)
    async with services.db.transaction() as other_claim:
        lock = select(AutomationSetting.key).where(AutomationSetting.key == "demo.sleep").with_for_update()
        await other_claim.execute(lock)
        started = {"status": JobStatus.EXECUTANDO.value, "machine_id": machine.id}
        await other_claim.execute(update(Job).where(Job.id == first).values(**started))
        waiting = asyncio.create_task(try_claim(services, machine, second))
        await asyncio.sleep(0.3)
        assert not waiting.done(), "the claim did not wait for the settings row"
    assert await waiting == "concurrency_limit"
    assert (await statuses(services, [first, second])) == {
        first: (JobStatus.EXECUTANDO.value, machine.id),
        second: (JobStatus.AGENDADO.value, None),
    }
    assert await running_count(services) == 1


async def test_dev_mode_refuses_and_changes_nothing(services: Services) -> None:
    (machine,) = await machines_for(services, 1)
    (job_id,) = await add_jobs(services, 1)
    await update_settings(services.db, "demo.sleep", actor=Actor("test"), dev_mode=True)
    before = await row_of(services, job_id)
    with pytest.raises(Conflict) as refused:
        await claims.claim(services, machine, job_id)
    assert refused.value.details["reason"] == "dev_mode"
    assert await row_of(services, job_id) == before
    await update_settings(services.db, "demo.sleep", actor=Actor("test"), dev_mode=False)
    assert (await claims.claim(services, machine, job_id)).status == "EXECUTANDO"


async def test_a_disabled_automation_holds_its_queued_jobs_until_enabled(services: Services) -> None:
    from worker_automation.domain.vocabulary import PASSING_REFUSALS
    from worker_automation.worker.pool import RETRIED_REFUSALS

    (machine,) = await machines_for(services, 1)
    (job_id,) = await add_jobs(services, 1)
    await update_settings(services.db, "demo.sleep", actor=Actor("test"), enabled=False)
    before = await row_of(services, job_id)
    with pytest.raises(Conflict) as refused:
        await claims.claim(services, machine, job_id)
    # A refusal that passes: a pool worker keeps the message and tries again later.
    reason = refused.value.details["reason"]
    assert reason == "automation_disabled"
    assert reason in PASSING_REFUSALS and reason in RETRIED_REFUSALS
    assert await row_of(services, job_id) == before
    await update_settings(services.db, "demo.sleep", actor=Actor("test"), enabled=True)
    assert (await claims.claim(services, machine, job_id)).status == "EXECUTANDO"


async def test_machine_off_refuses_and_changes_nothing(services: Services) -> None:
    (machine,) = await machines_for(services, 1)
    (job_id,) = await add_jobs(services, 1)
    off = await set_machine_status(services.db, CLI_ACTOR, machine.id, False)
    before = await row_of(services, job_id)
    with pytest.raises(Conflict) as refused:
        await claims.claim(services, off, job_id)
    assert refused.value.details["reason"] == "machine_off"
    assert await row_of(services, job_id) == before
    on = await set_machine_status(services.db, CLI_ACTOR, machine.id, True)
    assert (await claims.claim(services, on, job_id)).machine_id == machine.id


async def test_wrong_automation_or_queue_refuses_and_changes_nothing(services: Services) -> None:
    (echo_machine,) = await machines_for(services, 1, automation="demo.echo")
    (certidao_pool,) = await machines_for(services, 1, automation=None, queue="certidao")
    (scan_pool,) = await machines_for(services, 1, automation=None, queue="scan")
    (job_id,) = await add_jobs(services, 1)
    before = await row_of(services, job_id)
    for machine in (echo_machine, certidao_pool):
        with pytest.raises(Conflict) as refused:
            await claims.claim(services, machine, job_id)
        assert refused.value.details["reason"] == "wrong_automation"
        assert await row_of(services, job_id) == before
    # A pool worker of the job's queue serves any automation on it.
    assert (await claims.claim(services, scan_pool, job_id)).machine_id == scan_pool.id


async def test_claim_without_a_settings_row_uses_the_registry_and_a_missing_job_is_not_found(
    services: Services,
) -> None:
    (machine,) = await machines_for(services, 1)
    first, second = await add_jobs(services, 2)
    async with services.db.session() as session:
        await session.execute(delete(AutomationSetting).where(AutomationSetting.key == "demo.sleep"))
    # The registry's own limit and flags apply: the job is claimed as before.
    assert (await claims.claim(services, machine, first)).status == "EXECUTANDO"
    await update_settings(services.db, "demo.sleep", actor=Actor("test"), dev_mode=True)
    with pytest.raises(Conflict) as refused:
        await claims.claim(services, machine, second)
    assert refused.value.details["reason"] == "dev_mode"
    with pytest.raises(NotFound):
        await claims.claim(services, machine, second + 1000)


async def test_finished_job_is_not_claimable(services: Services) -> None:
    first, second = await machines_for(services, 2)
    done_id, failed_id = await add_jobs(services, 2)
    await claims.claim(services, first, done_id)
    await claims.complete(services, first, done_id, {"ok": True})
    await claims.claim(services, first, failed_id)
    await claims.fail(services, first, failed_id, "quebrou")
    for job_id in (done_id, failed_id):
        before = await row_of(services, job_id)
        for machine in (first, second):
            with pytest.raises(Conflict) as refused:
                await claims.claim(services, machine, job_id)
            assert refused.value.details["reason"] == "not_claimable"
        assert await row_of(services, job_id) == before


async def test_complete_or_fail_by_another_machine_changes_nothing(services: Services) -> None:
    holder, other = await machines_for(services, 2)
    (job_id,) = await add_jobs(services, 1)
    await claims.claim(services, holder, job_id)
    await claims.report_progress(services, holder, job_id, 40)
    before = await row_of(services, job_id)
    with pytest.raises(Conflict):
        await claims.complete(services, other, job_id, {"stolen": True})
    with pytest.raises(Conflict):
        await claims.fail(services, other, job_id, "not mine")
    with pytest.raises(Conflict):
        await claims.report_progress(services, other, job_id, 90)
    assert await row_of(services, job_id) == before
    done = await claims.complete(services, holder, job_id, {"mine": True})
    assert done.status == "CONCLUIDO" and done.result == {"mine": True}
    # And once finished, even the holder cannot report again.
    with pytest.raises(Conflict):
        await claims.fail(services, holder, job_id, "late")
    assert (await row_of(services, job_id))["status"] == "CONCLUIDO"
