"""A permission ends everywhere at once, on a real server (uvicorn, PostgreSQL, Redis): the open
subscriptions of a key revoked or lowered, of a machine turned off or given a new key, end within
5 s on both websocket protocols, through the bus's notice or, when it is lost, the periodic check;
and the key can no longer connect."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy import select
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from tests.integration.graphql_ws_support import Served, serve
from tests.integration.harness import clean_env, run_cli
from tests.support.settings import MakeSettings
from worker_automation.models import ApiKey
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.auth import change_key, create_key, hash_secret, revoke_key
from worker_automation.resolvers.machines import authenticate_machine, rotate_machine_key, set_machine_status
from worker_automation.settings import Settings

pytestmark = pytest.mark.services

ENDS_WITHIN = 5.0
# A live view, and a subscription on Strawberry's own path.
EVENTS = "subscription { workerEvents { kind worker { id } } }"
OWN_STREAM = 'subscription {{ taskStatus(taskId: "{task}") {{ state }} }}'
JOB_CREATED = "subscription { jobCreated { id } }"
TRANSPORT, LEGACY = "graphql-transport-ws", "graphql-ws"


@pytest.fixture
def settings(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> Settings:
    built: Settings = make_settings(pg_database_url, redis_url)
    return built


@asynccontextmanager
async def subscribed(
    served: Served, protocol: str, init: dict[str, str], queries: tuple[str, ...]
) -> AsyncIterator[ClientConnection]:
    """A socket past connection_ack with ``queries`` subscribed (ids 0, 1, ...)."""
    async with connect(served.ws_url, subprotocols=[Subprotocol(protocol)]) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": init}))
        while (ack := json.loads(await asyncio.wait_for(ws.recv(), 10)))["type"] == "ka":
            pass
        assert ack["type"] == "connection_ack", ack
        start = "subscribe" if protocol == TRANSPORT else "start"
        for n, query in enumerate(queries):
            await ws.send(json.dumps({"type": start, "id": str(n), "payload": {"query": query}}))
        yield ws


async def ended(ws: ClientConnection, protocol: str, operations: int) -> float:
    """Seconds until the server ended the socket as the protocol says a lost permission does:
    close 4403 (graphql-transport-ws), or an UNAUTHENTICATED error per operation, then close 4403
    (graphql-ws). Events delivered before it are fine; an error of another kind is not."""
    started = time.monotonic()
    unauthenticated: set[str] = set()
    with pytest.raises(ConnectionClosed):
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), ENDS_WITHIN + 5))
            if message["type"] == "error":
                assert message["payload"]["extensions"]["code"] == "UNAUTHENTICATED", message
                unauthenticated.add(message["id"])
    took = time.monotonic() - started
    assert ws.close_code == 4403, (ws.close_code, ws.close_reason)
    if protocol == LEGACY:
        assert unauthenticated == {str(n) for n in range(operations)}
    return took


async def listening(served: Served, count: int) -> None:
    await served.wait_listeners(count)
    await asyncio.sleep(0.2)  # the subscriptions are past their first await


async def key_id(served: Served, secret: str) -> int:
    async with served.services.db.reader() as session:
        found = await session.scalar(select(ApiKey.id).where(ApiKey.key_hash == hash_secret(secret)))
    assert found is not None
    return int(found)


async def refused_at_connect(served: Served, init: dict[str, str]) -> int | None:
    async with connect(served.ws_url, subprotocols=[Subprotocol(TRANSPORT)]) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": init}))
        with pytest.raises(ConnectionClosed):
            while True:
                assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] != "connection_ack"
        return ws.close_code


async def operator_ends(
    served: Served, perfil: str, scopes: list[str], change: Callable[[int], Awaitable[object]]
) -> None:
    """A key's subscriptions (a live view and a stream of its own, on each protocol) all end
    within 5 s of ``change(key_id)``, and the key cannot connect with what it had."""
    created = await create_key(served.services.db, name="victim", perfil=perfil, scopes=scopes)
    init = {"X-API-Key": created.secret}
    queued = OWN_STREAM.format(task=(await served.dispatch())["taskId"])  # waits for its job's events
    async with (
        subscribed(served, TRANSPORT, init, (EVENTS, queued)) as modern,
        subscribed(served, LEGACY, init, (EVENTS, queued)) as legacy,
    ):
        await listening(served, 3)  # one view (shared) and two streams of their own
        await change(created.id)
        took = await asyncio.gather(ended(modern, TRANSPORT, 2), ended(legacy, LEGACY, 2))
    assert max(took) < ENDS_WITHIN, took


async def test_a_revoked_key_loses_its_subscriptions(settings: Settings) -> None:
    async with serve(settings) as served:
        events = served.services.events
        await operator_ends(
            served,
            "funcionario",
            ["worker_automation:read"],
            lambda i: revoke_key(served.services.db, i, events),
        )
        # And it cannot come back.
        secret = (
            await create_key(
                served.services.db, name="x", perfil="funcionario", scopes=["worker_automation:read"]
            )
        ).secret
        await revoke_key(served.services.db, await key_id(served, secret), events)
        assert await refused_at_connect(served, {"X-API-Key": secret}) == 4403


async def test_lowered_scopes_or_perfil_end_the_subscriptions_and_a_raise_does_not(
    settings: Settings,
) -> None:
    async with serve(settings) as served:
        db, events = served.services.db, served.services.events
        both = ["worker_automation:read", "worker_automation:write"]
        await operator_ends(
            served,
            "funcionario",
            both,
            lambda i: change_key(db, i, scopes="worker_automation:write", events=events),
        )
        await operator_ends(
            served, "administrador", both, lambda i: change_key(db, i, perfil="funcionario", events=events)
        )

        # More than the key had: its subscriptions go on.
        created = await create_key(db, name="raised", perfil="funcionario", scopes=["worker_automation:read"])
        async with subscribed(served, TRANSPORT, {"X-API-Key": created.secret}, (EVENTS,)) as ws:
            await listening(served, 1)
            await change_key(db, created.id, scopes=both, perfil="diretoria", events=events)
            await asyncio.sleep(0.5)  # the notice was heard and the key checked
            job = await served.dispatch()
            delivered = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert (
                delivered["type"] == "next"
                and delivered["payload"]["data"]["workerEvents"]["worker"]["id"] == job["id"]
            )


async def machine_ends(served: Served, name: str, change: Callable[[int], Awaitable[object]]) -> str:
    """A machine's jobCreated subscriptions end within 5 s of ``change(machine_id)``; its key."""
    body = await served.post(
        'mutation($n: String!) { registerMachine(name: $n, automation: "demo.echo") { apiKey } }', {"n": name}
    )
    key = str(body["data"]["registerMachine"]["apiKey"])
    machine = await authenticate_machine(served.services.db, key)
    init = {"X-Worker-Api-Key": key}
    async with (
        subscribed(served, TRANSPORT, init, (JOB_CREATED,)) as modern,
        subscribed(served, LEGACY, init, (JOB_CREATED,)) as legacy,
    ):
        await listening(served, 2)
        await change(machine.id)
        took = await asyncio.gather(ended(modern, TRANSPORT, 1), ended(legacy, LEGACY, 1))
    assert max(took) < ENDS_WITHIN, took
    return key


