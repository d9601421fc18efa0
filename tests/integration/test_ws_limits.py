"""Websocket budgets on a real server (uvicorn, PostgreSQL, Redis): operations in flight per
socket, authenticated sockets per key, answer bytes in flight per socket and per key; frames that
are no protocol message; a client that leaves in the middle of a query."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import insert, select
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from tests.integration.graphql_ws_support import LegacyClient, Served, TransportClient, serve
from tests.integration.job_rows import random_row
from tests.support.pools import checked_out
from tests.support.settings import MakeSettings
from worker_automation.models import ApiKey, Job
from worker_automation.resolvers.auth import hash_secret
from worker_automation.schema.open_sockets import OpenSockets
from worker_automation.settings import Settings

pytestmark = pytest.mark.services

EVENTS = "subscription { workerEvents { kind worker { id } } }"
VIEWER = "{ viewer { name } }"
QUEUE_LOAD = "subscription { queueLoad { queues { queueName } } }"
PAGE = "{ workers(perPage: 100) { items { id context } } }"
PROTOCOLS = ("graphql-transport-ws", "graphql-ws")


async def key_id(served: Served, kind: str) -> int:
    async with served.services.db.reader() as session:
        found = await session.scalar(
            select(ApiKey.id).where(ApiKey.key_hash == hash_secret(served.keys[kind]))
        )
    assert found is not None
    return int(found)


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    for _ in range(int(within / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    assert condition()


def sockets_of(served: Served) -> OpenSockets:
    assert served.graphql is not None and served.graphql.sockets is not None
    return served.graphql.sockets


async def closed_with(ws: ClientConnection, within: float = 10.0) -> tuple[int | None, str]:
    """The close frame's code and reason, once the server has closed ``ws``."""
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), within)
    assert ws.close_code is not None
    return ws.close_code, ws.close_reason or ""


@asynccontextmanager
async def raw(url: str, protocol: str) -> AsyncIterator[ClientConnection]:
    async with connect(url, subprotocols=[Subprotocol(protocol)], max_size=None) as ws:
        yield ws


async def test_one_operation_past_the_limit_is_refused_and_the_socket_stays_open(
    pg_database_url: str, redis_url: str, make_settings: MakeSettings
) -> None:
    settings = make_settings(pg_database_url, redis_url, ws_max_operations=3)
    async with serve(settings) as served:
        async with TransportClient.connect(served.ws_url, {"X-API-Key": served.keys["reader"]}) as client:
            for n in range(3):
                await client.subscribe(str(n), EVENTS)
            await served.wait_view_subscribers(3)
            await client.subscribe("3", EVENTS)
            refused = await client.receive()
            assert refused["id"] == "3" and refused["type"] == "error", refused
            error = refused["payload"][0]
            assert error["extensions"]["code"] == "TOO_MANY_OPERATIONS"
            assert "maximo 3" in error["message"] and "WA_WS_MAX_OPERATIONS" in error["message"]
            # One ends: there is room again on the same socket.
            await client.send({"id": "0", "type": "complete"})
            await client.subscribe("4", VIEWER)
            answer = await client.receive()
            assert answer["id"] == "4" and answer["type"] == "next", answer
            assert answer["payload"]["data"]["viewer"]["name"] == "reader"

        async with LegacyClient.connect(served.ws_url, {"X-API-Key": served.keys["reader"]}) as legacy:
            assert (await legacy.receive())["type"] == "connection_ack"
            for n in range(3):
                await legacy.start(str(n), EVENTS)
            await served.wait_view_subscribers(3)
            await legacy.start("3", EVENTS)
            refused = await legacy.receive()
            assert refused["id"] == "3" and refused["type"] == "error", refused
            assert refused["payload"]["extensions"]["code"] == "TOO_MANY_OPERATIONS"
            await legacy.send({"id": "0", "type": "stop"})
            await legacy.start("4", QUEUE_LOAD)
            while (answer := await legacy.receive())["id"] != "4":
                pass
            assert answer["type"] == "data" and answer["payload"]["data"]["queueLoad"]["queues"]
            # (A query is answered with an error there: that protocol carries subscriptions only.)
            await legacy.send({"id": "4", "type": "stop"})
            await legacy.start("5", VIEWER)
            while (answer := await legacy.receive())["id"] != "5":
                pass
            assert answer["type"] == "error" and answer["payload"]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_a_key_holds_a_bounded_number_of_sockets(
    pg_database_url: str, redis_url: str, make_settings: MakeSettings
) -> None:
    settings = make_settings(pg_database_url, redis_url, ws_max_sockets_per_key=2)
    async with serve(settings) as served:
        reader = {"X-API-Key": served.keys["reader"]}
        async with (
            TransportClient.connect(served.ws_url, reader),
            TransportClient.connect(served.ws_url, reader),
        ):
            async with raw(served.ws_url, "graphql-transport-ws") as third:
                await third.send(json.dumps({"type": "connection_init", "payload": reader}))
                code, reason = await closed_with(third)
            assert code == 4429 and "maximo 2" in reason and "WA_WS_MAX_SOCKETS_PER_KEY" in reason
            async with raw(served.ws_url, "graphql-ws") as third:
                await third.send(json.dumps({"type": "connection_init", "payload": reader}))
                refused = json.loads(await asyncio.wait_for(third.recv(), 10))
                assert refused["type"] == "connection_error", refused
                assert refused["payload"]["extensions"]["code"] == "TOO_MANY_SOCKETS"
                assert "maximo 2" in refused["payload"]["message"]
                assert (await closed_with(third))[0] == 4429
            # Another key is not counted with this one.
            async with TransportClient.connect(served.ws_url, {"X-API-Key": served.keys["admin"]}):
                pass
        # Both sockets gone: the key may open one again.
        await until(lambda: len(sockets_of(served)) == 0)
        async with TransportClient.connect(served.ws_url, reader) as again:
            await again.subscribe("1", VIEWER)
            assert (await again.receive())["type"] == "next"


