"""GraphQL types of worker processes and of why a queued job waits.

The waiting reasons of a page of jobs are read together: the first ``waitingReason`` or
``queuePosition`` asked in an operation loads those of every job the operation asks about, in one
statement (a DataLoader kept beside the operation's other loaders).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from enum import Enum
from zoneinfo import ZoneInfo

import strawberry
from strawberry.dataloader import DataLoader

from worker_automation.resolvers.processes import ProcessView, recent_processes
from worker_automation.resolvers.waiting import Waiting, waiting_of
from worker_automation.schema.context import Info, Loaders
from worker_automation.schema.scalars import DateTime


@strawberry.enum(description="What runs jobs: a Celery pool worker of a queue, or a dedicated machine.")
class ProcessKind(Enum):
    POOL = "POOL"
    MACHINE = "MACHINE"


@strawberry.enum(
    description="ONLINE: answering now. SILENT: not heard from for a while, not known gone. "
    "GONE: stopped answering long ago, or (a machine) its subscription closed."
)
class ProcessStatus(Enum):
    ONLINE = "ONLINE"
    SILENT = "SILENT"
    GONE = "GONE"


@strawberry.enum(description="Why a queued (AGENDADO) job is not running yet: the first that applies.")
class WaitingReason(Enum):
    AUTOMATION_DISABLED = strawberry.enum_value("AUTOMATION_DISABLED", description="Its automation is off.")
    QUEUE_PAUSED = strawberry.enum_value("QUEUE_PAUSED", description="Its queue is paused.")
    RETRY_BACKOFF = strawberry.enum_value(
        "RETRY_BACKOFF", description="A retry whose next attempt is not due yet."
    )
    NO_PROCESS_ON_QUEUE = strawberry.enum_value(
        "NO_PROCESS_ON_QUEUE",
        description="No ONLINE pool worker consumes its queue and no ONLINE machine serves its automation.",
    )
    CONCURRENCY_LIMIT = strawberry.enum_value(
        "CONCURRENCY_LIMIT", description="Its automation already runs as many jobs as it may."
    )
    QUEUED = strawberry.enum_value("QUEUED", description="Behind other jobs of its queue.")


@strawberry.type(description="A process that runs jobs: a Celery pool worker or a dedicated machine.")
class WorkerProcess:
    """One process as the API last saw it (Celery's inspect for pool workers, presence for machines)."""

    name: str = strawberry.field(description="Celery node name (QUEUE-PID@HOST), or the machine's name.")
    kind: ProcessKind = strawberry.field(description="POOL or MACHINE.")
    queues: list[str] = strawberry.field(description="Queues it consumes (a machine: its automation's).")
    concurrency: int | None = strawberry.field(
        description="How many jobs it runs at once (pool workers; null for machines)."
    )
    running_job_ids: list[int] = strawberry.field(description="Ids of the jobs it runs now.")
    status: ProcessStatus = strawberry.field(description="ONLINE, SILENT or GONE.")
    last_seen_at: DateTime | None = strawberry.field(description="When it was last heard from.")
    machine_id: int | None = strawberry.field(description="The registered machine it claims as.")

    @classmethod
    def from_view(cls, view: ProcessView, tz: ZoneInfo) -> WorkerProcess:
        """Build from the resolver's view, timestamps in ``tz``."""
        seen = view.last_seen_at
        return cls(
            name=view.name,
            kind=ProcessKind(view.kind),
            queues=list(view.queues),
            concurrency=view.concurrency,
            running_job_ids=list(view.running_job_ids),
            status=ProcessStatus(view.status),
            last_seen_at=DateTime(seen.astimezone(tz).isoformat(timespec="seconds")) if seen else None,
            machine_id=view.machine_id,
        )


def processes_of(views: Sequence[ProcessView], tz: ZoneInfo) -> list[WorkerProcess]:
    """GraphQL processes from resolver views."""
    return [WorkerProcess.from_view(v, tz) for v in views]


_WAITING: weakref.WeakKeyDictionary[Loaders, DataLoader[int, Waiting | None]] = weakref.WeakKeyDictionary()


def _loader(info: Info) -> DataLoader[int, Waiting | None]:
    loaders = info.context.loaders
    found = _WAITING.get(loaders)
    if found is None:

        async def load(ids: list[int]) -> Sequence[Waiting | None]:
            found = await waiting_of_jobs(info, ids)
            return [found.get(i) for i in ids]

        found = _WAITING[loaders] = DataLoader(load)
    return found


async def waiting_of_job(info: Info, job_id: int) -> Waiting | None:
    """Why the queued job ``job_id`` waits (batched per operation); None when it is not queued."""
    return await _loader(info).load(job_id)


async def waiting_of_jobs(info: Info, job_ids: Sequence[int]) -> dict[int, Waiting]:
    """Why each of the queued jobs among ``job_ids`` waits, read at once (a page of them, or a
    batch of single loads)."""
    services = info.context.services
    return await waiting_of(services.db, job_ids, lambda: recent_processes(services))
