"""The GraphQL type of one run of a job (``Worker.attempts``)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import strawberry

from worker_automation.resolvers.attempts import AttemptView
from worker_automation.resolvers.views import iso
from worker_automation.schema.scalars import DateTime


@strawberry.type(description="One run of a job: one per claim, kept across retries.")
class Attempt:
    """A claim of the job by a machine, and how that run ended."""

    number: int = strawberry.field(description="1 for the first run, then one more per claim.")
    machine_id: int | None = strawberry.field(description="Machine that claimed it.")
    machine_name: str | None = strawberry.field(description="That machine's name (null if removed).")
    task_id: str | None = strawberry.field(description="The task id the run was claimed under.")
    started_at: DateTime = strawberry.field(description="When it was claimed.")
    ended_at: DateTime | None = strawberry.field(description="When the run ended; null while running.")
    outcome: str | None = strawberry.field(
        description="CONCLUIDO, FALHA, CANCELADO, or REENFILEIRADO (moved or queued again); "
        "null while running."
    )
    error: str | None = strawberry.field(description="The error or cancellation message of the run.")

    @classmethod
    def from_view(cls, view: AttemptView, tz: ZoneInfo) -> Attempt:
        """Build from the resolver's view, timestamps in ``tz``."""
        ended = iso(view.ended_at, tz)
        return cls(
            number=view.number,
            machine_id=view.machine_id,
            machine_name=view.machine_name,
            task_id=view.task_id,
            started_at=DateTime(iso(view.started_at, tz) or ""),
            ended_at=DateTime(ended) if ended else None,
            outcome=view.outcome,
            error=view.error,
        )
