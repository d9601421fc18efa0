"""Pausing a queue: jobs accepted, none claimed (refusal ``queue_paused``), the state kept in the
database; on resume the jobs run by themselves, each exactly once (real pool worker)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.graphql_ws_support import GqlSubscription, serve
from tests.integration.harness import Stack
from tests.integration.operator_support import any_services, pool_machine
from tests.support.settings import MakeSettings
from tests.unit.graphql_support import make_api
from worker_automation.domain.errors import Conflict
from worker_automation.resolvers import claims
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]

PAUSE = "mutation($q: String!) { pauseQueue(queue: $q) { queue paused pausedAt pausedBy } }"
RESUME = "mutation($q: String!) { resumeQueue(queue: $q) { queue paused pausedAt } }"
LIVE = "{ queueLiveStatus { queues { queueName paused } } dashboard { queues { queueName paused } } }"


async def test_paused_queue_refuses_claims_until_resumed(
    any_services: Services, make_settings: MakeSettings
) -> None:
    services = any_services
    api = await make_api(services)
    machine = await pool_machine(services)
    paused = (await api.ok(PAUSE, {"q": "scan"}))["pauseQueue"]
    assert paused["paused"] is True and paused["pausedBy"].endswith("admin") and paused["pausedAt"]
    job = await api.dispatch("demo.echo")  # accepted
    with pytest.raises(Conflict) as refused:
        await claims.claim(services, machine, job["id"], job["taskId"])
    assert refused.value.details["reason"] == "queue_paused"

    live = await api.ok(LIVE)
    for section in (live["queueLiveStatus"], live["dashboard"]):
        assert {q["queueName"]: q["paused"] for q in section["queues"]}["scan"] is True
        assert {q["queueName"]: q["paused"] for q in section["queues"]}["certidao"] is False

    # Another process of the service (a restart, a replica) sees the same pause.
    from worker_automation.resolvers.services import Services as Fresh

    other = await Fresh.start(services.settings, migrate_db=False)
    try:
        with pytest.raises(Conflict):
            await claims.claim(other, machine, job["id"], job["taskId"])
    finally:
        await other.close()

    # Pausing again changes nothing; only managers may pause.
    assert (await api.ok(PAUSE, {"q": "scan"}))["pauseQueue"]["pausedAt"] == paused["pausedAt"]
    error = await api.fails(PAUSE, {"q": "scan"}, caller="operator")
    assert error.extensions and error.extensions["code"] == "FORBIDDEN"
    error = await api.fails(PAUSE, {"q": "nope"})
    assert error.extensions and error.extensions["code"] == "BAD_USER_INPUT"

    resumed = (await api.ok(RESUME, {"q": "scan"}))["resumeQueue"]
    assert resumed == {"queue": "scan", "paused": False, "pausedAt": None}
    assert (await claims.claim(services, machine, job["id"], job["taskId"])).status == "EXECUTANDO"


def _graphql(stack: Stack, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    response = stack.http.post(
        "/graphql", json={"query": query, "variables": variables}, headers=stack.operator_headers
    )
    body: dict[str, Any] = response.json()
    assert response.status_code == 200 and not body.get("errors"), body
    data: dict[str, Any] = body["data"]
    return data


def test_pause_dispatch_resume_runs_the_job_exactly_once(stack: Stack) -> None:
    _graphql(stack, PAUSE, {"q": "scan"})
    stack.pool_worker("scan")
    job_id = stack.dispatch("demo.echo", {"value": 1})
    # The worker hears the job and is refused: the job stays queued.
    time.sleep(3.0)
    assert stack.db.job(job_id)["status"] == "AGENDADO"
    _graphql(stack, RESUME, {"q": "scan"})
    stack.wait_status(job_id, "CONCLUIDO", timeout=40)
    time.sleep(2.0)  # a second run (a duplicate message) would show up as a second attempt
    attempts = _graphql(
        stack, "query($id: Int!) { worker(id: $id) { attempts { number outcome } } }", {"id": job_id}
    )["worker"]["attempts"]
    assert attempts == [{"number": 1, "outcome": "CONCLUIDO"}]


def test_a_dedicated_machine_runs_the_paused_job_after_resume(stack: Stack) -> None:
    _graphql(stack, PAUSE, {"q": "scan"})
    machine = stack.machine("demo.echo")
    assert stack.serve_proc is not None
    # The machine hears new jobs once its jobCreated subscription is up.
    stack.serve_proc.wait_for_output("connection open", timeout=20)
    time.sleep(1.0)
    job_id = stack.dispatch("demo.echo", {"value": 3})
    machine.wait_for_output("queue_paused", timeout=20)
    assert stack.db.job(job_id)["status"] == "AGENDADO"
    # The machine's sweeps leave a paused queue's jobs out (nothing to be refused again and again).
    pending = stack.http.get(
        "/api/v1/jobs/pending", headers={"X-Worker-Api-Key": stack.register_machine(automation="demo.echo")}
    )
    assert pending.status_code == 200 and pending.json()["data"] == [], pending.text
    resumed = time.monotonic()
    _graphql(stack, RESUME, {"q": "scan"})
    # Sent to the machine on resume, not left to its periodic sweep (every 30 s).
    stack.wait_status(job_id, "CONCLUIDO", timeout=45)
    assert time.monotonic() - resumed < 10


# A pause or resume reaches the live views of the queues at once, not at the next job event.
PUSH_WITHIN = 3.0
LOAD_PAUSED = "subscription { queueLoad { queues { queueName paused } } }"
BOARD_PAUSED = "subscription { dashboard { queues { queueName paused } } }"
EVENT_KINDS = "subscription { workerEvents { kind worker { id } } }"


def _scan_paused(payload: dict[str, Any], root: str) -> bool:
    return bool(next(q["paused"] for q in payload[root]["queues"] if q["queueName"] == "scan"))


@pytest.mark.services
async def test_live_views_of_the_queues_show_a_pause_and_a_resume_at_once(
    pg_database_url: str,
    redis_url: str,
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(pg_database_url, redis_url)
    # Subscribers on one replica, the pause and resume on another.
    async with serve(settings) as first, serve(settings, make_keys=False) as second:
        second.keys = first.keys
        init = {"X-API-Key": first.keys["reader"]}
        async with (
            GqlSubscription(first.ws_url, init, LOAD_PAUSED) as load,
            GqlSubscription(first.ws_url, init, BOARD_PAUSED) as board,
            GqlSubscription(first.ws_url, init, EVENT_KINDS) as events,
        ):
            assert not _scan_paused(await load.next(), "queueLoad")
            assert not _scan_paused(await board.next(), "dashboard")
            await first.wait_listeners(3)

            for mutation, paused in ((PAUSE, True), (RESUME, False)):
                body = await second.post(mutation, {"q": "scan"})
                assert "errors" not in body, body
                assert _scan_paused(await load.next(within=PUSH_WITHIN), "queueLoad") is paused
                assert _scan_paused(await board.next(within=PUSH_WITHIN), "dashboard") is paused

            # Job subscribers hear jobs only: the next event is the job dispatched after.
            job = await second.dispatch()
            event = (await events.next())["workerEvents"]
    assert event == {"kind": "CREATED", "worker": {"id": job["id"]}}
