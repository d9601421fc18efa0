"""Schedules: CRUD through GraphQL, one job per occurrence whoever fires it (two replicas racing
on PostgreSQL), missed occurrences fired once on return, every job linked to its schedule."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from tests.integration.harness import Stack, wait_until
from tests.integration.operator_support import any_services
from tests.unit.graphql_support import Api, make_api
from worker_automation.models import AuditEntry, Job, Schedule, utcnow
from worker_automation.resolvers.schedule_firing import fire_due
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]

FIELDS = (
    "id automationType cronValue: cron timezone enabled nextRunAt lastRunAt lastWorkerId context priority"
)
CREATE = f"mutation($i: ScheduleInput!) {{ createSchedule(input: $i) {{ {FIELDS} }} }}"
UPDATE = (
    f"mutation($id: Int!, $i: ScheduleUpdateInput!) {{ updateSchedule(id: $id, input: $i) {{ {FIELDS} }} }}"
)


async def _create(api: Api, **fields: Any) -> dict[str, Any]:
    data = await api.ok(CREATE, {"i": {"automationType": "demo.echo", "cron": "* * * * *", **fields}})
    created: dict[str, Any] = data["createSchedule"]
    return created


async def _jobs_of(services: Services, schedule_id: int) -> list[Job]:
    async with services.db.session() as session:
        rows = (await session.scalars(select(Job).order_by(Job.id))).all()
    return [r for r in rows if (r.metadata_json or {}).get("schedule_id") == schedule_id]


async def _next_run_at(services: Services, schedule_id: int) -> datetime:
    async with services.db.session() as session:
        row = await session.get(Schedule, schedule_id)
        assert row is not None and row.next_run_at is not None
        return row.next_run_at


async def test_schedule_crud_and_run_now(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    created = await _create(api, cron="0 6 * * 1-5", context={"value": 1}, priority=3)
    assert created["timezone"] == "America/Sao_Paulo" and created["enabled"] is True
    assert created["nextRunAt"].endswith("-03:00") and created["nextRunAt"][11:16] == "06:00"
    assert created["cronValue"] == "0 6 * * 1-5" and created["lastRunAt"] is None

    for fields, name in (
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * *"}, "cron"),
        ({"cron": "0 0 31 2 *"}, "cron"),  # never occurs
        # Text past the bound of every string argument is refused before the resolver runs,
        # named by its path in the variables.
        ({"cron": "x" * 5000}, "i.cron"),
        ({"timezone": "x" * 5000}, "i.timezone"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"automationType": "demo.sleep", "context": {"seconds": "x"}}, "context.seconds"),
        ({"priority": 12}, "priority"),
    ):
        error = await api.fails(CREATE, {"i": {"automationType": "demo.echo", "cron": "* * * * *", **fields}})
        assert error.extensions == {"code": "BAD_USER_INPUT", "field": name}, (fields, error)

    changed = await api.ok(UPDATE, {"id": created["id"], "i": {"cron": "30 7 * * *", "timezone": "UTC"}})
    assert changed["updateSchedule"]["nextRunAt"][11:16] == "04:30"  # 07:30 UTC shown at -03:00
    off = (await api.ok(UPDATE, {"id": created["id"], "i": {"enabled": False}}))["updateSchedule"]
    assert off["enabled"] is False and off["nextRunAt"] is None
    error = await api.fails(UPDATE, {"id": created["id"], "i": {"cron": "nope"}})
    assert error.extensions == {"code": "BAD_USER_INPUT", "field": "cron"}

    job = (
        await api.ok(
            "mutation($id: Int!) { runScheduleNow(id: $id) { id status metadataJson priority } }",
            {"id": created["id"]},
        )
    )["runScheduleNow"]
    assert job["status"] == "AGENDADO" and job["metadataJson"] == {"schedule_id": created["id"]}
    assert job["priority"] == 3
    listed = (await api.ok(f"{{ schedules {{ {FIELDS} }} }}"))["schedules"]
    assert [s["lastWorkerId"] for s in listed] == [job["id"]] and listed[0]["lastRunAt"]

    deleted = await api.ok("mutation($id: Int!) { deleteSchedule(id: $id) { id } }", {"id": created["id"]})
    assert deleted["deleteSchedule"]["id"] == created["id"]
    assert (await api.ok("{ schedules { id } }"))["schedules"] == []
    error = await api.fails("mutation { deleteSchedule(id: 999) { id } }")
    assert error.extensions and error.extensions["code"] == "NOT_FOUND"
    async with services.db.session() as session:
        actions = set((await session.scalars(select(AuditEntry.action))).all())
    assert {"create_schedule", "update_schedule", "delete_schedule", "run_schedule_now"} <= actions


async def test_two_replicas_fire_each_occurrence_once(services: Services) -> None:
    api = await make_api(services)
    created = await _create(api)
    other = await Services.start(services.settings, migrate_db=False)
    try:
        first = await _next_run_at(services, created["id"])
        for minute in range(5):
            tick = first + timedelta(minutes=minute, seconds=0.5)
            # Both replicas tick at the same moment, twice each, on their own connections.
            results = await asyncio.gather(*(fire_due(s, tick) for s in (services, other, other, services)))
            assert sum(results) == 1, (minute, results)
    finally:
        await other.close()
    jobs = await _jobs_of(services, created["id"])
    assert len(jobs) == 5
    assert await _next_run_at(services, created["id"]) == first + timedelta(minutes=5)
    async with services.db.session() as session:
        fired = await session.scalar(select(func.count()).where(AuditEntry.action == "schedule_fired"))
    assert fired == 5
    # Their tasks went to the broker.
    assert (await services.broker.queue_lengths())["scan"] == 5


async def test_missed_occurrences_fire_once_on_return(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    created = await _create(api)
    first = await _next_run_at(services, created["id"])
    # Down from before the first occurrence until two and a half minutes after it.
    back = first + timedelta(minutes=2, seconds=30)
    assert await fire_due(services, back) == 1
    assert await fire_due(services, back + timedelta(seconds=5)) == 0
    assert await _next_run_at(services, created["id"]) == first + timedelta(minutes=3)
    assert len(await _jobs_of(services, created["id"])) == 1

    # An occurrence that cannot make its job (automation disabled) is used up, not retried.
    await api.ok('mutation { updateAutomationSettings(key: "demo.echo", enabled: false) { key } }')
    assert await fire_due(services, first + timedelta(minutes=3, seconds=1)) == 0
    assert await _next_run_at(services, created["id"]) == first + timedelta(minutes=4)
    assert len(await _jobs_of(services, created["id"])) == 1


def test_serve_down_across_two_occurrences_fires_one_on_return(stack: Stack) -> None:
    """The real leader loop of `serve`: an hourly schedule whose last two occurrences passed while
    `serve` was down fires once when it is back, and the job runs on a pool worker."""
    assert stack.serve_proc is not None

    def graphql(query: str, variables: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = stack.http.post(
            "/graphql", json={"query": query, "variables": variables}, headers=stack.operator_headers
        ).json()
        assert not body.get("errors"), body
        data: dict[str, Any] = body["data"]
        return data

    schedule = graphql(CREATE, {"i": {"automationType": "demo.echo", "cron": "0 * * * *"}})["createSchedule"]
    stack.serve_proc.kill()
    # Down since before the occurrence of two hours ago.
    missed = utcnow().replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    stack.db._run(
        stack.db._conn.execute("UPDATE schedules SET next_run_at = $1 WHERE id = $2", missed, schedule["id"])
    )
    stack.serve()
    stack.pool_worker("scan")

    def fired() -> list[int] | None:
        rows = stack.db._run(
            stack.db._conn.fetch(
                "SELECT id, status FROM workers WHERE (metadata_json->>'schedule_id')::int = $1",
                schedule["id"],
            )
        )
        done = [int(r["id"]) for r in rows if r["status"] == "CONCLUIDO"]
        return done or None

    (job_id,) = wait_until(fired, 40, lambda: "the missed occurrence never fired")
    after = graphql("{ schedules { id nextRunAt lastWorkerId } }", {})["schedules"][0]
    assert after["lastWorkerId"] == job_id
    assert datetime.fromisoformat(after["nextRunAt"]) > utcnow()
    all_jobs = stack.db._run(stack.db._conn.fetchval("SELECT count(*) FROM workers"))
    assert all_jobs == 1
