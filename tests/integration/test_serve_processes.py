"""``serve --workers N``: API processes on one port, each with its own event subscription.

Replicas share nothing but PostgreSQL and Redis: a subscriber connected to one process hears the
jobs created through any of them, and workers claim and report through whichever answers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from tests.integration.harness import Processes, Stack, descendants, is_running, served_stack
from worker_automation.models import AutomationSetting
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.automations import ensure_settings_rows, update_settings
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings

pytestmark = pytest.mark.services

JOBS = 12
STEP_TIMEOUT = 20.0
SUBSCRIPTION = "subscription { workerEvents { kind worker { id status } } }"


@pytest.fixture
def replicas(
    processes: Processes, pg_database_url: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> Iterator[Stack]:
    with served_stack(processes, pg_database_url, redis_url, redis_prefix, tmp_path, workers=2) as built:
        yield built


async def _created_ids(stack: Stack, count: int) -> tuple[set[int], set[int]]:
    """Dispatch ``count`` jobs, each on a connection of its own (so the kernel spreads them over
    the processes), while one websocket subscriber collects the jobs it hears created."""
    headers = stack.operator_headers
    url = stack.api_url.replace("http://", "ws://") + "/graphql"
    heard: set[int] = set()
    created: set[int] = set()
    async with connect(url, subprotocols=[Subprotocol("graphql-transport-ws")]) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": headers}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": SUBSCRIPTION}}))
        await asyncio.sleep(0.5)  # the operation is live once the server has read it
        for n in range(count):
            async with httpx.AsyncClient(base_url=stack.api_url, timeout=STEP_TIMEOUT) as http:
                response = await http.post(
                    "/api/v1/jobs",
                    headers=headers,
                    json={"automation_type": "demo.echo", "context": {"n": n}, "priority": 0},
                )
            assert response.status_code == 201, response.text
            created.add(response.json()["data"]["id"])
        async with asyncio.timeout(STEP_TIMEOUT):
            while not created <= heard:
                message = json.loads(await ws.recv())
                assert message["type"] == "next", message
                event = message["payload"]["data"]["workerEvents"]
                if event["kind"] == "CREATED":
                    heard.add(event["worker"]["id"])
    return created, heard


def test_two_processes_serve_one_port_and_share_events(replicas: Stack) -> None:
    serve = replicas.serve_proc
    assert serve is not None
    children = [pid for pid in descendants(serve.pid) if is_running(pid)]
    assert len(children) >= 2, children

    created, heard = asyncio.run(_created_ids(replicas, JOBS))
    assert created <= heard

    replicas.pool_worker("scan", 2)
    for job_id in created:
        assert replicas.wait_status(job_id, "CONCLUIDO", STEP_TIMEOUT)["status"] == "CONCLUIDO"


async def test_settings_rows_survive_processes_starting_together(pg_database_url: str) -> None:
    settings = Settings(database_url=pg_database_url)
    first, second = await asyncio.gather(
        Services.start(settings), Services.start(settings), return_exceptions=True
    )
    started = [s for s in (first, second) if isinstance(s, Services)]
    try:
        assert len(started) == 2, (first, second)
        db = started[0].db
        await asyncio.gather(*(ensure_settings_rows(s.db) for s in started))
        await update_settings(db, "demo.echo", actor=Actor("test"), max_concurrent_jobs=3)
        # Another process starting later leaves the override alone.
        await ensure_settings_rows(started[1].db)
        async with db.reader() as session:
            limit = await session.scalar(
                select(AutomationSetting.max_concurrent_jobs).where(AutomationSetting.key == "demo.echo")
            )
        assert limit == 3
    finally:
        for services in started:
            await services.close()


async def test_the_connections_postgresql_takes_are_read_from_the_server(services: Services) -> None:
    from sqlalchemy import text

    async with services.db.connection() as conn:
        total = int((await conn.execute(text("SHOW max_connections"))).scalar_one())
        reserved = int((await conn.execute(text("SHOW superuser_reserved_connections"))).scalar_one())
    assert await services.db.connections_allowed() == total - reserved > 0


async def test_sqlite_has_no_connection_limit_to_read(sqlite_services: Services) -> None:
    assert await sqlite_services.db.connections_allowed() is None


def test_processes_whose_pools_do_not_fit_the_server_are_warned_about() -> None:
    from worker_automation.cli.serve import connection_budget_warning

    settings = Settings(database_pool_size=30, database_max_overflow=10)
    assert connection_budget_warning(settings, 2, 97) is None  # 80 fit
    assert connection_budget_warning(settings, 1, None) is None  # SQLite: nothing to compare
    warning = connection_budget_warning(settings, 3, 97)
    assert warning is not None
    assert "120 database connections" in warning and "WA_DATABASE_POOL_SIZE 30" in warning
    assert "97" in warning
