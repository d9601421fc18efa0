"""``/graphql`` served by uvicorn on real PostgreSQL and Redis: subscriptions over both websocket
protocols, events across app instances, refusals at connect, permissions and the GraphiQL page."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from gql.transport.exceptions import TransportQueryError
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from tests.integration.graphql_ws_support import GqlSubscription, LegacyClient, Served, serve
from tests.support.settings import MakeSettings
from worker_automation.resolvers import claims
from worker_automation.resolvers.machines import authenticate_machine
from worker_automation.settings import Settings

pytestmark = pytest.mark.services

EVENTS = """subscription($f: WorkerEventFilter) { workerEvents(filter: $f) {
              kind worker { id status progress machineId } } }"""
QUEUE_LOAD = "subscription { queueLoad { queues { queueName activeCount pendingCount } } }"
ECHO_ONLY = {"f": {"automationType": "demo.echo"}}
LIFECYCLE = ["CREATED", "CLAIMED", "PROGRESS", "COMPLETED"]


@pytest.fixture
def settings(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> Settings:
    built: Settings = make_settings(pg_database_url, redis_url)
    return built


async def register_machine(served: Served, automation: str = "demo.echo") -> str:
    body = await served.post(
        "mutation($a: String!) { registerMachine(name: $a, automation: $a) { apiKey machine { id } } }",
        {"a": automation},
    )
    return str(body["data"]["registerMachine"]["apiKey"])


def scan_active(payload: dict[str, Any]) -> int:
    return int(next(q["activeCount"] for q in payload["queueLoad"]["queues"] if q["queueName"] == "scan"))


async def next_scan_active(load: GqlSubscription, wanted: int) -> None:
    while scan_active(await load.next()) != wanted:
        pass


async def test_a_job_lifecycle_reaches_both_protocols(settings: Settings) -> None:
    async with serve(settings) as served:
        key = await register_machine(served)
        machine = await authenticate_machine(served.services.db, key)
        init = {"X-API-Key": served.keys["reader"]}
        async with (
            GqlSubscription(served.ws_url, init, EVENTS, ECHO_ONLY) as events,
            GqlSubscription(served.ws_url, init, QUEUE_LOAD) as load,
            LegacyClient.connect(served.ws_url, {"x-api-key": served.keys["reader"]}) as legacy,
        ):
            assert (await legacy.receive())["type"] == "connection_ack"
            await legacy.start("1", EVENTS, ECHO_ONLY)
            assert scan_active(await load.next()) == 0
            await served.wait_listeners(3)

            await served.dispatch("demo.sleep", context={"seconds": 1})  # not demo.echo: filtered out
            job = await served.dispatch(context={"n": 1})
            await claims.claim(served.services, machine, job["id"])
            await next_scan_active(load, 1)
            await claims.report_progress(served.services, machine, job["id"], 60)
            await claims.complete(served.services, machine, job["id"], {"n": 1})
            await next_scan_active(load, 0)

            modern = [(await events.next())["workerEvents"] for _ in LIFECYCLE]
            old = []
            for _ in LIFECYCLE:
                message = await legacy.receive()
                assert message["type"] == "data" and message["id"] == "1", message
                old.append(message["payload"]["data"]["workerEvents"])
    for seen in (modern, old):
        assert [e["kind"] for e in seen] == LIFECYCLE
        assert {e["worker"]["id"] for e in seen} == {job["id"]}
        assert [e["worker"]["status"] for e in seen] == ["AGENDADO", "EXECUTANDO", "EXECUTANDO", "CONCLUIDO"]
        assert seen[2]["worker"]["progress"] == 60 and seen[3]["worker"]["machineId"] == machine.id


async def test_an_event_of_a_second_instance_reaches_the_first(settings: Settings) -> None:
    async with serve(settings) as first, serve(settings, make_keys=False) as second:
        second.keys = first.keys  # same database, same keys
        init = {"X-API-Key": first.keys["reader"]}
        async with GqlSubscription(first.ws_url, init, EVENTS) as events:
            await first.wait_listeners(1)
            job = await second.dispatch(context={"from": "second"})
            event = (await events.next())["workerEvents"]
    assert event["kind"] == "CREATED" and event["worker"]["id"] == job["id"]


async def refused_by_transport_ws(url: str, payload: dict[str, Any]) -> int | None:
    async with connect(url, subprotocols=[Subprotocol("graphql-transport-ws")]) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
        with pytest.raises(ConnectionClosed):
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                assert message["type"] != "connection_ack", "connection accepted"
        return ws.close_code


async def test_keys_are_checked_at_connect_and_per_operation(settings: Settings) -> None:
    async with serve(settings) as served:
        assert await refused_by_transport_ws(served.ws_url, {}) == 4403
        assert await refused_by_transport_ws(served.ws_url, {"X-API-Key": "wak_wrong"}) == 4403
        assert await refused_by_transport_ws(served.ws_url, {"X-Worker-Api-Key": "wmk_wrong"}) == 4403
        async with LegacyClient.connect(served.ws_url, {}) as legacy:
            refused = await legacy.receive()
            assert refused["type"] == "connection_error"
            assert refused["payload"]["extensions"]["code"] == "UNAUTHENTICATED"

        # The key may also come in the handshake headers.
        async with connect(
            served.ws_url,
            subprotocols=[Subprotocol("graphql-transport-ws")],
            additional_headers={"Authorization": f"Bearer {served.keys['reader']}"},
        ) as ws:
            await ws.send(json.dumps({"type": "connection_init"}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "connection_ack"

        # Accepted connections still run every operation under its permission rules.
        init = {"X-API-Key": served.keys["reader"]}
        async with GqlSubscription(served.ws_url, init, "subscription { jobCreated { id } }") as wrong:
            with pytest.raises(TransportQueryError) as refused_op:
                await wrong.next()
        assert "X-Worker-Api-Key" in str(refused_op.value)

        job = await served.dispatch()
        cancel = "mutation($id: Int!) { cancelWorker(id: $id) { status } }"
        for key, query, variables in (
            ("reader", cancel, {"id": job["id"]}),
            ("reader", 'mutation { dispatchAutomation(input: {automationType: "demo.echo"}) { id } }', None),
            ("funcionario", "mutation { clearQueue(scope: ALL) { cancelled } }", None),
            ("funcionario", 'mutation { purgeQueue(queueName: "scan", confirm: true) { queueName } }', None),
            ("funcionario", "mutation { syncOrphans { orphansFound } }", None),
        ):
            body = await served.post(query, variables, key=key)
            assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN", (key, query, body)
        async with httpx.AsyncClient(timeout=10) as client:  # no key over HTTP: 401, document unread
            anonymous = await client.post(served.url, json={"query": "{ stats { total } }"})
        assert anonymous.status_code == 401
        assert anonymous.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
        done = await served.post(cancel, {"id": job["id"]}, key="funcionario")
        assert done["data"]["cancelWorker"]["status"] == "CANCELADO"


async def test_machines_hear_new_jobs_and_graphiql_is_served(settings: Settings) -> None:
    async with serve(settings) as served:
        key = await register_machine(served)
        query = 'subscription { jobCreated(automation: "demo.echo") { id automationType status } }'
        async with GqlSubscription(served.ws_url, {"X-Worker-Api-Key": key}, query) as created:
            await served.wait_listeners(1)
            await served.dispatch("demo.fail")
            job = await served.dispatch()
            assert (await created.next())["jobCreated"] == {
                "id": job["id"], "automationType": "demo.echo", "status": "AGENDADO"
            }  # fmt: skip

        async with httpx.AsyncClient(timeout=10) as client:
            page = await client.get(served.url, headers={"Accept": "text/html"})
            assert page.status_code == 200 and "/graphql/static/graphiql.min.js" in page.text
            assert "unpkg" not in page.text and "cdn" not in page.text.lower()
            for asset in (
                "graphiql.min.js",
                "graphiql.min.css",
                "react.production.min.js",
                "graphiql-setup.js",
            ):
                served_asset = await client.get(f"{served.url}/static/{asset}")
                assert served_asset.status_code == 200 and len(served_asset.content) > 100, asset
            too_big = await client.post(
                served.url, content=b"{" + b" " * 300_000 + b"}", headers={"content-type": "application/json"}
            )
            assert too_big.status_code == 413
            assert too_big.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
