"""Helpers for the REST tests: the app running with its lifespan, keys of every kind, job rows."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import select
from starlette.applications import Starlette

from worker_automation.asgi.app import create_app
from worker_automation.models import AuditEntry, Cliente, Job, utcnow
from worker_automation.models.database import Database
from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE, create_key, revoke_key
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings

BASE = "/api/v1/worker-automation"
ENVELOPE_KEYS = {"status", "message", "data"}
REST_ITEM_KEYS = {
    "id",
    "task_id",
    "cliente_id",
    "usuario_id",
    "path_file",
    "status",
    "data_inicio",
    "data_fim",
    "mensagem_erro",
    "automation_type",
    "queue",
    "priority",
    "retry_count",
    "progress",
    "metadata_json",
    "display_name",
    "client_name",
}


@dataclass
class Keys:
    """One secret per kind of caller the permission rules distinguish."""

    admin: str = ""
    diretoria: str = ""
    funcionario: str = ""
    reader: str = ""
    write_only: str = ""
    revoked: str = ""

    def headers(self, kind: str) -> dict[str, str]:
        return {"X-API-Key": getattr(self, kind)}


@dataclass
class Api:
    """The running app, a client bound to it, its services and the keys."""

    app: Starlette
    client: httpx.AsyncClient
    services: Services
    keys: Keys = field(default_factory=Keys)

    @property
    def db(self) -> Database:
        return self.services.db

    async def call(self, method: str, path: str, kind: str | None = "admin", **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if kind is not None:
            headers.update(self.keys.headers(kind))
        return await self.client.request(method, path, headers=headers, **kwargs)


async def make_keys(db: Database) -> Keys:
    both = [SCOPE_READ, SCOPE_WRITE]
    keys = Keys(
        admin=(await create_key(db, name="admin", perfil="administrador", scopes=both)).secret,
        diretoria=(await create_key(db, name="diretoria", perfil="diretoria", scopes=both)).secret,
        funcionario=(await create_key(db, name="func", perfil="funcionario", scopes=both)).secret,
        reader=(await create_key(db, name="reader", perfil="administrador", scopes=[SCOPE_READ])).secret,
        write_only=(await create_key(db, name="writer", perfil="administrador", scopes=[SCOPE_WRITE])).secret,
    )
    revoked = await create_key(db, name="revoked", perfil="administrador", scopes=both)
    await revoke_key(db, revoked.id)
    keys.revoked = revoked.secret
    return keys


@asynccontextmanager
async def running_api(settings: Settings) -> AsyncIterator[Api]:
    """The whole app with its lifespan run, as a server would run it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        services = await app.state.runtime.services()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            api = Api(app, client, services)
            api.keys = await make_keys(services.db)
            yield api


async def add_cliente(db: Database, razao_social: str = "Comércio de Alimentos Ltda") -> int:
    async with db.session() as session:
        row = Cliente(razao_social=razao_social, cnpj=uuid.uuid4().hex[:14])
        session.add(row)
        await session.flush()
        return row.id


async def add_job(db: Database, status: str = "AGENDADO", **values: Any) -> int:
    """A job row as the platform leaves it in ``status`` (timestamps filled accordingly)."""
    now = utcnow()
    row: dict[str, Any] = {
        "task_id": str(uuid.uuid4()),
        "status": status,
        "automation_type": "certidao_trabalhista",
        "queue": "certidao",
        "priority": 0,
        "retry_count": 0,
        "progress": 0,
        "usuario_id": 42,
        "created_at": now - timedelta(minutes=5),
    }
    if status != "AGENDADO":
        row["data_inicio"] = now - timedelta(minutes=4)
    if status == "EXECUTANDO":
        row["progress"] = 45
    if status in ("CONCLUIDO", "FALHA", "CANCELADO"):
        row["data_fim"] = now - timedelta(minutes=1)
    if status == "CONCLUIDO":
        row["progress"] = 100
        row["result"] = {"certidao_id": 1234}
    if status == "FALHA":
        row["mensagem_erro"] = "Portal indisponivel"
    row.update(values)
    async with db.session() as session:
        job = Job(**row)
        session.add(job)
        await session.flush()
        return job.id


async def snapshot(db: Database) -> list[tuple[Any, ...]]:
    """Every job row's mutable columns, to prove a refused request changed nothing."""
    async with db.session() as session:
        rows = await session.execute(
            select(
                Job.id,
                Job.task_id,
                Job.status,
                Job.queue,
                Job.priority,
                Job.retry_count,
                Job.progress,
                Job.data_fim,
                Job.mensagem_erro,
            ).order_by(Job.id)
        )
        return [tuple(r) for r in rows]


async def audit_entries(db: Database) -> list[AuditEntry]:
    async with db.session() as session:
        return list((await session.scalars(select(AuditEntry).order_by(AuditEntry.id))).all())


def assert_success(response: httpx.Response, message: str) -> Any:
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == ENVELOPE_KEYS
    assert body["status"] == "success"
    assert body["message"] == message
    return body["data"]


def assert_error(response: httpx.Response, status_code: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status_code, response.text
    body = response.json()
    assert set(body) == ENVELOPE_KEYS
    assert body["status"] == "error"
    assert isinstance(body["message"], str) and body["message"]
    if field is not None:
        assert body["data"]["field"] == field, body
    return dict(body)
