"""Identical reads sent together share one answer; nothing else is shared and nothing is stale.

Runs the whole app on PostgreSQL and Redis. The sharing must be invisible to callers: every
answer reflects every write committed before the request was sent, mutations always run once
per request, and callers with different rights never receive each other's answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests.integration.rest_support import BASE, Api, add_cliente, add_job, assert_success, running_api
from tests.support.settings import MakeSettings

pytestmark = pytest.mark.services

STATS_QUERY = "{ stats { total byStatus } }"


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    async with running_api(make_settings(pg_database_url, redis_url)) as running:
        yield running


async def graphql(api: Api, query: str, kind: str = "admin", variables: dict[str, Any] | None = None) -> Any:
    response = await api.call("POST", "/graphql", kind, json={"query": query, "variables": variables})
    # A key that is not valid is refused before its document is read.
    assert response.status_code == (401 if kind == "revoked" else 200), response.text
    return response.json()


async def test_every_read_sees_the_writes_committed_before_it(api: Api) -> None:
    for expected in range(1, 6):
        await add_job(api.db, "AGENDADO")
        answers = await asyncio.gather(*(api.call("GET", f"{BASE}/stats") for _ in range(8)))
        totals = {assert_success(a, "Estatisticas recuperadas com sucesso")["total"] for a in answers}
        assert totals == {expected}
        bodies = await asyncio.gather(*(graphql(api, STATS_QUERY) for _ in range(8)))
        assert {b["data"]["stats"]["total"] for b in bodies} == {expected}


async def test_identical_mutations_sent_together_each_run(api: Api) -> None:
    cliente = await add_cliente(api.db)
    mutation = "mutation($i: DispatchInput!) { dispatchAutomation(input: $i) { id } }"
    variables = {"i": {"automationType": "demo.echo", "clienteId": cliente, "context": {"n": 1}}}
    bodies = await asyncio.gather(*(graphql(api, mutation, variables=variables) for _ in range(6)))
    ids = {b["data"]["dispatchAutomation"]["id"] for b in bodies}
    assert len(ids) == 6
    stats = await graphql(api, STATS_QUERY)
    assert stats["data"]["stats"]["total"] == 6


async def test_callers_with_other_rights_get_their_own_answer(api: Api) -> None:
    await add_job(api.db, "EXECUTANDO")
    kinds = ["admin", "write_only", "reader", "revoked"] * 3
    bodies = await asyncio.gather(*(graphql(api, STATS_QUERY, kind) for kind in kinds))
    for kind, body in zip(kinds, bodies, strict=True):
        if kind in ("admin", "reader"):
            assert body["data"]["stats"]["total"] == 1, body
        else:
            code = "FORBIDDEN" if kind == "write_only" else "UNAUTHENTICATED"
            assert body["errors"][0]["extensions"]["code"] == code, body
    rest = await asyncio.gather(*(api.call("GET", f"{BASE}/stats", kind) for kind in kinds))
    assert [r.status_code for r in rest] == [200, 403, 200, 401] * 3


async def test_connections_closed_by_the_server_are_replaced_unnoticed(api: Api) -> None:
    """After PostgreSQL drops every pooled connection (a restart does the same), the next
    requests get fresh ones instead of failing on a dead one."""
    await add_job(api.db, "AGENDADO")
    # Fill the pool with several idle connections.
    await asyncio.gather(*(api.call("GET", f"{BASE}/?page={n}") for n in range(1, 9)))
    server, database = api.services.settings.database_url.replace("+asyncpg", "").rsplit("/", 1)
    admin = await asyncpg.connect(server)
    try:
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            database,
        )
    finally:
        await admin.close()
    assert killed >= 1
    await asyncio.sleep(0.2)  # the terminations reach the client sockets
    answers = await asyncio.gather(*(api.call("GET", f"{BASE}/?page={n}") for n in range(1, 9)))
    assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers if a.status_code != 200]
    stats = await graphql(api, STATS_QUERY)
    assert stats["data"]["stats"]["total"] == 1
