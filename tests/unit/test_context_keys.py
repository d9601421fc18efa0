"""Keys the HTTP transport already checked are not looked up again by the operation's context."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from worker_automation.resolvers.machines import MachineView
from worker_automation.resolvers.services import Services
from worker_automation.schema.context import GraphQLContext


class NoDatabase:
    """Services whose database must not be reached."""

    @property
    def db(self) -> Any:
        raise AssertionError("the key was looked up again")


async def test_the_machine_the_transport_found_is_the_contexts() -> None:
    machine = MachineView(1, "m", None, "scan", "on", datetime.now(UTC), None)
    context = GraphQLContext(
        cast(Services, NoDatabase()), {"X-Worker-Api-Key": "wmk_x"}, authenticated_machine=machine
    )
    assert await context.machine() is machine
