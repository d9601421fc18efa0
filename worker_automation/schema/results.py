"""Payloads of the maintenance and machine mutations: the REST ``data`` in camelCase, plus ``message``."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import strawberry

from worker_automation.resolvers.machines import RegisteredMachine as RegisteredView
from worker_automation.resolvers.maintenance import ClearResult, PurgeResult, SyncResult, cleanup_message
from worker_automation.resolvers.recovery import ReconcileReport
from worker_automation.schema.enums import ClearScope
from worker_automation.schema.types import Machine


@strawberry.type(description="What clearQueue cancelled.")
class ClearQueueResult:
    """Jobs cancelled in bulk."""

    cancelled: int = strawberry.field(description="Jobs marked CANCELADO (their tasks revoked).")
    scope: ClearScope = strawberry.field(description="The scope applied.")
    queue: str | None = strawberry.field(description="The queue it was limited to, if any.")
    message: str = strawberry.field(description="Human summary, as the REST API words it.")

    @classmethod
    def from_view(cls, view: ClearResult) -> ClearQueueResult:
        """Build from the resolver's result."""
        return cls(
            cancelled=view.cancelled,
            scope=ClearScope(view.scope),
            queue=view.queue,
            message=view.message,
        )


@strawberry.type(description="What purgeQueue deleted in the broker.")
class PurgeQueueResult:
    """Broker lists deleted."""

    queue_name: str = strawberry.field(description="The queue purged.")
    redis_keys_deleted: int = strawberry.field(description="Priority lists deleted.")
    message: str = strawberry.field(description="Human summary, as the REST API words it.")

    @classmethod
    def from_view(cls, view: PurgeResult) -> PurgeQueueResult:
        """Build from the resolver's result."""
        return cls(
            queue_name=view.queue_name,
            redis_keys_deleted=view.redis_keys_deleted,
            message=view.message,
        )


@strawberry.type(description="What cleanupNoClient removed.")
class CleanupResult:
    """Open jobs without a client, deleted."""

    deleted: int = strawberry.field(description="Rows deleted (their tasks revoked first).")
    message: str = strawberry.field(description="Human summary, as the REST API words it.")

    @classmethod
    def of(cls, deleted: int) -> CleanupResult:
        """Build from the number deleted."""
        return cls(deleted=deleted, message=cleanup_message(deleted))


@strawberry.type(description="What syncOrphans found.")
class SyncOrphansResult:
    """Open jobs that had lost their task, cancelled."""

    orphans_found: int = strawberry.field(description="Jobs marked CANCELADO.")
    total_checked: int = strawberry.field(description="Open jobs examined.")
    message: str = strawberry.field(description="Human summary, as the REST API words it.")

    @classmethod
    def from_view(cls, view: SyncResult) -> SyncOrphansResult:
        """Build from the resolver's result."""
        return cls(
            orphans_found=view.orphans_found,
            total_checked=view.total_checked,
            message=view.message,
        )


@strawberry.type(description="What reconcile did.")
class ReconcileResult:
    """Jobs that no message would run, or no process ran, put right."""

    resent: int = strawberry.field(description="AGENDADO jobs sent to their queue again.")
    requeued: int = strawberry.field(description="Lost runs of idempotent automations queued again.")
    failed: int = strawberry.field(description="Lost runs ended FALHA (worker_lost).")
    suspects: int = strawberry.field(description="Jobs seen unaccounted for once, still under watch.")
    broker_checked: bool = strawberry.field(description="False: the broker could not be read.")
    worker_ids: list[int] = strawberry.field(description="The jobs acted on.")

    @classmethod
    def from_view(cls, view: ReconcileReport) -> ReconcileResult:
        """Build from the resolver's result."""
        return cls(
            resent=view.resent,
            requeued=view.requeued,
            failed=view.failed,
            suspects=view.suspects,
            broker_checked=view.broker_checked,
            worker_ids=list(view.job_ids),
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
