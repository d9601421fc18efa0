"""An admin's time limit: ``updateAutomationSettings(timeoutSeconds:)`` gives an automation a limit
or takes it away (0), bad values change nothing, and the new limit is the one every enforcer uses:
the task messages sent after it, a dedicated machine's claim answer and the leader's check."""

from __future__ import annotations

import json
from datetime import timedelta

from redis.asyncio import Redis
from sqlalchemy import update

from tests.integration.operator_support import any_services
from tests.unit.graphql_support import Api, make_api
from worker_automation.broker.queues import priority_keys
from worker_automation.catalog.registry import AUTOMATION_REGISTRY, TIME_LIMIT_GRACE_SECONDS
from worker_automation.models import Job, utcnow
from worker_automation.resolvers import claims
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.machines import register_machine
from worker_automation.resolvers.services import Services
from worker_automation.resolvers.time_limits import overdue_runs

__all__ = ["any_services"]

SET = """mutation ($key: String!, $seconds: Float) {
  updateAutomationSettings(key: $key, timeoutSeconds: $seconds) { key timeoutSeconds maxAttempts }
}"""
READ = "{ automations { key timeoutSeconds } }"
UNLIMITED = "demo.sleep"
LIMITED = "demo.timeout"
REGISTRY_LIMIT = AUTOMATION_REGISTRY[LIMITED].timeout_seconds


async def _limits(api: Api) -> dict[str, float | None]:
    rows = (await api.ok(READ))["automations"]
    return {row["key"]: row["timeoutSeconds"] for row in rows}


async def test_an_admin_gives_a_limit_and_takes_it_away(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    assert AUTOMATION_REGISTRY[UNLIMITED].timeout_seconds is None and REGISTRY_LIMIT is not None

    given = await api.ok(SET, {"key": UNLIMITED, "seconds": 45.5})
    assert given["updateAutomationSettings"] == {"key": UNLIMITED, "timeoutSeconds": 45.5, "maxAttempts": 1}
    removed = await api.ok(SET, {"key": LIMITED, "seconds": 0})
    assert removed["updateAutomationSettings"]["timeoutSeconds"] is None
    limits = await _limits(api)
    assert limits[UNLIMITED] == 45.5 and limits[LIMITED] is None
    # Other settings left out of a later change keep the limit.
    await api.ok('mutation { updateAutomationSettings(key: "demo.sleep", maxAttempts: 2) { key } }')
    assert (await _limits(api))[UNLIMITED] == 45.5

    for bad in (-1, 86400.5):
        error = await api.fails(SET, {"key": UNLIMITED, "seconds": bad})
        assert error.extensions is not None and error.extensions["field"] == "timeout_seconds"
        assert "timeout_seconds deve estar entre 0 e 86400" in error.message
    assert (await _limits(api))[UNLIMITED] == 45.5
    # Only managers change them.
    refused = await api.fails(SET, {"key": UNLIMITED, "seconds": 5}, caller="operator")
    assert refused.extensions is not None and refused.extensions["code"] == "FORBIDDEN"
    assert (await _limits(api))[UNLIMITED] == 45.5


async def test_the_tasks_sent_after_a_change_carry_the_new_limit(services: Services) -> None:
    api = await make_api(services)
    await api.ok(SET, {"key": UNLIMITED, "seconds": 30})
    await api.ok(SET, {"key": LIMITED, "seconds": 0})
    sleeping = await api.dispatch(UNLIMITED, context={"seconds": 1})
    unlimited = await api.dispatch(LIMITED, context={"seconds": 1})
    raw = Redis.from_url(services.redis_url)
    try:
        headers = {}
        for queue in {sleeping["queue"], unlimited["queue"]}:
            for message in await raw.lrange(priority_keys(queue)[0], 0, -1):
                header = json.loads(message)["headers"]
                headers[header["id"]] = header["timelimit"]
    finally:
        await raw.aclose()
    assert headers[sleeping["taskId"]] == [30 + TIME_LIMIT_GRACE_SECONDS, 30]
    assert headers[unlimited["taskId"]] == [None, None]


async def test_a_machine_and_the_leader_use_the_new_limit(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    machine = (
        await register_machine(
            services.db, CLI_ACTOR, services.settings.queues, name="dedicated-sleep", automation=UNLIMITED
        )
    ).machine
    job = await api.dispatch(UNLIMITED, context={"seconds": 30})
    await claims.claim(services, machine, job["id"])
    async with services.db.session() as session:
        started = utcnow() - timedelta(seconds=20 + TIME_LIMIT_GRACE_SECONDS + 1)
        await session.execute(update(Job).where(Job.id == job["id"]).values(data_inicio=started))
    assert await overdue_runs(services) == []

    await api.ok(SET, {"key": UNLIMITED, "seconds": 20})
    assert [run.job_id for run in await overdue_runs(services)] == [job["id"]]
    assert (await services.time_limits.current(services.db))[UNLIMITED] == 20
    await api.ok(SET, {"key": UNLIMITED, "seconds": 0})
    assert await overdue_runs(services) == []
