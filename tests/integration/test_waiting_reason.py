"""Why a queued job waits and where it stands: each reason from the state that causes it, a page
answered in one statement, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from tests.integration.operator_support import StatementCounter
from tests.unit.graphql_support import Api, make_api
from worker_automation.models import Job
from worker_automation.resolvers import claims, pauses, waiting
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.automations import update_settings
from worker_automation.resolvers.machines import register_machine
from worker_automation.resolvers.presence import machine_present
from worker_automation.resolvers.processes import ProcessView, watch_of
from worker_automation.resolvers.services import Services

WAITING = """
query($perPage: Int!) {
  workers(filter: {status: AGENDADO}, perPage: $perPage) { items { id waitingReason queuePosition } }
}
"""
ONE = "query($id: Int!) { worker(id: $id) { status waitingReason queuePosition } }"


async def _waiting(api: Api, per_page: int = 50) -> dict[int, tuple[str, int]]:
    data = await api.ok(WAITING, {"perPage": per_page})
    return {i["id"]: (i["waitingReason"], i["queuePosition"]) for i in data["workers"]["items"]}


async def _fresh(services: Services) -> None:
    # The processes are shared for a few seconds; a test changing them looks again at once.
    watch_of(services)._snapshot = None


async def test_each_waiting_reason_and_the_queue_position(embedded_broker_services: Services) -> None:
    # Each database with a broker of the test's own: no other test's worker answers on it.
    services = embedded_broker_services
    api = await make_api(services)
    registered = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="echo-box", automation="demo.echo"
    )
    machine = registered.machine
    await update_settings(services.db, "demo.echo", actor=CLI_ACTOR, max_concurrent_jobs=1)

    running = await api.dispatch("demo.echo")
    sleeper = await api.dispatch("demo.sleep", priority=5, context={"seconds": 1})
    second = await api.dispatch("demo.echo")
    third = await api.dispatch("demo.echo")
    failing = await api.dispatch("demo.fail")
    await update_settings(services.db, "demo.fail", actor=CLI_ACTOR, enabled=False)

    # Nobody is up: no pool worker consumes scan and no machine serves these automations.
    found = await _waiting(api)
    assert found[running["id"]] == ("NO_PROCESS_ON_QUEUE", 1)
    assert found[second["id"]] == ("NO_PROCESS_ON_QUEUE", 2)
    assert found[failing["id"]] == ("AUTOMATION_DISABLED", 4)

    # The machine subscribes (its presence) and runs one job: its automation is at its limit.
    presence = await machine_present(services, machine)
    try:
        await claims.claim(services, machine, running["id"], running["taskId"])
        await _fresh(services)
        found = await _waiting(api)
        assert running["id"] not in found
        assert found[second["id"]] == ("CONCURRENCY_LIMIT", 1)
        assert found[third["id"]] == ("CONCURRENCY_LIMIT", 2)
        assert found[failing["id"]] == ("AUTOMATION_DISABLED", 3)
        # Priority 5 runs after every priority 0 job of the queue; no process serves demo.sleep.
        assert found[sleeper["id"]] == ("NO_PROCESS_ON_QUEUE", 4)
        assert (await api.ok(ONE, {"id": running["id"]}))["worker"] == {
            "status": "EXECUTANDO",
            "waitingReason": None,
            "queuePosition": None,
        }

        # Room again: the next one is merely queued.
        await update_settings(services.db, "demo.echo", actor=CLI_ACTOR, max_concurrent_jobs=2)
        assert (await _waiting(api))[second["id"]] == ("QUEUED", 1)

        if hasattr(Job, "next_attempt_at"):
            from worker_automation.models import utcnow

            async with services.db.session() as session:
                later: Any = utcnow().replace(year=utcnow().year + 1)
                await session.execute(update(Job).where(Job.id == third["id"]).values(next_attempt_at=later))
            assert (await _waiting(api))[third["id"]][0] == "RETRY_BACKOFF"

        # A paused queue holds every job of it, whatever else applies (a disabled automation first).
        await pauses.pause_queue(services.db, services.settings.queues, CLI_ACTOR, "scan")
        found = await _waiting(api)
        assert {r for r, _ in found.values()} == {"QUEUE_PAUSED", "AUTOMATION_DISABLED"}
        assert found[second["id"]] == ("QUEUE_PAUSED", 1)
        assert (await api.ok(ONE, {"id": sleeper["id"]}))["worker"]["waitingReason"] == "QUEUE_PAUSED"
    finally:
        presence.close()

    # A page's reasons and positions are one statement whatever its size (no query per job).
    for per_page, shown in ((1, 1), (50, 4)):
        with StatementCounter(services) as counter:
            assert len(await _waiting(api, per_page=per_page)) == shown
        assert sum("queue_pauses" in s for s in counter.statements) == 1, counter.statements

    # Read with its page (all at once) or on its own (batched per operation), and by cursor: the
    # same answers.
    page = await _waiting(api)
    sliced = await api.ok(
        "{ workers(filter: {status: AGENDADO}, first: 50) { items { id waitingReason queuePosition } } }"
    )
    assert {i["id"]: (i["waitingReason"], i["queuePosition"]) for i in sliced["workers"]["items"]} == page
    for job_id, answer in page.items():
        one = (await api.ok(ONE, {"id": job_id}))["worker"]
        assert (one["waitingReason"], one["queuePosition"]) == answer


async def test_places_from_the_counters_match_a_full_ranking(
    embedded_broker_services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted from the front of its priority, from the back, or ranked when far from both ends:
    the same places as the backlog sorted in claim order, and they follow a change of priority."""
    services = embedded_broker_services
    api = await make_api(services)
    monkeypatch.setattr(waiting, "COUNT_CAP", 3)
    priorities = [0, 5, 0, 9, 0, 1, 0, 0, 5, 0, 2, 0, 1, 0]
    jobs = [(await api.dispatch("demo.echo", priority=p))["id"] for p in priorities]

    def claim_order(priority_of: dict[int, int]) -> dict[int, int]:
        # Priority, then age (ids grow with age here).
        return {job: place for place, job in enumerate(sorted(jobs, key=lambda j: (priority_of[j], j)), 1)}

    expected = claim_order(dict(zip(jobs, priorities, strict=True)))
    with StatementCounter(services) as counter:
        places = await waiting.waiting_of(services.db, jobs, _no_processes)
    assert {job_id: w.position for job_id, w in places.items()} == expected
    # Priority 0 holds 8 jobs: with a cap of 3, its 4th and 5th are 3 from both ends.
    assert sum("row_number" in s for s in counter.statements) == 1
    zeros = [job for job, p in zip(jobs, priorities, strict=True) if p == 0]
    ends = [job for job in jobs if job not in zeros[3:5]]
    with StatementCounter(services) as counter:
        places = await waiting.waiting_of(services.db, ends, _no_processes)
    assert {job_id: w.position for job_id, w in places.items()} == {j: expected[j] for j in ends}
    assert not any("row_number" in s for s in counter.statements)

    # A job moved to another priority moves in the counters too.
    moved = zeros[0]
    await api.ok("mutation($id: Int!) { reorderWorker(id: $id, newPriority: 9) { id } }", {"id": moved})
    expected = claim_order({**dict(zip(jobs, priorities, strict=True)), moved: 9})
    places = await waiting.waiting_of(services.db, jobs, _no_processes)
    assert {job_id: w.position for job_id, w in places.items()} == expected


async def _no_processes() -> list[ProcessView]:
    return []


async def test_a_page_of_waiting_jobs_is_read_on_the_driver(
    embedded_broker_services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the reasons and places of a page run on the driver's fast path (see
    ``Database.rows``) at the first try, not failing there and run again through SQLAlchemy."""
    services = embedded_broker_services
    api = await make_api(services)
    jobs = [(await api.dispatch("demo.echo"))["id"] for _ in range(3)]
    answered: list[bool] = []
    fetch = services.db._driver_fetch

    async def watched(sql: str, values: list[Any], engine: Any = None) -> Any:
        records = await fetch(sql, values, engine)
        answered.append(records is not None)
        return records

    monkeypatch.setattr(services.db, "_driver_fetch", watched)
    places = await waiting.waiting_of(services.db, jobs, _no_processes)
    assert {job_id: w.position for job_id, w in places.items()} == {job: n for n, job in enumerate(jobs, 1)}
    assert answered == ([True] if services.db.dialect == "postgresql" else [])
