"""Work run every so often by the one process that leads the housekeeping (see
:mod:`worker_automation.process.housekeeping`): each operation that needs it declares one here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings


@dataclass(frozen=True)
class Periodic:
    """Work the leader runs every ``interval(settings)`` seconds (0 or less: never).

    ``run`` returns how many things it did; a failure is logged and tried again next time.
    """

    name: str
    interval: Callable[[Settings], float]
    run: Callable[[Services], Awaitable[int]]
