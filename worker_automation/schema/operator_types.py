"""GraphQL types of the operator features: bulk results, queue pauses."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import strawberry

from worker_automation.resolvers import bulk
from worker_automation.resolvers.pauses import PauseState
from worker_automation.resolvers.views import iso
from worker_automation.schema.scalars import DateTime


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
