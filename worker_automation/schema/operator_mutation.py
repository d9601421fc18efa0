"""Operator mutations beyond one job at a time: bulk actions, queue pause, retention, schedules.

A base of :class:`~worker_automation.schema.mutation.Mutation`: its fields are the Mutation's.
"""

from __future__ import annotations

import strawberry

from worker_automation.resolvers import bulk
from worker_automation.schema.context import Info
from worker_automation.schema.fields import mutation
from worker_automation.schema.inputs import WorkerFilterInput
from worker_automation.schema.permissions import write


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


@strawberry.type
class OperatorMutation:
    """Bulk actions, queue pause and resume, retention and schedules."""

    @mutation(
        description=(
            "Queue again every FALHA or CANCELADO job the filter matches (newest first, up to limit, "
            f"default {bulk.DEFAULT_BULK}, at most {bulk.MAX_BULK}), in one transaction."
        ),
        extensions=write(),
    )
    async def retry_workers(
        self, info: Info, filter: WorkerFilterInput, limit: int | None = None
    ) -> BulkResult:
        principal = await info.context.principal()
        result = await bulk.retry_workers(info.context.services, principal.actor, filter.to_filter(), limit)
        return BulkResult.from_view(result)

    @mutation(
        description=(
            "Cancel every queued or running job the filter matches (running ones are terminated; "
            f"finished ones stay), newest first, up to limit (default {bulk.DEFAULT_BULK}), in one "
            "transaction."
        ),
        extensions=write(),
    )
    async def cancel_workers(
        self, info: Info, filter: WorkerFilterInput, limit: int | None = None
    ) -> BulkResult:
        principal = await info.context.principal()
        result = await bulk.cancel_workers(info.context.services, principal.actor, filter.to_filter(), limit)
        return BulkResult.from_view(result)
