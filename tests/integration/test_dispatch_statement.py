"""One job dispatched on PostgreSQL: the row, its audit entry and the enabled check in one statement."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import delete, select

from worker_automation.domain.errors import Conflict
from worker_automation.models import AuditEntry, AutomationSetting, Cliente, Job
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.automations import update_settings
from worker_automation.resolvers.dispatch import dispatch
from worker_automation.resolvers.services import Services

ACTOR = Actor("key:ops", "administrador")


async def test_the_row_its_client_and_its_audit_entry_come_from_one_statement(services: Services) -> None:
    async with services.db.session() as session:
        client = Cliente(razao_social="Padaria Central")
        session.add(client)
        await session.flush()
        client_id = client.id

    view = await dispatch(
        services, ACTOR, automation_type="demo.echo", cliente_id=client_id, context={"n": 1}, priority=3
    )

    assert view.cliente_id == client_id and view.priority == 3 and view.status == "AGENDADO"
    assert view.as_dict(services.settings.tz)["client_name"] == "Padaria Central"
    async with services.db.reader() as session:
        job = (await session.execute(select(Job).where(Job.id == view.id))).scalar_one()
        entries = (
            (await session.execute(select(AuditEntry).where(AuditEntry.action == "dispatch"))).scalars().all()
        )
    assert job.task_id == view.task_id and job.context == {"n": 1} and job.queue == "scan"
    assert [(e.actor, e.perfil, e.target, e.result, e.detail) for e in entries] == [
        ("key:ops", "administrador", f"worker:{view.id}", "ok", None)
    ]
    waiting = await services.broker.waiting_task_ids()
    assert view.task_id in waiting


async def test_a_disabled_automation_is_refused_and_audited(services: Services) -> None:
    await update_settings(services.db, "demo.echo", actor=ACTOR, enabled=False)
    with pytest.raises(Conflict, match="desabilitada"):
        await dispatch(services, ACTOR, automation_type="demo.echo", cliente_id=None, context={})
    # Without a settings row, the registry's default (enabled) stands.
    async with services.db.session() as session:
        await session.execute(delete(AutomationSetting).where(AutomationSetting.key == "demo.echo"))
    view = await dispatch(services, ACTOR, automation_type="demo.echo", cliente_id=None, context={})

    async with services.db.reader() as session:
        jobs = (await session.execute(select(Job.id))).scalars().all()
        entries = (
            await session.execute(
                select(AuditEntry.result, AuditEntry.target, AuditEntry.detail)
                .where(AuditEntry.action == "dispatch")
                .order_by(AuditEntry.id)
            )
        ).all()
    assert jobs == [view.id]
    assert [(result, target) for result, target, _ in entries] == [
        ("conflict", None),
        ("ok", f"worker:{view.id}"),
    ]
    assert "desabilitada" in json.dumps(entries[0][2])
