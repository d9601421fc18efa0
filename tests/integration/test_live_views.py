"""Live views over real websockets: subscribers of the same subscription share one running stream,
over both protocols, and leave it without disturbing each other; errors reach every one of them."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.graphql_ws_support import STEP_TIMEOUT, LegacyClient, Served, TransportClient, serve
from tests.integration.test_graphql_ws import EVENTS, QUEUE_LOAD, register_machine, scan_active
from tests.support.settings import MakeSettings
from worker_automation.resolvers import claims
from worker_automation.resolvers.machines import authenticate_machine
from worker_automation.settings import Settings

pytestmark = pytest.mark.services

PLAIN_EVENTS = """subscription($f: WorkerEventFilter) { ...Events }
  fragment Events on Subscription {
    workerEvents(filter: $f) { kind worker { id status progress machineId } } }"""
ECHO = {"f": {"automationType": "demo.echo"}}
SLEEP = {"f": {"automationType": "demo.sleep"}}


@pytest.fixture
def settings(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> Settings:
    built: Settings = make_settings(pg_database_url, redis_url)
    return built


async def views_settle(served: Served, views: int) -> None:
    """Until the process runs exactly ``views`` live views, each with its one bus listener."""
    for _ in range(int(STEP_TIMEOUT / 0.02)):
        if len(served.live_views) == views and served.services.events.listener_count == views:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(
        f"{len(served.live_views)} views, {served.services.events.listener_count} listeners; expected {views}"
    )


async def test_one_stream_per_view_for_every_subscriber_of_both_protocols(settings: Settings) -> None:
    async with serve(settings) as served:
        key = served.keys["reader"]
        async with (
            TransportClient.connect(served.ws_url, {"X-API-Key": key}) as first,
            TransportClient.connect(served.ws_url, {"X-API-Key": key}) as second,
            LegacyClient.connect(served.ws_url, {"x-api-key": key}) as legacy,
        ):
            assert (await legacy.receive())["type"] == "connection_ack"
            await first.subscribe("1", EVENTS, ECHO)
            await first.subscribe("2", EVENTS, SLEEP)
            await second.subscribe("echo", EVENTS, ECHO)
            await legacy.start("7", EVENTS, ECHO)
            await served.wait_view_subscribers(4)
            await views_settle(served, 2)  # two filters: two views, whatever the number of subscribers

            sleeping = await served.dispatch("demo.sleep", context={"seconds": 30})
            job = await served.dispatch(context={"n": 1})
            heard = {m["id"]: m for m in (await first.receive(), await first.receive())}
            assert heard["2"]["payload"]["data"]["workerEvents"]["worker"]["id"] == sleeping["id"]
            echo_payload = heard["1"]["payload"]
            assert echo_payload["data"]["workerEvents"]["kind"] == "CREATED"
            assert echo_payload["data"]["workerEvents"]["worker"]["id"] == job["id"]
            assert await second.receive() == {"id": "echo", "type": "next", "payload": echo_payload}
            assert await legacy.receive() == {"type": "data", "id": "7", "payload": echo_payload}

            # Leaving, each its own way: the others keep reading; the last one out stops the view.
            await first.send({"type": "complete", "id": "1"})
            await legacy.send({"type": "stop", "id": "7"})
            assert await legacy.receive() == {"type": "complete", "id": "7"}
            await served.wait_view_subscribers(2)
            again = await served.dispatch(context={"n": 2})
            message = await second.receive()
            assert message["payload"]["data"]["workerEvents"]["worker"]["id"] == again["id"]
            await second.connection.close()
            await views_settle(served, 1)
            await first.send({"type": "complete", "id": "2"})
            await views_settle(served, 0)
            # The operation id is free again, and a new view starts for it.
            await first.subscribe("1", EVENTS, ECHO)
            await views_settle(served, 1)
            late = await served.dispatch(context={"n": 3})
            message = await first.receive()
            assert message["id"] == "1"
            assert message["payload"]["data"]["workerEvents"]["worker"]["id"] == late["id"]


async def test_a_joiner_gets_the_latest_snapshot_at_once(settings: Settings) -> None:
    async with serve(settings) as served:
        machine = await authenticate_machine(served.services.db, await register_machine(served))
        key = served.keys["reader"]
        async with (
            TransportClient.connect(served.ws_url, {"X-API-Key": key}) as first,
            LegacyClient.connect(served.ws_url, {"x-api-key": key}) as legacy,
        ):
            assert (await legacy.receive())["type"] == "connection_ack"
            await first.subscribe("load", QUEUE_LOAD)
            assert scan_active((await first.receive())["payload"]["data"]) == 0
            job = await served.dispatch()
            await claims.claim(served.services, machine, job["id"])
            latest = (await first.receive())["payload"]
            while scan_active(latest["data"]) != 1:
                latest = (await first.receive())["payload"]

            await legacy.start("9", QUEUE_LOAD)
            assert await legacy.receive(within=2) == {"type": "data", "id": "9", "payload": latest}
            await views_settle(served, 1)

            await first.connection.close()
            await claims.complete(served.services, machine, job["id"], {"ok": True})
            while scan_active((await legacy.receive())["payload"]["data"]) != 0:
                pass
        await views_settle(served, 0)


async def test_errors_reach_every_subscriber_and_permissions_are_each_callers(settings: Settings) -> None:
    async with serve(settings) as served:
        key = served.keys["reader"]
        bad = {"f": {"queue": "nao_existe"}}
        async with (
            TransportClient.connect(served.ws_url, {"X-API-Key": key}) as first,
            LegacyClient.connect(served.ws_url, {"x-api-key": key}) as legacy,
        ):
            assert (await legacy.receive())["type"] == "connection_ack"
            await first.subscribe("1", EVENTS, bad)
            await legacy.start("1", EVENTS, bad)
            modern = await first.receive()
            assert modern["type"] == "next" and modern["payload"]["data"] is None, modern
            error = modern["payload"]["errors"][0]
            assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "queue"}, error
            assert await first.receive() == {"id": "1", "type": "complete"}
            old = await legacy.receive()
            assert old["type"] == "data" and old["payload"]["errors"] == modern["payload"]["errors"]
            assert await legacy.receive() == {"type": "complete", "id": "1"}
            await views_settle(served, 0)
            # Strawberry's own path (a root fragment keeps a document out of the views).
            await first.subscribe("plain", PLAIN_EVENTS, bad)
            assert await first.receive() == {"id": "plain", "type": "next", "payload": modern["payload"]}
            assert await first.receive() == {"id": "plain", "type": "complete"}

        # A machine key may connect but not read operators' views: refused as on any other path.
        machine_key = await register_machine(served)
        async with TransportClient.connect(served.ws_url, {"X-Worker-Api-Key": machine_key}) as machine:
            await machine.subscribe("1", EVENTS, ECHO)
            refused = await machine.receive()
            assert refused["type"] == "error" and refused["id"] == "1", refused
            assert refused["payload"][0]["extensions"]["code"] == "UNAUTHENTICATED", refused
        assert len(served.live_views) == 0


async def test_payloads_a_view_cannot_take_are_answered_and_free_their_id(settings: Settings) -> None:
    async with serve(settings) as served:
        async with TransportClient.connect(served.ws_url, {"X-API-Key": served.keys["reader"]}) as client:
            for odd in (
                {"query": EVENTS, "operationName": ["not", "a", "name"]},
                {"query": EVENTS, "variables": ["not", "an", "object"]},
                {"query": "subscription { workerEvents { kind } " + " " * 30_000 + "}"},
            ):
                await client.send({"type": "subscribe", "id": "1", "payload": odd})
                answer = await client.receive()
                assert answer["id"] == "1" and answer["type"] in ("error", "next"), (odd, answer)
                if answer["type"] == "next":
                    assert await client.receive() == {"id": "1", "type": "complete"}
            assert len(served.live_views) == 0
            # The id is free again, and a well-formed subscription joins a view.
            await client.subscribe("1", EVENTS, ECHO)
            await served.wait_view_subscribers(1)
