"""A database that stops answering, or has no room left for a write, is an outage: 503 with
Retry-After (REST) and SERVICE_UNAVAILABLE (GraphQL), never a 500."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import event, func, select, text
from sqlalchemy.exc import DBAPIError, OperationalError

from tests.integration.rest_support import running_api
from tests.services import PG_HOST, PG_PORT, PG_USER
from tests.support.settings import MakeSettings
from worker_automation.asgi.app import create_app
from worker_automation.models.database import database_exhausted, database_unavailable
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE, create_key
from worker_automation.resolvers.machines import register_machine
from worker_automation.resolvers.services import Services
from worker_automation.rest_compat.http import MSG_DATABASE_DOWN

pytestmark = pytest.mark.services

JOBS = "/api/v1/jobs"


async def test_database_down_answers_503(services: Services) -> None:
    key = await create_key(
        services.db, name="admin", perfil="administrador", scopes=[SCOPE_READ, SCOPE_WRITE]
    )
    headers = {"X-API-Key": key.secret}
    app = create_app(services.settings)
    database = services.settings.database_url.rsplit("/", 1)[1]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            assert (await http.get("/api/v1/worker-automation/stats", headers=headers)).status_code == 200
            admin = await asyncpg.connect(f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres")
            try:
                # The database closes: its connections are cut and new ones refused.
                await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", database
                )
                for path in ("/api/v1/worker-automation/stats", "/api/v1/worker-automation/?page=1"):
                    answer = await http.get(path, headers=headers)
                    assert answer.status_code == 503, (path, answer.text)
                    assert answer.headers["Retry-After"].isdigit()
                    assert answer.json()["status"] == "error" and answer.json()["data"] is None
                body = {"automation_type": "demo.echo", "context": {}}
                assert (await http.post("/api/v1/jobs", json=body, headers=headers)).status_code == 503
                graphql = await http.post("/graphql", json={"query": "{ stats { total } }"}, headers=headers)
                # Refused before execution (the key could not be checked): 503 in GraphQL's shape.
                assert graphql.status_code == 503 and graphql.headers["Retry-After"].isdigit()
                (error,) = graphql.json()["errors"]
                assert error["extensions"]["code"] == "SERVICE_UNAVAILABLE"
            finally:
                await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
                await admin.close()
            # Back: the same process answers again.
            assert (await http.get("/api/v1/worker-automation/stats", headers=headers)).status_code == 200


def _job_rows(path: str) -> list[tuple[Any, ...]]:
    """Every job row as the file holds it, read apart from the app."""
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT id, status, task_id, context, result, data_fim FROM workers ORDER BY id"
        ).fetchall()


async def test_a_full_disk_answers_503_writes_nothing_and_logs_one_error(
    tmp_path: Path, make_settings: MakeSettings, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite's genuine SQLITE_FULL: no page may be added to the file (``max_page_count`` set to
    its current size on every connection), so any write that needs one fails as on a full disk."""
    path = str(tmp_path / "wa.db")
    async with running_api(make_settings(f"sqlite+aiosqlite:///{path}", None)) as api:
        machine = await register_machine(
            api.db, CLI_ACTOR, api.services.settings.queues, name="m", queue="scan"
        )
        worker = {"X-Worker-Api-Key": machine.api_key}
        created = await api.call("POST", JOBS, json={"automation_type": "demo.echo", "context": {"a": 1}})
        job_id = created.json()["data"]["id"]
        assert (
            await api.call("POST", f"{JOBS}/{job_id}/start", kind=None, headers=worker)
        ).status_code == 200
        async with api.db.connection() as conn:
            pages = int((await conn.execute(text("PRAGMA page_count"))).scalar_one())

        def no_room(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA max_page_count={pages}")
            cursor.close()

        event.listen(api.db.engine.sync_engine, "connect", no_room)
        await api.db.engine.dispose()
        # The last pages filled with the smallest audit entries: even the entry recording a
        # refused operation finds no room, as on a disk that is full.
        filler = text(
            "INSERT INTO audit_log (at, actor, action, result) VALUES (CURRENT_TIMESTAMP, '', '', '')"
        )
        with pytest.raises(OperationalError, match="database or disk is full"):
            async with api.db.connection() as conn:
                while True:
                    await conn.execute(filler)
        rows_before = _job_rows(path)
        queued_before = await api.services.broker.queue_lengths()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            bulky = {"blob": "x" * 30_000}  # needs pages the file may not add
            dispatch = await api.call("POST", JOBS, json={"automation_type": "demo.echo", "context": bulky})
            completion = await api.call(
                "POST", f"{JOBS}/{job_id}/complete", kind=None, headers=worker, json={"result": bulky}
            )
            mutation = (
                "mutation($c: JSON) { dispatchAutomation(input: "
                '{automationType: "demo.echo", context: $c}) { id } }'
            )
            graphql = await api.call("POST", "/graphql", json={"query": mutation, "variables": {"c": bulky}})
        for answer in (dispatch, completion):
            assert answer.status_code == 503, answer.text
            assert answer.headers["Retry-After"].isdigit()
            assert answer.json() == {"status": "error", "message": MSG_DATABASE_DOWN, "data": None}
        (error,) = graphql.json()["errors"]
        assert error["extensions"]["code"] == "SERVICE_UNAVAILABLE" and graphql.json()["data"] is None
        # One ERROR line per refused request, naming the cause, without a traceback; the audit
        # entries that found no room either are a WARNING each.
        logged = [r for r in caplog.records if r.name.startswith("worker_automation")]
        errors = [r for r in logged if r.levelno >= logging.ERROR]
        assert len(errors) == 3, [r.getMessage() for r in logged]
        assert all("database or disk is full" in r.getMessage() for r in errors)
        assert {r.name for r in logged if r.levelno < logging.ERROR} == {"worker_automation.resolvers.audit"}
        assert all(r.exc_info is None for r in logged) and "Traceback" not in caplog.text
        # Nothing half-way: no new row, the running job untouched, no task sent.
        assert _job_rows(path) == rows_before
        assert await api.services.broker.queue_lengths() == queued_before

        # Room made: the same process takes both writes again.
        event.remove(api.db.engine.sync_engine, "connect", no_room)
        await api.db.engine.dispose()
        again = await api.call("POST", JOBS, json={"automation_type": "demo.echo", "context": bulky})
        assert again.status_code == 201, again.text
        done = await api.call(
            "POST", f"{JOBS}/{job_id}/complete", kind=None, headers=worker, json={"result": bulky}
        )
        assert done.status_code == 200, done.text


@pytest.mark.parametrize(
    ("errcode", "outage"),
    [("disk_full", True), ("out_of_memory", True), ("too_many_connections", True), ("data_exception", False)],
)
async def test_postgresql_out_of_resources_is_an_outage(
    services: Services, errcode: str, outage: bool
) -> None:
    """PostgreSQL's class 53 (disk full, out of memory, out of connections), raised by the server
    itself, is told apart from a statement that was wrong."""
    raising = f"DO $$ BEGIN RAISE EXCEPTION 'no room' USING ERRCODE = '{errcode}'; END $$"
    async with services.db.connection() as conn:
        with pytest.raises(DBAPIError) as caught:
            await conn.execute(text(raising))
    assert database_unavailable(caught.value) is outage
    assert database_exhausted(caught.value) is outage


# A write as the hot paths run it on the driver (see Database.write_row): which backend ran it.
_BACKEND = select(func.pg_backend_pid())


async def test_a_write_on_a_connection_the_server_just_cut_is_an_outage(services: Services) -> None:
    """A pooled connection whose backend was just terminated (as by a restart), handed out
    before its socket closed: the write on it fails as an outage (which the transports answer
    503), not as an unexplained error (a 500), and the next write runs on a new connection.
    Each round cuts the connection the last write ran on and writes again at once."""
    db = services.db
    admin = await asyncpg.connect(f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres")
    refused: list[BaseException] = []
    try:
        for _ in range(10):
            row = await db.write_row(_BACKEND, {})
            assert row is not None
            await admin.execute("SELECT pg_terminate_backend($1)", row[0])
            try:
                await db.write_row(_BACKEND, {})
            except Exception as exc:
                refused.append(exc)
    finally:
        await admin.close()
    assert refused, "no write met a cut connection"
    assert [type(exc).__name__ for exc in refused if not database_unavailable(exc)] == []
    after = await db.write_row(_BACKEND, {})
    assert after is not None
