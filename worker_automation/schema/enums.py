"""GraphQL enums: the domain's own enums exposed as they are, plus the change kind of an event."""

from __future__ import annotations

from enum import Enum

import strawberry

from worker_automation.domain.vocabulary import EventKind
from worker_automation.models import JobStatus, MachineStatus
from worker_automation.resolvers.job_order import Direction, OrderField
from worker_automation.resolvers.maintenance import ClearScope

__all__ = [
    "ChangeKind",
    "ClearScope",
    "Direction",
    "EventKind",
    "JobStatus",
    "MachineStatus",
    "OrderField",
    "change_of",
]

# The domain enums themselves are registered (one list of states for every transport); import them
# from here so the registration has happened before a schema uses them.
strawberry.enum(
    JobStatus,
    name="JobStatus",
    description=(
        "Life cycle of a job: AGENDADO (queued) -> EXECUTANDO (running) -> CONCLUIDO (done) | FALHA "
        "(failed); CANCELADO from AGENDADO or EXECUTANDO. FALHA and CANCELADO can be retried."
    ),
)

strawberry.enum(
    ClearScope,
    name="ClearScope",
    description="Which jobs clearQueue cancels: ALL open jobs, QUEUED (AGENDADO) or RUNNING (EXECUTANDO).",
)

strawberry.enum(
    EventKind,
    name="EventKind",
    description=(
        "What happened to a job. RESYNC carries no job: events may have been missed (the event bus "
        "reconnected or the subscriber fell behind), so re-read the state you show."
    ),
)

strawberry.enum(
    MachineStatus,
    name="MachineStatus",
    description="Whether a registered machine may claim jobs; changed only by turnMachineOn/turnMachineOff.",
)


strawberry.enum(
    OrderField,
    name="WorkerOrderField",
    description=(
        "What the job list is sorted by: CREATED_AT, FINISHED_AT, DURATION (end minus start) or "
        "PRIORITY, then by id in the same direction. Jobs without the value (unfinished jobs for "
        "FINISHED_AT and DURATION) come last in both directions."
    ),
)

strawberry.enum(Direction, name="OrderDirection", description="ASC (smallest first) or DESC (largest first).")


@strawberry.enum(description="How an event changes a list of jobs kept by a client.")
class ChangeKind(Enum):
    """Created/updated/deleted view of an :class:`EventKind`, for clients that keep a job list."""

    CREATED = strawberry.enum_value("created", description="A new job (or a retried one) is queued.")
    UPDATED = strawberry.enum_value("updated", description="An existing job changed; replace it.")
    DELETED = strawberry.enum_value("deleted", description="The job row was removed.")
    RESYNC = strawberry.enum_value("resync", description="Events may be missing: re-read the list.")


_CHANGE_OF: dict[EventKind, ChangeKind] = {
    EventKind.CREATED: ChangeKind.CREATED,
    EventKind.DELETED: ChangeKind.DELETED,
    EventKind.RESYNC: ChangeKind.RESYNC,
}


def change_of(kind: EventKind) -> ChangeKind:
    """CREATED and DELETED as such, RESYNC as such, every other kind an update."""
    return _CHANGE_OF.get(kind, ChangeKind.UPDATED)
