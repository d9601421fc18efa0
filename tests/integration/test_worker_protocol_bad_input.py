"""Bad input to the worker protocol over HTTP (real PostgreSQL and Redis): the right status, the
field named, and the job row left exactly as it was; and a trigger while the broker is down."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from starlette.applications import Starlette

from tests.integration.harness import free_port
from tests.support.settings import MakeSettings
from worker_automation.asgi.app import create_app
from worker_automation.models import Job
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.auth import create_key
from worker_automation.resolvers.machines import machine_named, register_machine, set_machine_status
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings

pytestmark = pytest.mark.services

SCOPES = "worker_automation:read,worker_automation:write"


@dataclass
class Api:
    """The app under test, its services and the keys the tests use."""

    http: httpx.AsyncClient
    services: Services
    operator: dict[str, str]
    holder: dict[str, str]
    other: dict[str, str]

    async def create(self, automation_type: str, context: Any, **extra: Any) -> httpx.Response:
        body = {"automation_type": automation_type, "cliente_id": None, "context": context, **extra}
        return await self.http.post("/api/v1/jobs", json=body, headers=self.operator)

    async def job(self, automation_type: str = "demo.sleep", context: Any = None) -> int:
        response = await self.create(automation_type, context if context is not None else {"seconds": 5})
        assert response.status_code == 201, response.text
        return int(response.json()["data"]["id"])

    async def row(self, job_id: int) -> dict[str, Any]:
        async with self.services.db.session() as session:
            row = await session.get(Job, job_id, populate_existing=True)
            assert row is not None
            return {c.key: getattr(row, c.key) for c in Job.__mapper__.column_attrs}

    async def count(self) -> int:
        async with self.services.db.session() as session:
            return int(await session.scalar(select(func.count()).select_from(Job)) or 0)


async def served(app: Starlette) -> Services:
    services: Services = await app.state.runtime.services()
    return services


async def keys_for(services: Services) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    operator = await create_key(services.db, name="ops", perfil="administrador", scopes=SCOPES)
    machines = []
    for name in ("holder", "other"):
        created = await register_machine(
            services.db, CLI_ACTOR, services.settings.queues, name=name, automation="demo.sleep"
        )
        machines.append({"X-Worker-Api-Key": created.api_key})
    return {"X-API-Key": operator.secret}, machines[0], machines[1]


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[Api]:
    """The app running with ``settings``, an operator key and two machines' keys."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        services = await served(app)
        operator, holder, other = await keys_for(services)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            yield Api(http, services, operator, holder, other)


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    async with serving(make_settings(pg_database_url, redis_url)) as running:
        yield running


