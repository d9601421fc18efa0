"""GraphQL object types of the live views: stats, queues, broker, inspect, task status, dashboard."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import strawberry

from worker_automation.broker.inspect import InspectResult
from worker_automation.resolvers import live
from worker_automation.resolvers.reads import Stats as StatsView
from worker_automation.resolvers.reads import TaskStatus as TaskStatusView
from worker_automation.schema.context import Info
from worker_automation.schema.fields import field
from worker_automation.schema.scalars import JSON
from worker_automation.schema.types import Worker, WorkerPage, workers_of


@strawberry.type(description="A count under a key (a status, a queue).")
class Count:
    """One entry of a count map, for clients that prefer typed lists to JSON maps."""

    key: str = strawberry.field(description="What is counted (status or queue name).")
    count: int = strawberry.field(description="How many.")


def counts(values: dict[str, int]) -> list[Count]:
    """The map as a list, in the map's order."""
    return [Count(key=k, count=v) for k, v in values.items()]


@strawberry.type(description="Totals of jobs by status and by queue (every status and queue, zeros too).")
class Stats:
    """Aggregated counts."""

    total: int = strawberry.field(description="Every job row.")
    by_status: JSON = strawberry.field(description='Map status -> count, e.g. {"AGENDADO": 18}.')
    by_queue: JSON = strawberry.field(description='Map queue -> count, e.g. {"certidao": 640}.')
    status_counts: list[Count] = strawberry.field(description="byStatus as a typed list.")
    queue_counts: list[Count] = strawberry.field(description="byQueue as a typed list.")

    @classmethod
    def from_view(cls, view: StatsView) -> Stats:
        """Build from the resolver's stats."""
        return cls(
            total=view.total,
            by_status=JSON(view.by_status),
            by_queue=JSON(view.by_queue),
            status_counts=counts(view.by_status),
            queue_counts=counts(view.by_queue),
        )


@strawberry.type(description="One configured queue right now.")
class QueueState:
    """Counts, capacity and load of a queue, with its first running and queued jobs."""

    queue_name: str = strawberry.field(description="Queue name.")
    workers_count: int = strawberry.field(description="Configured workers for the queue.")
    active_count: int = strawberry.field(description="Jobs EXECUTANDO on it.")
    pending_count: int = strawberry.field(description="Jobs AGENDADO on it.")
    capacity: int = strawberry.field(description="How many jobs it runs at once (= workersCount).")
    load_percent: float = strawberry.field(description="activeCount / capacity * 100, one decimal.")
    active_tasks: list[Worker] = strawberry.field(
        description="First 20 running jobs, longest running first (empty inside dashboard)."
    )
    pending_tasks: list[Worker] = strawberry.field(
        description="First 20 queued jobs in run order (empty inside dashboard)."
    )
    paused: bool = strawberry.field(
        default=False, description="Paused: its jobs are accepted and none runs until it is resumed."
    )

    @classmethod
    def from_view(cls, view: live.QueueState, tz: ZoneInfo) -> QueueState:
        """Build from the resolver's queue state."""
        return cls(
            queue_name=view.queue_name,
            workers_count=view.workers_count,
            active_count=view.active_count,
            pending_count=view.pending_count,
            capacity=view.capacity,
            load_percent=view.load_percent,
            active_tasks=workers_of(view.active_tasks, tz),
            pending_tasks=workers_of(view.pending_tasks, tz),
            paused=view.paused,
        )


@strawberry.type(description="Totals across queues; 'today' is the configured time zone's day.")
class Summary:
    """Open jobs now and terminal jobs today."""

    total_active: int = strawberry.field(description="Jobs EXECUTANDO.")
    total_pending: int = strawberry.field(description="Jobs AGENDADO.")
    total_completed_today: int = strawberry.field(description="Jobs CONCLUIDO today.")
    total_errors_today: int = strawberry.field(description="Jobs FALHA today.")

    @classmethod
    def from_view(cls, view: live.Summary) -> Summary:
        """Build from the resolver's summary."""
        return cls(
            total_active=view.total_active,
            total_pending=view.total_pending,
            total_completed_today=view.total_completed_today,
            total_errors_today=view.total_errors_today,
        )


@strawberry.type(description="Every configured queue right now, and the totals.")
class QueueLiveStatus:
    """What queueLiveStatus returns and queueLoad pushes."""

    queues: list[QueueState] = strawberry.field(description="One entry per configured queue.")
    summary: Summary = strawberry.field(description="Totals across queues.")

    @classmethod
    def build(cls, states: list[live.QueueState], summary: live.Summary, tz: ZoneInfo) -> QueueLiveStatus:
        """Build from the resolver's queue states and summary."""
        return cls(queues=[QueueState.from_view(s, tz) for s in states], summary=Summary.from_view(summary))


@strawberry.type(description="Messages waiting in one queue at one priority.")
class PriorityLength:
    """One priority list of a queue in the broker."""

    queue: str = strawberry.field(description="Queue name.")
    priority: int = strawberry.field(description="Priority 0..9 (lower runs first).")
    count: int = strawberry.field(description="Messages waiting at that priority.")


