"""GraphQL types of the operator features: bulk results, queue pauses, history, audit trail."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import strawberry

from worker_automation.domain.instants import parse_instant
from worker_automation.resolvers import bulk, history
from worker_automation.resolvers.audit_log import AuditView
from worker_automation.resolvers.pagination import Page
from worker_automation.resolvers.pauses import PauseState
from worker_automation.schema.derived import FromView, derived
from worker_automation.schema.scalars import DateTime


@derived(bulk.BulkResult, description="What a bulk action did.")
class BulkResult(FromView):
    """Counts and ids of a bulk action."""


@strawberry.type(description="What a prune deleted.")
class PruneResult:
    """Finished jobs deleted (their attempts with them), or with dryRun counted."""

    deleted: int = strawberry.field(description="Jobs deleted (0 with dryRun).")
    older_than_days: int = strawberry.field(description="Jobs that ended more than this many days ago.")
    matched: int = strawberry.field(description="Jobs the prune took: deleted, or with dryRun counted.")
    dry_run: bool = strawberry.field(description="Whether this was a dry run (nothing deleted).")


@derived(PauseState, description="Whether a queue is paused.")
class QueuePause(FromView):
    """A queue's pause state after pauseQueue or resumeQueue."""


@derived(history.Bucket, description="Jobs that finished in one time bucket, by how they ended.")
class ThroughputBucket(FromView):
    """One bucket of throughput."""


@derived(history.Durations, description="Run time (claim to end) of the runs that ended, in milliseconds.")
class DurationStats(FromView):
    """Percentiles of run time; null when no run ended in the range."""


@derived(
    AuditView, description="One entry of the audit trail: who did what to which target, and how it ended."
)
class AuditEntry(FromView):
    """An audited write."""


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
        default=None,
        description=(
            "What was acted on, exactly (e.g. worker:12 for job 12, queue:scan); worker:N also finds "
            "the bulk actions and batch dispatches that included job N."
        ),
    )


def instant(value: str | None, field: str, tz: ZoneInfo) -> datetime | None:
    """A DateTime argument as an aware instant (one without an offset is read in ``tz``);
    BadInput naming ``field``, the argument as the caller wrote it, when it is not one."""
    return None if value is None else parse_instant(value, field, tz)
