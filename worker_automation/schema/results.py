"""Payloads of the maintenance and machine mutations: the REST ``data`` in camelCase, plus ``message``."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import strawberry

from worker_automation.resolvers import maintenance
from worker_automation.resolvers.machines import RegisteredMachine as RegisteredView
from worker_automation.resolvers.recovery import ReconcileReport
from worker_automation.schema.derived import FromView, derived
from worker_automation.schema.types import Machine


@derived(maintenance.ClearResult, description="What clearQueue cancelled.")
class ClearQueueResult(FromView):
    """Jobs cancelled in bulk."""


@derived(maintenance.PurgeResult, description="What purgeQueue deleted in the broker.")
class PurgeQueueResult(FromView):
    """Broker lists deleted."""


@derived(maintenance.CleanupResult, description="What cleanupNoClient removed.")
class CleanupResult(FromView):
    """Open jobs without a client, deleted."""


@derived(maintenance.SyncResult, description="What syncOrphans found.")
class SyncOrphansResult(FromView):
    """Open jobs that had lost their task, cancelled."""


@strawberry.type(description="What reconcile did.")
class ReconcileResult:
    """Jobs that no message would run, or no process ran, put right."""

    resent: int = strawberry.field(description="AGENDADO jobs sent to their queue again.")
    requeued: int = strawberry.field(description="Lost runs of idempotent automations queued again.")
    failed: int = strawberry.field(description="Lost runs ended FALHA (worker_lost).")
    suspects: int = strawberry.field(description="Jobs seen unaccounted for once, still under watch.")
    broker_checked: bool = strawberry.field(description="False: the broker could not be read.")
    job_ids: list[int] = strawberry.field(name="workerIds", description="The jobs acted on.")

    @classmethod
    def from_view(cls, view: ReconcileReport) -> ReconcileResult:
        """Build from the resolver's result."""
        return cls(
            resent=view.resent,
            requeued=view.requeued,
            failed=view.failed,
            suspects=view.suspects,
            broker_checked=view.broker_checked,
            job_ids=list(view.job_ids),
        )


@strawberry.type(description="A machine just registered, and its key.")
class RegisteredMachine:
    """The key is shown this once: only its hash is kept."""

    machine: Machine = strawberry.field(description="The new machine.")
    api_key: str = strawberry.field(description="Its X-Worker-Api-Key; store it now, it is not shown again.")

    @classmethod
    def from_view(cls, view: RegisteredView, tz: ZoneInfo) -> RegisteredMachine:
        """Build from the resolver's result."""
        return cls(machine=Machine.from_view(view.machine, tz), api_key=view.api_key)
