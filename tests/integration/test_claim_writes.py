"""The writes every job makes, its creation, its claim and its completion: on PostgreSQL they run
on the driver itself (``Database.driver_writes``), once each, and record what SQLAlchemy's path
records."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import asyncpg
import pytest

from tests.integration.operator_support import StatementCounter
from tests.unit.graphql_support import make_api
from worker_automation.domain.errors import Conflict
from worker_automation.models.database import DriverStatement, database_unavailable
from worker_automation.resolvers import claims, dispatch, reads
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.automations import update_settings
from worker_automation.resolvers.job_views import JobView
from worker_automation.resolvers.machines import MachineKey, register_machine
from worker_automation.resolvers.services import Services

# What differs between two views of the same row by nature, not by path.
_MOVING = ("updated_at",)


def _fields(view: JobView) -> dict[str, Any]:
    return {k: v for k, v in asdict(view).items() if k not in _MOVING}


async def _dispatch_claim_and_complete(services: Services, key: MachineKey) -> tuple[JobView, ...]:
    created = await dispatch.dispatch(
        services, CLI_ACTOR, automation_type="demo.echo", cliente_id=None, context={"texto": "olá"}
    )
    claimed = await claims.claim(services, key, created.id, created.task_id)
    done = await claims.complete(
        services, key, created.id, {"ok": [1, "dois"], "nada": None}, created.task_id
    )
    return created, claimed, done


async def _machine_key(services: Services) -> MachineKey:
    registered = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="box", queue="scan"
    )
    return MachineKey.sent(registered.api_key)


async def test_a_dispatch_a_claim_and_a_completion_run_on_the_driver_and_record_the_same(
    embedded_broker_services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = embedded_broker_services
    key = await _machine_key(services)
    ran: list[str] = []
    driver_writes = services.db.driver_writes

    def watched(*, transaction: bool) -> Any:
        ran.append("transaction" if transaction else "statement")
        return driver_writes(transaction=transaction)

    monkeypatch.setattr(services.db, "driver_writes", watched)
    on_driver = ["statement", "transaction", "statement"] if services.db.dialect == "postgresql" else []
    fast = await _dispatch_claim_and_complete(services, key)
    assert ran == on_driver

    # The same three writes through SQLAlchemy (a listener on its statements sends every one there).
    with StatementCounter(services) as counted:
        slow = await _dispatch_claim_and_complete(services, key)
    assert len(counted.statements) >= 4
    assert ran == on_driver

    for fast_view, slow_view in zip(fast, slow, strict=True):
        fast_fields, slow_fields = _fields(fast_view), _fields(slow_view)
        for name in ("id", "task_id", "created_at", "data_inicio", "data_fim"):
            fast_fields.pop(name), slow_fields.pop(name)
        assert fast_fields == slow_fields
    created, claimed, done = fast
    assert created.status == "AGENDADO" and created.context == {"texto": "olá"}
    assert created.created_at.tzinfo is not None and created.task_id
    assert done.status == "CONCLUIDO" and done.result == {"ok": [1, "dois"], "nada": None}
    assert claimed.data_inicio is not None and claimed.data_inicio.tzinfo is not None
    assert done.data_fim is not None and done.data_fim >= claimed.data_inicio
    stored = await reads.get_job(services.db, created.id)
    assert stored.status == "CONCLUIDO" and stored.result == {"ok": [1, "dois"], "nada": None}
    assert _fields(stored) == _fields(done)


async def test_a_refused_claim_on_the_driver_says_why_and_changes_nothing(
    embedded_broker_services: Services,
) -> None:
    services = embedded_broker_services
    api = await make_api(services)
    key = await _machine_key(services)
    await update_settings(services.db, "demo.echo", actor=CLI_ACTOR, max_concurrent_jobs=1)
    first, second = await api.dispatch("demo.echo"), await api.dispatch("demo.echo")
    await claims.claim(services, key, first["id"], first["taskId"])
    with pytest.raises(Conflict) as refused:
        await claims.claim(services, key, second["id"], second["taskId"])
    assert refused.value.details["reason"] == "concurrency_limit"
    with pytest.raises(Conflict) as again:
        await claims.claim(services, key, first["id"], first["taskId"])
    assert again.value.details["reason"] == "already_claimed"
    assert (await reads.get_job(services.db, second["id"])).status == "AGENDADO"
    # A report of a run the machine does not hold is refused as before, its job untouched.
    with pytest.raises(Conflict):
        await claims.complete(services, key, second["id"], {"x": 1}, second["taskId"])
    assert (await reads.get_job(services.db, second["id"])).status == "AGENDADO"


def test_the_drivers_own_outage_errors_are_outages() -> None:
    assert database_unavailable(asyncpg.ConnectionDoesNotExistError("closed in the middle"))
    assert database_unavailable(asyncpg.AdminShutdownError("terminating connection"))
    assert database_unavailable(asyncpg.CannotConnectNowError("the database system is starting up"))
    assert not database_unavailable(asyncpg.UniqueViolationError("duplicate key"))


def test_a_write_plan_converts_its_parameters_as_sqlalchemy_does() -> None:
    plan = DriverStatement("SELECT $1, $2", ("a", "b"), {"a": None, "b": 7}, (None, lambda v: f"<{v}>"))
    assert plan.values({"a": 1}) == [1, "<7>"]
    assert plan.values({"a": 1, "b": None}) == [1, "<None>"]
