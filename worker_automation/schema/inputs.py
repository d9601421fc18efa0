"""GraphQL input types: the job list filter, the dispatch input and the event filter."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import strawberry

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.domain.errors import BadInput
from worker_automation.domain.ranges import PRIORITY_RANGE
from worker_automation.resolvers.dispatch import JobRequest
from worker_automation.resolvers.job_filter import JobFilter, check_queue
from worker_automation.resolvers.job_order import JobOrder
from worker_automation.schema.enums import Direction, JobStatus, OrderField
from worker_automation.schema.operator_types import instant
from worker_automation.schema.scalars import JSON, DateTime

_UTC = ZoneInfo("UTC")


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
        default=None,
        description=(
            "Free text: task id, automation key or name, client name, error message, or any value "
            "of the job's context (a CNPJ, a protocol number), ignoring case and accents."
        ),
    )
    created_from: DateTime | None = strawberry.field(
        default=None,
        description="Only jobs created at or after this instant (no offset: the service's zone).",
    )
    created_to: DateTime | None = strawberry.field(
        default=None, description="Only jobs created before this instant (exclusive)."
    )
    finished_from: DateTime | None = strawberry.field(
        default=None,
        description="Only jobs that ended at or after this instant (unfinished jobs never match).",
    )
    finished_to: DateTime | None = strawberry.field(
        default=None, description="Only jobs that ended before this instant (exclusive)."
    )

    def to_filter(self, tz: ZoneInfo = _UTC) -> JobFilter:
        """The resolver's filter (values are validated there); instants without an offset are
        read in ``tz``."""
        return JobFilter(
            status=self.status.value if self.status is not None else None,
            queue=self.queue,
            automation_type=self.automation_type,
            cliente_id=self.cliente_id,
            usuario_id=self.usuario_id,
            task_id=self.task_id,
            q=self.q,
            created_from=instant(self.created_from, "filter.createdFrom", tz),
            created_to=instant(self.created_to, "filter.createdTo", tz),
            finished_from=instant(self.finished_from, "filter.finishedFrom", tz),
            finished_to=instant(self.finished_to, "filter.finishedTo", tz),
        )


@strawberry.input(name="WorkerOrder", description="How the job list is sorted.")
class JobOrderInput:
    """One key and a direction; a cursor of one order is refused by any other."""

    field: OrderField = strawberry.field(description="The key.")
    direction: Direction = strawberry.field(default=Direction.DESC, description="DESC unless said.")

    def to_order(self) -> JobOrder:
        return JobOrder(self.field, self.direction)


@strawberry.input(description="A new job: which automation, for which client, with which input.")
class DispatchInput:
    """What dispatchAutomation needs (the context is validated against the automation's form)."""

    automation_type: str = strawberry.field(description="Automation key in the registry.")
    cliente_id: int | None = strawberry.field(default=None, description="Client the job runs for.")
    context: JSON | None = strawberry.field(
        default=None, description="Input of the automation; must satisfy its form (see Automation.form)."
    )
    priority: int = strawberry.field(default=0, description=f"{PRIORITY_RANGE}, lower runs first.")
    usuario_id: int | None = strawberry.field(default=None, description="User on whose behalf it runs.")
    idempotency_key: str | None = strawberry.field(
        default=None,
        description=(
            "Up to 255 characters (a UUID, say). Sent again with the same key and the same input, the "
            "job the first request made comes back and no job is created; the same key with another "
            "input is refused (CONFLICT). A key is kept as long as its job."
        ),
    )

    def request(self) -> JobRequest:
        """The dispatch this input asks for."""
        return JobRequest(
            self.automation_type,
            self.cliente_id,
            self.context,
            self.priority,
            self.usuario_id,
            self.idempotency_key,
        )


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
