"""Shared set-up of the operator features' tests: started services on either database, machines."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.machines import MachineView, register_machine
from worker_automation.resolvers.services import Services


@pytest.fixture(params=["sqlite", "postgresql"])
def any_services(request: pytest.FixtureRequest) -> Services:
    """Started services on SQLite (embedded broker) and on PostgreSQL with the real Redis."""
    fixture = "sqlite_services" if request.param == "sqlite" else "services"
    started: Services = request.getfixturevalue(fixture)
    return started


async def pool_machine(services: Services, queue: str = "scan", name: str | None = None) -> MachineView:
    created = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name=name or f"pool-{queue}", queue=queue
    )
    return created.machine


class StatementCounter:
    """Counts the SQL statements an engine runs while active."""

    def __init__(self, services: Services) -> None:
        self.engine = services.db.engine.sync_engine
        self.statements: list[str] = []

    def _seen(self, *args: Any) -> None:
        self.statements.append(str(args[2]))

    def __enter__(self) -> StatementCounter:
        event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)
