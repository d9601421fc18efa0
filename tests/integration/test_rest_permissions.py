"""The permission matrix of every route: 401 for no, unknown or revoked keys; 403 for a missing
scope or (maintenance) a perfil other than administrador or diretoria; and 401 before 403 before
any validation of the input."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from tests.integration.rest_support import BASE, Api, add_job, assert_error, running_api
from tests.support.pools import checked_out
from tests.support.settings import MakeSettings

pytestmark = pytest.mark.services

Level = Literal["read", "write", "manager"]


@dataclass(frozen=True)
class RouteCase:
    """A route, the permission it needs, and what a successful call needs to exist first."""

    method: str
    path: str
    level: Level
    status: str | None = None  # a job in this status is created and its id fills {id}
    body: Any = None
    invalid_path: str | None = None  # the same route with bad input, to check the order of checks

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


ROUTES = [
    RouteCase("GET", "/", "read", invalid_path="/?page=0"),
    RouteCase("GET", "/stats", "read"),
    RouteCase("GET", "/active", "read"),
    RouteCase("GET", "/queued", "read", invalid_path="/queued?per_page=abc"),
    RouteCase("GET", "/search-automations?q=cnd", "read"),
    RouteCase("GET", "/queue-live-status", "read"),
    RouteCase("GET", "/broker-status", "read"),
    RouteCase("GET", "/workers-inspect", "read"),
    RouteCase("GET", "/status/{task}", "read", status="CONCLUIDO", invalid_path="/status/%20"),
    RouteCase("GET", "/dashboard", "read"),
    RouteCase("GET", "/{id}", "read", status="AGENDADO", invalid_path="/abc"),
    RouteCase("POST", "/{id}/cancel", "write", status="AGENDADO", invalid_path="/abc/cancel"),
    RouteCase("POST", "/{id}/retry", "write", status="FALHA", invalid_path="/abc/retry"),
    RouteCase("POST", "/{id}/move", "write", "AGENDADO", {"target_queue": "scraping"}, "/1/move"),
    RouteCase("POST", "/{id}/reorder", "write", "AGENDADO", {"new_priority": 2}, "/1/reorder"),
    RouteCase("POST", "/clear-queue?scope=queued", "manager", invalid_path="/clear-queue?scope=bogus"),
    RouteCase(
        "POST",
        "/broker/purge-queue/scan?confirm=true",
        "manager",
        invalid_path="/broker/purge-queue/scan",
    ),
    RouteCase("DELETE", "/cleanup-no-client", "manager"),
    RouteCase("POST", "/sync-orphans", "manager"),
]


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    settings = make_settings(pg_database_url, redis_url, inspect_timeout_seconds=0.2)
    async with running_api(settings) as running:
        yield running


async def target(api: Api, route: RouteCase) -> str:
    """The route's URL, with a fresh job in the needed status when it acts on one."""
    path = route.path
    if route.status is not None:
        job_id = await add_job(api.db, route.status, queue="certidao")
        task = (await api.call("GET", f"{BASE}/{job_id}")).json()["data"]["task_id"]
        path = path.replace("{id}", str(job_id)).replace("{task}", task)
    return BASE + path


def denied_scope_kind(route: RouteCase) -> str:
    """A key that authenticates but lacks the scope this route needs."""
    return "write_only" if route.level == "read" else "reader"


@pytest.mark.parametrize("route", ROUTES, ids=str)
async def test_permission_matrix(api: Api, route: RouteCase) -> None:
    url = await target(api, route)
    send = {"json": route.body} if route.body is not None else {}
    for headers in ({}, {"X-API-Key": "wak_not_a_key"}, {"Authorization": "Bearer nope"}):
        assert_error(await api.call(route.method, url, None, headers=headers, **send), 401)
    assert_error(await api.call(route.method, url, "revoked", **send), 401)
    assert_error(await api.call(route.method, url, denied_scope_kind(route), **send), 403)
    if route.level == "manager":
        refused = assert_error(await api.call(route.method, url, "funcionario", **send), 403)
        assert "administrador" in refused["message"]
        allowed = ["admin", "diretoria"]
    else:
        allowed = ["admin", "diretoria", "funcionario"]
    for kind in allowed:
        # Each caller acts on its own job: a second cancel of the same job would be a 409.
        url = await target(api, route)
        response = await api.call(route.method, url, kind, **send)
        assert response.status_code == 200, (kind, response.text)
        assert response.json()["status"] == "success"
    bearer = await api.call(
        route.method,
        await target(api, route),
        None,
        headers={"Authorization": f"Bearer {api.keys.admin}"},
        **send,
    )
    assert bearer.status_code == 200, bearer.text
    if route.invalid_path is not None:
        await check_order(api, route)


@pytest.mark.parametrize("path", ["/status/{task}", "/{id}", "/status/no-such-task", "/999999999"])
async def test_a_lookup_by_id_answers_nothing_but_401_to_a_bad_key(api: Api, path: str) -> None:
    """The lookups read the job beside the key's check: whatever the read finds (the job, or
    nothing), a caller without a good key learns only that its key was refused."""
    url = await target(api, RouteCase("GET", path, "read", status="CONCLUIDO"))
    for kind, headers in ((None, {"X-API-Key": "wak_not_a_key"}), ("revoked", {}), (None, {})):
        refused = assert_error(await api.call("GET", url, kind, headers=headers), 401)
        assert refused["data"] is None
    assert_error(await api.call("GET", url, "write_only"), 403)


async def check_order(api: Api, route: RouteCase) -> None:
    """Bad input is reported only to a caller allowed to send it: 401, then 403, then 422."""
    assert route.invalid_path is not None
    url = BASE + route.invalid_path
    send = {"content": b"{not json"} if route.body is not None else {}
    assert_error(await api.call(route.method, url, None, **send), 401)
    assert_error(await api.call(route.method, url, None, headers={"X-API-Key": "wak_not_a_key"}, **send), 401)
    assert_error(await api.call(route.method, url, "revoked", **send), 401)
    assert_error(await api.call(route.method, url, denied_scope_kind(route), **send), 403)
    if route.level == "manager":
        assert_error(await api.call(route.method, url, "funcionario", **send), 403)
    assert_error(await api.call(route.method, url, "admin", **send), 422)


async def test_lookups_refused_in_a_burst_give_every_connection_back(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """A refused key's lookup leaves the read it started beside the check to finish: stopped in
    the middle of its statement, a read used to leave its connection unusable and never returned."""
    job_id = await add_job(api.db, "CONCLUIDO", queue="certidao")
    urls = [f"{BASE}/{job_id}", f"{BASE}/999999", f"{BASE}/status/no-such-task"]
    before = checked_out(api.db.engine)  # what the app's own background work holds
    refused = [(None, {"X-API-Key": "wak_not_a_key"}), ("write_only", {}), ("revoked", {})]
    answers = await asyncio.gather(
        *(
            api.call("GET", urls[i % len(urls)], kind, headers=headers)
            for i in range(300)
            for kind, headers in refused[i % len(refused) : i % len(refused) + 1]
        )
    )
    assert {a.status_code for a in answers} == {401, 403}
    for _ in range(100):
        if checked_out(api.db.engine) <= before:
            break
        await asyncio.sleep(0.05)
    gc.collect()
    assert checked_out(api.db.engine) <= before
    # Nothing went wrong on the way: no connection collected unreturned, no statement cut off.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    ok = await api.call("GET", urls[0], "admin")
    assert ok.status_code == 200