async def test_a_machine_turned_off_or_given_a_new_key_loses_its_subscriptions(settings: Settings) -> None:
    async with serve(settings) as served:
        db, events = served.services.db, served.services.events

        async def turn_off(machine_id: int) -> None:
            await served.post(f"mutation {{ turnMachineOff(id: {machine_id}) {{ status }} }}")

        key = await machine_ends(served, "turned-off", turn_off)
        assert await refused_at_connect(served, {"X-Worker-Api-Key": key}) == 4403  # while it is off
        await set_machine_status(db, CLI_ACTOR, (await authenticate_machine(db, key)).id, True, events)
        async with subscribed(served, TRANSPORT, {"X-Worker-Api-Key": key}, (JOB_CREATED,)):
            pass  # on again: it connects again

        async def rotate(machine_id: int) -> None:
            await rotate_machine_key(db, CLI_ACTOR, machine_id, events)

        old_key = await machine_ends(served, "rotated", rotate)
        assert await refused_at_connect(served, {"X-Worker-Api-Key": old_key}) == 4403


async def test_a_lost_notice_is_made_up_for_by_the_periodic_check(settings: Settings) -> None:
    async with serve(settings) as served:
        # Revoked with no notice on the bus (as when Redis was away at that moment).
        await operator_ends(
            served, "funcionario", ["worker_automation:read"], lambda i: revoke_key(served.services.db, i)
        )


async def test_a_notice_from_another_replica_ends_the_subscriptions_here(settings: Settings) -> None:
    async with serve(settings) as served, serve(settings, make_keys=False) as other:
        await other.services.events.ready()
        await operator_ends(
            served,
            "funcionario",
            ["worker_automation:read"],
            lambda i: revoke_key(other.services.db, i, other.services.events),
        )


async def test_the_command_line_reaches_the_open_sockets(settings: Settings, tmp_path: Path) -> None:
    env = clean_env(
        WA_DATABASE_URL=settings.database_url,
        WA_REDIS_URL=str(settings.redis_url),
        WA_REDIS_PREFIX=settings.redis_prefix,
    )

    def cli(*args: str) -> Callable[[int], Awaitable[object]]:
        return lambda key: asyncio.to_thread(run_cli, [*args, str(key)], env, tmp_path)

    async with serve(settings) as served:
        both = ["worker_automation:read", "worker_automation:write"]
        await operator_ends(
            served, "funcionario", both, cli("keys", "update", "--scopes", "worker_automation:write")
        )
        await operator_ends(served, "funcionario", ["worker_automation:read"], cli("keys", "revoke"))


async def test_embedded_mode_ends_them_too(sqlite_database_url: str, make_settings: MakeSettings) -> None:
    # SQLite and the embedded broker: the notice travels through the embedded Redis.
    async with serve(make_settings(sqlite_database_url, None)) as served:
        events = served.services.events
        await operator_ends(
            served,
            "funcionario",
            ["worker_automation:read"],
            lambda i: revoke_key(served.services.db, i, events),
        )