@strawberry.type(description="Snapshot of the broker: messages waiting in each queue.")
class BrokerStatus:
    """LLEN of each queue over all its priority lists."""

    available: bool = strawberry.field(description="False when Redis does not answer.")
    queues: JSON = strawberry.field(description='Map queue -> messages waiting, e.g. {"certidao": 4}.')
    queue_lengths: list[Count] = strawberry.field(description="queues as a typed list.")

    @classmethod
    def from_view(cls, view: live.BrokerStatus) -> BrokerStatus:
        """Build from the resolver's broker status."""
        return cls(available=view.available, queues=JSON(view.queues), queue_lengths=counts(view.queues))

    @field(description="Messages waiting per queue and priority, non-empty lists only (read when asked).")
    async def priority_lengths(self, info: Info) -> list[PriorityLength]:
        found = await live.broker_priority_lengths(info.context.services)
        return [
            PriorityLength(queue=queue, priority=priority, count=count)
            for queue, per_priority in found.items()
            for priority, count in enumerate(per_priority)
            if count
        ]


@strawberry.type(description="Raw Celery inspect, sections keyed by worker hostname; empty if none answers.")
class WorkersInspect:
    """What the Celery workers said they are doing."""

    active: JSON = strawberry.field(description="Tasks running, per worker.")
    reserved: JSON = strawberry.field(description="Tasks prefetched, per worker.")
    scheduled: JSON = strawberry.field(description="Tasks with an ETA, per worker.")
    stats: JSON = strawberry.field(description="Worker statistics, per worker.")
    ping: JSON = strawberry.field(description="Ping replies, per worker.")
    available: bool = strawberry.field(description="False when no worker (or no broker) answered.")
    workers: list[str] = strawberry.field(description="Hostnames of the workers that answered.")

    @classmethod
    def from_view(cls, view: InspectResult) -> WorkersInspect:
        """Build from the broker's inspect result."""
        return cls(
            active=JSON(view.active),
            reserved=JSON(view.reserved),
            scheduled=JSON(view.scheduled),
            stats=JSON(view.stats),
            ping=JSON(view.ping),
            available=view.available,
            workers=sorted(view.ping),
        )


@strawberry.type(description="A task's Celery state: PENDING, STARTED, SUCCESS, FAILURE or REVOKED.")
class TaskStatus:
    """From the job row, or from Celery's result backend for task ids without a row."""

    task_id: str = strawberry.field(description="The task id asked about.")
    state: str = strawberry.field(description="Celery state.")
    status: str = strawberry.field(description="Same as state (the REST payload's name).")
    result: JSON | None = strawberry.field(
        description="Return value on SUCCESS; exc_type/exc_message/traceback on FAILURE; else null."
    )
    worker_id: int | None = strawberry.field(description="The job row's id, when there is one.")
    progress: int | None = strawberry.field(description="The job's progress, when there is a row.")
    worker: Worker | None = strawberry.field(description="The job row, when there is one.")

    @property
    def is_terminal(self) -> bool:
        """SUCCESS, FAILURE or REVOKED: nothing will change any more."""
        return self.state in TERMINAL_STATES

    @classmethod
    def from_view(cls, view: TaskStatusView, tz: ZoneInfo) -> TaskStatus:
        """Build from the resolver's task status."""
        worker = Worker.from_view(view.worker, tz) if view.worker is not None else None
        return cls(
            task_id=view.task_id,
            state=view.state,
            status=view.state,
            result=JSON(view.result) if view.result is not None else None,
            worker_id=worker.id if worker else None,
            progress=worker.progress if worker else None,
            worker=worker,
        )


TERMINAL_STATES = frozenset({"SUCCESS", "FAILURE", "REVOKED"})


@strawberry.type(description="Everything the operators' screen shows; each section is loaded on its own.")
class Dashboard:
    """One failing source (e.g. Redis down) empties only its own section, named in ``errors``."""

    stats: Stats | None = strawberry.field(description="Aggregated counts.")
    queues: list[QueueState] = strawberry.field(description="State of each queue (counts only).")
    summary: Summary | None = strawberry.field(description="Totals across queues.")
    broker: BrokerStatus | None = strawberry.field(description="Broker snapshot.")
    active: list[Worker] = strawberry.field(description="Running jobs (at most 50).")
    queued: WorkerPage | None = strawberry.field(description="First page (10) of queued jobs.")
    history: list[Worker] = strawberry.field(description="Last 20 jobs that ended.")
    errors: JSON = strawberry.field(
        description="Map section -> error message of the sections that failed; {} if none."
    )

    @classmethod
    def from_view(cls, view: live.Dashboard, tz: ZoneInfo) -> Dashboard:
        """Build from the resolver's dashboard."""
        return cls(
            stats=Stats.from_view(view.stats) if view.stats is not None else None,
            queues=[QueueState.from_view(s, tz) for s in view.queues],
            summary=Summary.from_view(view.summary) if view.summary is not None else None,
            broker=BrokerStatus.from_view(view.broker) if view.broker is not None else None,
            active=workers_of(view.active, tz),
            queued=WorkerPage.from_page(view.queued, tz, cursors=False) if view.queued is not None else None,
            history=workers_of(view.history, tz),
            errors=JSON(dict(view.errors)),
        )