async def add_jobs(served: Served, count: int, blob: int) -> None:
    rng = random.Random(7)
    rows = [{**random_row(rng, 1_000 + n), "context": {"blob": "c" * blob}} for n in range(count)]
    async with served.services.db.session() as session:
        await session.execute(insert(Job), rows)


async def test_answers_in_flight_share_the_ceiling_of_the_socket_and_of_the_key(
    pg_database_url: str, redis_url: str, make_settings: MakeSettings
) -> None:
    limit = 200_000
    settings = make_settings(pg_database_url, redis_url, graphql_max_response_bytes=limit)
    async with serve(settings) as served:
        await add_jobs(served, 10, 10_000)  # one page is about 100 kB: half the ceiling
        reader = await key_id(served, "reader")
        async with (
            TransportClient.connect(served.ws_url, {"X-API-Key": served.keys["reader"]}) as first,
            TransportClient.connect(served.ws_url, {"X-API-Key": served.keys["reader"]}) as second,
        ):
            await first.subscribe("alone", PAGE)
            answer = await first.receive()
            assert answer["type"] == "next" and len(answer["payload"]["data"]["workers"]["items"]) == 10
            assert (await first.receive())["type"] == "complete"

            # Another socket of the key has 150 kB of answers in flight: what is left is too little.
            budget = sockets_of(served).key_budget(reader)
            assert budget is not None and budget.in_flight == 0
            budget.in_flight = 150_000
            await second.subscribe("squeezed", PAGE)
            refused = await second.receive()
            assert refused["type"] == "next" and refused["payload"]["data"] is None, refused
            [error] = refused["payload"]["errors"]
            assert error["extensions"]["code"] == "RESPONSE_TOO_LARGE" and "desta chave" in error["message"]
            assert (await second.receive())["type"] == "complete"
            # What the refused answer had charged is given back once it has left.
            await until(lambda: budget.in_flight == 150_000)
            budget.in_flight = 0
            await second.subscribe("room again", PAGE)
            assert (await second.receive())["payload"].get("errors") is None


GARBAGE: list[str | bytes] = [
    "{{{",
    "[]",
    "1",
    '"connection_init"',
    b"\x00\x01binary",
    '{"type": 5}',
    '{"no": "type"}',
    '{"type": "subscribe", "id": 1, "payload": {"query": "{ viewer { name } }"}}',
    '{"type": "start", "id": "1", "payload": []}',
]


@pytest.fixture
def logged(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> Iterator[pytest.LogCaptureFixture]:
    """The test's log records; after it, what it logged (and wrote to stderr) holds no traceback."""
    caplog.set_level(logging.INFO, logger="worker_automation.schema.ws_handlers")
    yield caplog
    text = caplog.text + capfd.readouterr().err
    assert "Traceback" not in text and not any(r.exc_info for r in caplog.records), text


@pytest.fixture
def settings(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> Settings:
    built: Settings = make_settings(pg_database_url, redis_url)
    return built


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_garbage_frames_close_the_socket_with_4400_and_no_traceback(
    settings: Settings, protocol: str, logged: pytest.LogCaptureFixture
) -> None:
    async with serve(settings) as served:
        for frame in GARBAGE:
            async with raw(served.ws_url, protocol) as ws:
                await ws.send(frame)
                code, _reason = await closed_with(ws)
                assert code == 4400, (protocol, frame, code)
        # After connection_init as well.
        async with raw(served.ws_url, protocol) as ws:
            await ws.send(
                json.dumps({"type": "connection_init", "payload": {"X-API-Key": served.keys["reader"]}})
            )
            assert json.loads(await ws.recv())["type"] == "connection_ack"
            await ws.send("[1, 2]")
            assert (await closed_with(ws))[0] == 4400
    lines = [r for r in logged.records if r.name == "worker_automation.schema.ws_handlers"]
    assert len(lines) == len(GARBAGE) + 1 and all(len(r.getMessage()) < 120 for r in lines)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_client_leaving_mid_query_leaves_no_traceback_and_no_connection_behind(
    settings: Settings, protocol: str, logged: pytest.LogCaptureFixture
) -> None:
    async with serve(settings) as served:
        await add_jobs(served, 100, 30_000)
        engine = served.services.db.engine
        baseline = checked_out(engine)
        # (graphql-ws carries subscriptions only: there, a snapshot's reads are what is cut short.)
        start, query = ("subscribe", PAGE) if protocol == "graphql-transport-ws" else ("start", QUEUE_LOAD)
        for delay in (0.0, 0.005, 0.02, 0.05, 0.1, 0.2):
            async with raw(served.ws_url, protocol) as ws:
                init = {"type": "connection_init", "payload": {"X-API-Key": served.keys["reader"]}}
                await ws.send(json.dumps(init))
                assert json.loads(await ws.recv())["type"] == "connection_ack"
                for n in range(4):
                    await ws.send(json.dumps({"type": start, "id": str(n), "payload": {"query": query}}))
                await asyncio.sleep(delay)
            # The client is gone; the server notices, ends its operations and returns connections.
        await until(lambda: checked_out(engine) == baseline and len(sockets_of(served)) == 0)
