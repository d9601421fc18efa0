"""Subscriptions in-process (SQLite, embedded broker and event bus): what each one pushes, and when."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from sqlalchemy import event
from strawberry import Schema

from tests.unit.graphql_support import Api, code, make_api, subscribed
from worker_automation.broker.events import Event
from worker_automation.domain.vocabulary import EventKind
from worker_automation.resolvers import claims
from worker_automation.resolvers.machines import MachineView, authenticate_machine
from worker_automation.resolvers.services import Services
from worker_automation.schema.live_views import LiveViews, Subscriber
from worker_automation.schema.streams import Feed


@pytest.fixture
async def api(sqlite_services: Services) -> Api:
    return await make_api(sqlite_services)


async def machine_for(api: Api, automation: str = "demo.echo") -> tuple[MachineView, str]:
    data = await api.ok(
        "mutation($a: String!) { registerMachine(name: $a, automation: $a) { apiKey } }", {"a": automation}
    )
    key = data["registerMachine"]["apiKey"]
    return await authenticate_machine(api.services.db, key), key


async def test_worker_events_follow_a_job_in_order(api: Api) -> None:
    machine, _ = await machine_for(api)
    query = """subscription($f: WorkerEventFilter) { workerEvents(filter: $f) {
                 kind change at worker { id status progress machine { name } } } }"""
    async with subscribed(api, query, {"f": {"automationType": "demo.echo"}}) as sub:
        await api.dispatch("demo.sleep", context={"seconds": 1})  # filtered out
        job = await api.dispatch()
        await claims.claim(api.services, machine, job["id"])
        await claims.report_progress(api.services, machine, job["id"], 40)
        await claims.complete(api.services, machine, job["id"], {"ok": True})
        seen = [(await sub.data())["workerEvents"] for _ in range(4)]
    assert [(e["kind"], e["change"], e["worker"]["status"]) for e in seen] == [
        ("CREATED", "CREATED", "AGENDADO"),
        ("CLAIMED", "UPDATED", "EXECUTANDO"),
        ("PROGRESS", "UPDATED", "EXECUTANDO"),
        ("COMPLETED", "UPDATED", "CONCLUIDO"),
    ]
    assert {e["worker"]["id"] for e in seen} == {job["id"]}
    assert seen[2]["worker"]["progress"] == 40 and seen[3]["worker"]["machine"] == {"name": "demo.echo"}
    assert seen[0]["at"].endswith("-03:00")


async def test_queue_load_starts_at_once_coalesces_and_ends_fresh(api: Api) -> None:
    query = "subscription { queueLoad { queues { queueName pendingCount } summary { totalPending } } }"
    async with subscribed(api, query) as sub:
        first = await sub.data()
        assert first["queueLoad"]["summary"]["totalPending"] == 0
        loop = asyncio.get_running_loop()
        started = loop.time()
        for _ in range(12):
            await api.dispatch()
        pushes = []
        while True:
            pushes.append((await sub.data())["queueLoad"])
            if pushes[-1]["summary"]["totalPending"] == 12:
                break
        elapsed = loop.time() - started
        # Quiet after the last change: nothing more comes.
        with pytest.raises(TimeoutError):
            await sub.next(within=0.6)
    assert len(pushes) <= 2 + elapsed / 0.25, (len(pushes), elapsed)
    assert len(pushes) < 12
    scan = next(q for q in pushes[-1]["queues"] if q["queueName"] == "scan")
    assert scan["pendingCount"] == 12


async def test_task_status_pushes_changes_until_terminal(api: Api) -> None:
    machine, _ = await machine_for(api)
    job = await api.dispatch()
    query = "subscription($t: String!) { taskStatus(taskId: $t) { taskId state progress result workerId } }"
    async with subscribed(api, query, {"t": job["taskId"]}) as sub:
        assert (await sub.data())["taskStatus"]["state"] == "PENDING"
        await claims.claim(api.services, machine, job["id"])
        assert (await sub.data())["taskStatus"]["state"] == "STARTED"
        await claims.report_progress(api.services, machine, job["id"], 50)
        assert (await sub.data())["taskStatus"]["progress"] == 50
        await claims.complete(api.services, machine, job["id"], {"answer": 42})
        done = (await sub.data())["taskStatus"]
        assert (done["state"], done["result"], done["workerId"]) == ("SUCCESS", {"answer": 42}, job["id"])
        assert await sub.next() is None

    moved = await api.dispatch()
    async with subscribed(api, query, {"t": moved["taskId"]}) as sub:
        assert (await sub.data())["taskStatus"]["state"] == "PENDING"
        await api.ok(
            'mutation($id: Int!) { moveWorker(id: $id, targetQueue: "observer") { id } }', {"id": moved["id"]}
        )
        revoked = (await sub.data())["taskStatus"]
        assert revoked["state"] == "REVOKED" and "substituida" in revoked["result"]["exc_message"]
        assert await sub.next() is None

    async with subscribed(api, query, {"t": "no-such-task"}) as sub:
        result = await sub.next()
        assert result is not None and result.errors and code(result.errors[0]) == "NOT_FOUND"


async def test_job_created_reaches_machines_only(api: Api) -> None:
    _, key = await machine_for(api)
    query = 'subscription { jobCreated(automation: "demo.echo") { id automationType status context } }'
    async with subscribed(api, query, context=api.context(None, {"X-Worker-Api-Key": key})) as sub:
        await api.dispatch("demo.sleep", context={"seconds": 1})
        job = await api.dispatch(context={"n": 1})
        created = (await sub.data())["jobCreated"]
        assert created == {
            "id": job["id"],
            "automationType": "demo.echo",
            "status": "AGENDADO",
            "context": {"n": 1},
        }

    async with subscribed(api, query, context=api.context("admin")) as sub:
        refused = await sub.next()
        assert refused is not None and refused.errors and code(refused.errors[0]) == "UNAUTHENTICATED"


async def test_job_created_hides_jobs_the_machine_cannot_claim(api: Api) -> None:
    _, key = await machine_for(api, "demo.sleep")
    query = "subscription { jobCreated { id automationType queue status taskId clienteId context result } }"
    async with subscribed(api, query, context=api.context(None, {"X-Worker-Api-Key": key})) as sub:
        other = await api.dispatch(context={"secret": "s3cr3t"})  # demo.echo: not this machine's
        own = await api.dispatch("demo.sleep", context={"seconds": 1})
        heard = [(await sub.data())["jobCreated"] for _ in range(2)]
    assert heard[0] == {
        "id": other["id"],
        "automationType": "demo.echo",
        "queue": "scan",
        "status": "AGENDADO",
        "taskId": None,
        "clienteId": None,
        "context": None,
        "result": None,
    }
    assert heard[1]["id"] == own["id"] and heard[1]["context"] == {"seconds": 1} and heard[1]["taskId"]


async def test_dashboard_subscription_and_refusals(api: Api) -> None:
    query = "subscription { dashboard { stats { total } queued { total } errors } }"
    async with subscribed(api, query) as sub:
        assert (await sub.data())["dashboard"] == {
            "stats": {"total": 0},
            "queued": {"total": 0},
            "errors": {},
        }
        await api.dispatch()
        assert (await sub.data())["dashboard"]["queued"]["total"] == 1

    async with subscribed(api, query, context=api.context(None)) as sub:
        refused = await sub.next()
        assert refused is not None and refused.errors and code(refused.errors[0]) == "UNAUTHENTICATED"
    bad_filter = 'subscription { workerEvents(filter: {queue: "nope"}) { kind } }'
    async with subscribed(api, bad_filter) as sub:
        refused = await sub.next()
        assert refused is not None and refused.errors and code(refused.errors[0]) == "BAD_USER_INPUT"


async def test_subscribers_asking_the_same_thing_share_one_execution(api: Api) -> None:
    """Over the websocket transport, subscribers of the same operation read one live view."""
    machine, _ = await machine_for(api)
    same = "subscription { workerEvents { kind worker { id machine { name } } } }"
    other = "subscription { workerEvents { worker { id machine { name isOn } } } }"
    views = LiveViews(cast(Schema, api.schema))
    written: list[list[str]] = [[], [], []]
    serving = []
    for query, out in zip((same, same, other), written, strict=True):
        context = api.context("reader")
        admission = await views.admit(context, query, None, None)
        assert admission is not None

        async def send_text(text: str, out: list[str] = out) -> None:
            out.append(text)

        subscriber = Subscriber(send_text, "", "", snapshots=False)
        serving.append(asyncio.create_task(views.serve(admission, context, subscriber)))
    for _ in range(200):  # until both views listen to the bus
        if api.services.events.listener_count >= 2:
            break
        await asyncio.sleep(0.01)
    assert len(views) == 2 and views.subscriber_count == 3
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(api.services.db.engine.sync_engine, "before_cursor_execute", record)
    try:
        row = {"id": 77, "status": "EXECUTANDO", "queue": "scan", "automation_type": "demo.echo",
               "created_at": "2026-07-08T09:15:00-03:00", "updated_at": "2026-07-08T09:15:00-03:00",
               "machine_id": machine.id}  # fmt: skip
        await api.services.events.publish(Event(kind=EventKind.CLAIMED, job=row))
        for _ in range(500):
            if all(written):
                break
            await asyncio.sleep(0.01)
    finally:
        event.remove(api.services.db.engine.sync_engine, "before_cursor_execute", record)
        for task in serving:
            task.cancel()
        await asyncio.gather(*serving, return_exceptions=True)
    results = [json.loads(out[0])["data"] for out in written]
    assert (
        results[0]
        == results[1]
        == {"workerEvents": {"kind": "CLAIMED", "worker": {"id": 77, "machine": {"name": "demo.echo"}}}}
    )
    assert results[2] == {
        "workerEvents": {"worker": {"id": 77, "machine": {"name": "demo.echo", "isOn": True}}}
    }
    # One machine lookup per distinct operation, not one per subscriber.
    assert len(statements) == 2, statements


async def test_a_subscriber_that_falls_behind_gets_resync(sqlite_services: Services) -> None:
    bus = sqlite_services.events
    await bus.ready()
    feed = Feed(bus, maxsize=1)
    try:
        for n in range(3):
            await bus.publish(Event(kind=EventKind.CREATED, job={"id": n, "status": "AGENDADO"}))
        await asyncio.sleep(0.3)  # let the bus hand all three over (and drop the feed's listener)
        kinds = []
        for _ in range(2):
            received = await feed.next(within=5.0)
            assert received is not None
            kinds.append(received.kind)
        assert kinds == [EventKind.CREATED, EventKind.RESYNC]
        await bus.publish(Event(kind=EventKind.DELETED, job={"id": 9, "status": "AGENDADO"}))
        again = await feed.next(within=5.0)
        assert again is not None and again.kind is EventKind.DELETED
        assert await feed.next(within=0.05) is None
    finally:
        feed.close()
