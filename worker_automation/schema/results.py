"""Payloads of the maintenance and machine mutations: the REST ``data`` in camelCase, plus ``message``."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import strawberry

from worker_automation.resolvers.machines import RegisteredMachine as RegisteredView
from worker_automation.resolvers.maintenance import ClearResult, PurgeResult, SyncResult, cleanup_message
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


@strawberry.type(description="A machine just registered, and its key.")
class RegisteredMachine:
    """The key is shown this once: only its hash is kept."""

    machine: Machine = strawberry.field(description="The new machine.")
    api_key: str = strawberry.field(description="Its X-Worker-Api-Key; store it now, it is not shown again.")

    @classmethod
    def from_view(cls, view: RegisteredView, tz: ZoneInfo) -> RegisteredMachine:
        """Build from the resolver's result."""
        return cls(machine=Machine.from_view(view.machine, tz), api_key=view.api_key)
