"""GraphQL types of the operator features: bulk results, queue pauses, history, audit trail."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import strawberry

from worker_automation.resolvers import bulk, history
from worker_automation.resolvers.audit_log import AuditView
from worker_automation.resolvers.pagination import Page
from worker_automation.resolvers.pauses import PauseState
from worker_automation.resolvers.views import iso
from worker_automation.schema.scalars import JSON, DateTime


@strawberry.type(description="What a bulk action did.")
class BulkResult:
    """Counts and ids of a bulk action."""

    matched: int = strawberry.field(description="Jobs the filter matched (up to the limit).")
    changed: int = strawberry.field(description="Jobs the action changed (their own rules allowed it).")
    ids: list[int] = strawberry.field(description="Ids of the jobs that changed.")

    @classmethod
    def from_view(cls, view: bulk.BulkResult) -> BulkResult:
        """Build from the resolver's result."""
        return cls(matched=view.matched, changed=view.changed, ids=view.ids)



@strawberry.type(description="What a prune deleted.")
class PruneResult:
    """Finished jobs deleted (their attempts with them)."""

    deleted: int = strawberry.field(description="Jobs deleted.")
    older_than_days: int = strawberry.field(description="Jobs that ended more than this many days ago.")


@strawberry.type(description="Whether a queue is paused.")
class QueuePause:
    """A queue's pause state after pauseQueue or resumeQueue."""

    queue: str = strawberry.field(description="Queue name.")
    paused: bool = strawberry.field(description="True while its jobs are accepted but not run.")
    paused_at: DateTime | None = strawberry.field(description="Since when (null when not paused).")
    paused_by: str | None = strawberry.field(description="Who paused it (null when not paused).")

    @classmethod
    def from_view(cls, view: PauseState, tz: ZoneInfo) -> QueuePause:
        """Build from the resolver's state, timestamps in ``tz``."""
        stamp = iso(view.paused_at, tz)
        return cls(
            queue=view.queue,
            paused=view.paused,
            paused_at=DateTime(stamp) if stamp else None,
            paused_by=view.paused_by,
        )


@strawberry.type(description="Jobs that finished in one time bucket, by how they ended.")
class ThroughputBucket:
    """One bucket of throughput."""

    bucket_start: DateTime = strawberry.field(description="Start of the bucket (inclusive).")
    completed: int = strawberry.field(description="Jobs that ended CONCLUIDO in it.")
    failed: int = strawberry.field(description="Jobs that ended FALHA in it.")
    cancelled: int = strawberry.field(description="Jobs that ended CANCELADO in it.")

    @classmethod
    def from_view(cls, view: history.Bucket, tz: ZoneInfo) -> ThroughputBucket:
        """Build from the resolver's bucket, its start in ``tz``."""
        return cls(
            bucket_start=DateTime(iso(view.start, tz) or ""),
            completed=view.completed,
            failed=view.failed,
            cancelled=view.cancelled,
        )


@strawberry.type(description="Run time (claim to end) of the runs that ended, in milliseconds.")
class DurationStats:
    """Percentiles of run time; null when no run ended in the range."""

    count: int = strawberry.field(description="Runs measured (CONCLUIDO or FALHA).")
    p50_ms: float | None = strawberry.field(description="Median.")
    p95_ms: float | None = strawberry.field(description="95th percentile.")
    p99_ms: float | None = strawberry.field(description="99th percentile.")
    max_ms: float | None = strawberry.field(description="Longest.")

    @classmethod
    def from_view(cls, view: history.Durations) -> DurationStats:
        """Build from the resolver's figures."""
        return cls(
            count=view.count, p50_ms=view.p50_ms, p95_ms=view.p95_ms, p99_ms=view.p99_ms, max_ms=view.max_ms
        )


@strawberry.type(description="One entry of the audit trail: who did what to which target, and how it ended.")
class AuditEntry:
    """An audited write."""

    id: int = strawberry.field(description="Internal id (rising).")
    at: DateTime = strawberry.field(description="When it was recorded.")
    actor: str = strawberry.field(description="Who acted (key, machine or cli).")
    perfil: str | None = strawberry.field(description="The actor's perfil, if known.")
    action: str = strawberry.field(description="What was done (cancel, retry_workers, pause_queue, ...).")
    target: str | None = strawberry.field(description="What it was done to (worker:12, queue:scan, ...).")
    result: str = strawberry.field(description="ok, or the error's code.")
    detail: JSON | None = strawberry.field(description="Parameters and figures of the action.")

    @classmethod
    def from_view(cls, view: AuditView, tz: ZoneInfo) -> AuditEntry:
        """Build from the resolver's view, the time in ``tz``."""
        return cls(
            id=view.id,
            at=DateTime(iso(view.at, tz) or ""),
            actor=view.actor,
            perfil=view.perfil,
            action=view.action,
            target=view.target,
            result=view.result,
            detail=JSON(view.detail) if view.detail is not None else None,
        )


@strawberry.type(description="One page of the audit trail, newest first.")
class AuditPage:
    """A page of :class:`AuditEntry`."""

    items: list[AuditEntry] = strawberry.field(description="The entries of this page.")
    total: int = strawberry.field(description="Entries matching, over all pages.")
    page: int = strawberry.field(description="This page's number (from 1).")
    per_page: int = strawberry.field(description="Page size (at most 100).")
    pages: int = strawberry.field(description="Number of pages.")

    @classmethod
    def from_page(cls, page: Page[AuditView], tz: ZoneInfo) -> AuditPage:
        """Build from the resolver's page."""
        return cls(
            items=[AuditEntry.from_view(v, tz) for v in page.items],
            total=page.total,
            page=page.page,
            per_page=page.per_page,
            pages=page.pages,
        )


@strawberry.input(name="AuditFilter", description="Filters of the audit trail; every field optional.")
class AuditFilterInput:
    """Who, what, on what and since when."""

    actor: str | None = strawberry.field(default=None, description="Part of the actor's label (any case).")
    action: str | None = strawberry.field(default=None, description="The action, exactly (e.g. cancel).")
    since: DateTime | None = strawberry.field(default=None, description="Entries from this instant on.")
    target: str | None = strawberry.field(
        default=None, description="What was acted on, exactly (e.g. worker:12 for job 12, queue:scan)."
    )


def instant(value: str | None, tz: ZoneInfo) -> datetime | None:
    """A DateTime argument as an aware instant (one without an offset is read in ``tz``)."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=tz)