def assert_error(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["status"] == "error" and body["message"], body
    assert "Traceback" not in response.text
    if field is not None:
        assert body["data"]["field"] == field, body
    return body


async def test_unknown_automation_is_422_naming_automation_type(api: Api) -> None:
    for automation_type in ("nao.existe", "", None, 42):
        response = await api.create(automation_type, {})  # type: ignore[arg-type]
        assert_error(response, 422, "automation_type")
    assert await api.count() == 0


BAD_CONTEXTS: list[dict[str, Any]] = [
    {"seconds": "abc"},
    {"seconds": 99999},
    {"seconds": -1},
    {"seconds": True},
    {"seconds": None},
    {},
]


async def test_context_failing_the_form_is_422_naming_the_field(api: Api) -> None:
    for context in BAD_CONTEXTS:
        body = assert_error(await api.create("demo.sleep", context), 422, "context.seconds")
        assert "seconds" in body["message"], (context, body)
    assert await api.count() == 0


async def test_context_that_is_not_an_object_or_unknown_key(api: Api) -> None:
    assert_error(await api.create("demo.sleep", [1, 2]), 422, "context")
    assert_error(await api.create("demo.sleep", {"seconds": 1, "extra": 2}), 422, "context.extra")
    assert_error(await api.create("demo.sleep", {"seconds": 1}, priority=10), 422, "priority")
    assert await api.count() == 0


async def test_operator_key_is_required_to_create(api: Api) -> None:
    body = {"automation_type": "demo.echo", "context": {}}
    assert_error(await api.http.post("/api/v1/jobs", json=body), 401)
    assert_error(await api.http.post("/api/v1/jobs", json=body, headers={"X-API-Key": "wak_nope"}), 401)
    # A machine key is not an operator key.
    assert_error(
        await api.http.post("/api/v1/jobs", json=body, headers={"X-API-Key": api.holder["X-Worker-Api-Key"]}),
        401,
    )
    read_only = await create_key(
        api.services.db, name="ro", perfil="funcionario", scopes="worker_automation:read"
    )
    assert_error(await api.http.post("/api/v1/jobs", json=body, headers={"X-API-Key": read_only.secret}), 403)
    assert await api.count() == 0


async def test_missing_or_wrong_worker_key_is_401(api: Api) -> None:
    job_id = await api.job()
    before = await api.row(job_id)
    calls: list[tuple[str, dict[str, Any] | None]] = [
        (f"/api/v1/jobs/{job_id}/start", None),
        (f"/api/v1/jobs/{job_id}/progress", {"progress": 10}),
        (f"/api/v1/jobs/{job_id}/complete", {"result": {}}),
        (f"/api/v1/jobs/{job_id}/fail", {"error": "x"}),
    ]
    bad_headers: list[dict[str, str]] = [
        {},
        {"X-Worker-Api-Key": "wmk_wrong"},
        {"X-Worker-Api-Key": ""},
        api.operator,
    ]
    for headers in bad_headers:
        assert_error(await api.http.get("/api/v1/jobs/pending", headers=headers), 401)
        for path, body in calls:
            assert_error(await api.http.post(path, json=body, headers=headers), 401)
    assert await api.row(job_id) == before


async def test_the_key_is_checked_before_the_job_whatever_its_state(api: Api) -> None:
    # Claims and reports find the machine in their own statements: an unknown key is still 401
    # on a running job and on a job that does not exist, and the machine's state still counts.
    running = await api.job()
    assert (await api.http.post(f"/api/v1/jobs/{running}/start", headers=api.holder)).status_code == 200
    before = await api.row(running)
    wrong = {"X-Worker-Api-Key": "wmk_wrong"}
    reports: list[tuple[str, dict[str, Any]]] = [
        (f"{running}/complete", {"result": {}}),
        (f"{running}/fail", {"error": "x"}),
    ]
    for path, payload in reports:
        assert_error(await api.http.post(f"/api/v1/jobs/{path}", json=payload, headers=wrong), 401)
    # Bad input with an unknown key: 401 as well, as when the key was looked up first.
    bad: list[tuple[str, dict[str, Any]]] = [
        ("abc/complete", {}),
        (f"{running}/fail", {}),
        (f"{running}/start", {"task_id": 5}),
    ]
    for path, payload in bad:
        assert_error(await api.http.post(f"/api/v1/jobs/{path}", json=payload, headers=wrong), 401)
    assert_error(
        await api.http.post(f"/api/v1/jobs/{running}/fail", json={}, headers=api.holder), 422, "error"
    )
    for action in ("start", "complete"):
        assert_error(await api.http.post(f"/api/v1/jobs/999999/{action}", json={}, headers=wrong), 401)
        assert_error(await api.http.post(f"/api/v1/jobs/999999/{action}", json={}, headers=api.other), 404)
    assert await api.row(running) == before

    queued = await api.job()
    other = await machine_named(api.services.db, "other")
    assert other is not None
    await set_machine_status(api.services.db, CLI_ACTOR, other.id, False)
    body = assert_error(await api.http.post(f"/api/v1/jobs/{queued}/start", headers=api.other), 409)
    assert body["data"]["reason"] == "machine_off"
    assert (await api.row(queued))["status"] == "AGENDADO"


async def test_claim_of_a_finished_job_is_409_not_claimable(api: Api) -> None:
    job_id = await api.job()
    claimed = await api.http.post(f"/api/v1/jobs/{job_id}/start", headers=api.holder)
    assert claimed.status_code == 200, claimed.text
    done = await api.http.post(
        f"/api/v1/jobs/{job_id}/complete", json={"result": {"ok": 1}}, headers=api.holder
    )
    assert done.status_code == 200, done.text
    before = await api.row(job_id)
    for headers in (api.holder, api.other):
        body = assert_error(await api.http.post(f"/api/v1/jobs/{job_id}/start", headers=headers), 409)
        assert body["data"]["reason"] == "not_claimable"
    assert await api.row(job_id) == before
    assert before["status"] == "CONCLUIDO" and before["result"] == {"ok": 1}


async def test_reports_by_a_machine_not_holding_the_claim_are_409(api: Api) -> None:
    job_id = await api.job()
    assert (await api.http.post(f"/api/v1/jobs/{job_id}/start", headers=api.holder)).status_code == 200
    before = await api.row(job_id)
    assert before["status"] == "EXECUTANDO"
    other = api.other
    assert_error(
        await api.http.post(f"/api/v1/jobs/{job_id}/complete", json={"result": {"x": 1}}, headers=other), 409
    )
    assert_error(
        await api.http.post(f"/api/v1/jobs/{job_id}/fail", json={"error": "nope"}, headers=other), 409
    )
    assert_error(
        await api.http.post(f"/api/v1/jobs/{job_id}/progress", json={"progress": 50}, headers=other), 409
    )
    body = assert_error(await api.http.post(f"/api/v1/jobs/{job_id}/start", headers=other), 409)
    assert body["data"]["reason"] == "already_claimed"
    assert await api.row(job_id) == before
    # Reports on a job nobody claimed are refused too.
    waiting = await api.job()
    waiting_before = await api.row(waiting)
    assert_error(await api.http.post(f"/api/v1/jobs/{waiting}/complete", json={}, headers=api.holder), 409)
    assert await api.row(waiting) == waiting_before


async def test_progress_out_of_range_is_422(api: Api) -> None:
    job_id = await api.job()
    assert (await api.http.post(f"/api/v1/jobs/{job_id}/start", headers=api.holder)).status_code == 200
    before = await api.row(job_id)
    for progress in (101, -1, 1000, 100.5, 1.5, 50.0, "50", True, None, [10]):
        body = {"progress": progress}
        response = await api.http.post(f"/api/v1/jobs/{job_id}/progress", json=body, headers=api.holder)
        assert_error(response, 422, "progress")
    assert await api.row(job_id) == before


async def test_malformed_bodies_are_422_and_change_nothing(api: Api) -> None:
    job_id = await api.job()
    assert (await api.http.post(f"/api/v1/jobs/{job_id}/start", headers=api.holder)).status_code == 200
    before = await api.row(job_id)
    path = f"/api/v1/jobs/{job_id}"
    holder = {**api.holder, "Content-Type": "application/json"}
    assert_error(await api.http.post(f"{path}/progress", content=b"{not json", headers=holder), 422, "body")
    assert_error(await api.http.post(f"{path}/progress", content=b"[1]", headers=holder), 422, "body")
    assert_error(await api.http.post(f"{path}/progress", json={}, headers=api.holder), 422, "progress")
    assert_error(await api.http.post(f"{path}/fail", json={"error": ""}, headers=api.holder), 422, "error")
    assert_error(await api.http.post(f"{path}/fail", json={"error": 12}, headers=api.holder), 422, "error")
    assert await api.row(job_id) == before


async def test_non_integer_job_id_is_422(api: Api) -> None:
    job_id = await api.job()
    before = await api.row(job_id)
    actions: list[tuple[str, dict[str, Any] | None]] = [
        ("start", None),
        ("progress", {"progress": 1}),
        ("complete", {}),
        ("fail", {"error": "x"}),
    ]
    for bad_id in ("abc", "1.5", "1e3", "%20", f"{job_id}x"):
        for action, body in actions:
            response = await api.http.post(f"/api/v1/jobs/{bad_id}/{action}", json=body, headers=api.holder)
            assert_error(response, 422, "job_id")
    assert await api.row(job_id) == before


async def test_unknown_job_id_is_404(api: Api) -> None:
    response = await api.http.post("/api/v1/jobs/987654/start", headers=api.holder)
    assert_error(response, 404)


@pytest.fixture
async def broker_down(pg_database_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    """The app with its Redis URL on a port nobody listens on."""
    async with serving(make_settings(pg_database_url, f"redis://127.0.0.1:{free_port()}/0")) as running:
        yield running


async def test_trigger_with_the_broker_down_is_503_and_keeps_the_row(broker_down: Api) -> None:
    started = time.monotonic()
    response = await broker_down.create("demo.echo", {"pedido": 1})
    elapsed = time.monotonic() - started
    body = assert_error(response, 503)
    assert elapsed < 10.0, f"the refusal took {elapsed:.1f}s"
    job_id = body["data"]["id"]
    assert isinstance(job_id, int)
    row = await broker_down.row(job_id)
    assert row["status"] == "AGENDADO"
    assert row["task_id"] is None
    assert row["context"] == {"pedido": 1}
    assert await broker_down.count() == 1
    # Nothing is lost: a dedicated machine still finds it in its sweep and claims it.
    services = broker_down.services
    echo = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="echo", automation="demo.echo"
    )
    headers = {"X-Worker-Api-Key": echo.api_key}
    pending = await broker_down.http.get("/api/v1/jobs/pending", headers=headers)
    assert pending.status_code == 200, pending.text
    assert [job["id"] for job in pending.json()["data"]] == [job_id]
    claimed = await broker_down.http.post(f"/api/v1/jobs/{job_id}/start", headers=headers)
    assert claimed.status_code == 200, claimed.text


async def test_a_completion_about_another_run_of_the_job_is_409_stale_task(api: Api) -> None:
    job_id = await api.job()
    claimed = await api.http.post(f"/api/v1/jobs/{job_id}/start", headers=api.holder)
    task_id = claimed.json()["data"]["task_id"]
    before = await api.row(job_id)
    path = f"/api/v1/jobs/{job_id}/complete"
    stale = await api.http.post(path, json={"result": 1, "task_id": "an-earlier-run"}, headers=api.holder)
    assert assert_error(stale, 409)["data"]["reason"] == "stale_task"
    assert_error(await api.http.post(path, json={"task_id": 7}, headers=api.holder), 422, "task_id")
    assert await api.row(job_id) == before
    done = await api.http.post(path, json={"result": 2, "task_id": task_id}, headers=api.holder)
    assert done.status_code == 200, done.text
    assert (await api.row(job_id))["result"] == 2
