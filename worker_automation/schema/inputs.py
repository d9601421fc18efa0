"""GraphQL input types: the job list filter, the dispatch input and the event filter."""

from __future__ import annotations

from typing import Any

import strawberry

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.errors import BadInput
from worker_automation.resolvers.reads import JobFilter, check_queue
from worker_automation.schema.enums import JobStatus
from worker_automation.schema.scalars import JSON


@strawberry.input(
    name="WorkerFilter",
    description="Filters of the job list (and of bulk actions); every field optional, all must match.",
)
class JobFilterInput:
    """Mirrors the REST list's query parameters."""

    status: JobStatus | None = strawberry.field(default=None, description="Only jobs in this state.")
    queue: str | None = strawberry.field(default=None, description="Only jobs on this queue.")
    automation_type: str | None = strawberry.field(default=None, description="Only this automation.")
    cliente_id: int | None = strawberry.field(default=None, description="Only this client's jobs.")
    usuario_id: int | None = strawberry.field(default=None, description="Only this user's jobs.")
    task_id: str | None = strawberry.field(default=None, description="The job with this task id.")
    q: str | None = strawberry.field(
        default=None, description="Free text: task id, automation key or name, client name, error message."
    )

    def to_filter(self) -> JobFilter:
        """The resolver's filter (values are validated there)."""
        return JobFilter(
            status=self.status.value if self.status is not None else None,
            queue=self.queue,
            automation_type=self.automation_type,
            cliente_id=self.cliente_id,
            usuario_id=self.usuario_id,
            task_id=self.task_id,
            q=self.q,
        )


@strawberry.input(description="A new job: which automation, for which client, with which input.")
class DispatchInput:
    """What dispatchAutomation needs (the context is validated against the automation's form)."""

    automation_type: str = strawberry.field(description="Automation key in the registry.")
    cliente_id: int | None = strawberry.field(default=None, description="Client the job runs for.")
    context: JSON | None = strawberry.field(
        default=None, description="Input of the automation; must satisfy its form (see Automation.form)."
    )
    priority: int = strawberry.field(default=0, description="0..9, lower runs first.")
    usuario_id: int | None = strawberry.field(default=None, description="User on whose behalf it runs.")


@strawberry.input(
    name="WorkerEventFilter", description="Which job events to receive; every field optional, all must match."
)
class JobEventFilter:
    """Applied to the job as it is after each event (RESYNC always passes)."""

    status: JobStatus | None = strawberry.field(default=None, description="Job's state after the event.")
    queue: str | None = strawberry.field(default=None, description="Job's queue after the event.")
    automation_type: str | None = strawberry.field(default=None, description="Job's automation key.")
    id: int | None = strawberry.field(default=None, description="One job only.")

    def check(self, queues: dict[str, int]) -> None:
        """Refuse values that could never match (BadInput names the field)."""
        if self.queue is not None:
            check_queue(self.queue, queues)
        if self.automation_type is not None and self.automation_type not in AUTOMATION_REGISTRY:
            raise BadInput("automation_type", f"automation_type desconhecido: {self.automation_type!r}")

    def matches(self, job: dict[str, Any]) -> bool:
        """Whether the job dict (as events carry it) passes the filter."""
        return (
            (self.status is None or job.get("status") == self.status.value)
            and (self.queue is None or job.get("queue") == self.queue)
            and (self.automation_type is None or job.get("automation_type") == self.automation_type)
            and (self.id is None or job.get("id") == self.id)
        )
