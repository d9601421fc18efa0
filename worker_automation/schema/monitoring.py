"""GraphQL object types of the live views: stats, queues, broker, inspect, task status, dashboard."""

from __future__ import annotations

from typing import Any, cast
from zoneinfo import ZoneInfo

import strawberry

from worker_automation.broker.inspect import InspectResult
from worker_automation.domain.ranges import PRIORITY_RANGE
from worker_automation.resolvers import live
from worker_automation.resolvers.reads import Stats as StatsView
from worker_automation.resolvers.reads import TaskStatus as TaskStatusView
from worker_automation.schema.context import Info
from worker_automation.schema.derived import FromView, derived
from worker_automation.schema.fields import field
from worker_automation.schema.scalars import JSON
from worker_automation.schema.types import Job, JobPage, jobs_of


@strawberry.type(description="A count under a key (a status, a queue).")
class Count:
    """One entry of a count map, for clients that prefer typed lists to JSON maps."""

    key: str = strawberry.field(description="What is counted (status or queue name).")
    count: int = strawberry.field(description="How many.")


def counts(values: dict[str, int]) -> list[Count]:
    """The map as a list, in the map's order."""
    return [Count(key=k, count=v) for k, v in values.items()]


@derived(StatsView, description="Totals of jobs by status and by queue (every status and queue, zeros too).")
class Stats(FromView):
    """Aggregated counts."""

    by_status: JSON
    by_queue: JSON

    @field(description="byStatus as a typed list.")
    def status_counts(self) -> list[Count]:
        return counts(cast(dict[str, int], self.by_status))

    @field(description="byQueue as a typed list.")
    def queue_counts(self) -> list[Count]:
        return counts(cast(dict[str, int], self.by_queue))


@derived(live.QueueState, description="One configured queue right now.")
class QueueState(FromView):
    """Counts, capacity and load of a queue, with its first running and queued jobs."""


@derived(live.Summary, description="Totals across queues; 'today' is the configured time zone's day.")
class Summary(FromView):
    """Open jobs now and terminal jobs today."""


@derived(live.QueueLiveStatus, description="Every configured queue right now, and the totals.")
class QueueLiveStatus(FromView):
    """What queueLiveStatus returns and queueLoad pushes."""

    @classmethod
    def build(cls, states: list[live.QueueState], summary: live.Summary, tz: ZoneInfo) -> QueueLiveStatus:
        """Build from the resolver's queue states and summary."""
        return cls.from_view(live.QueueLiveStatus(states, summary), tz)


@strawberry.type(description="Messages waiting in one queue at one priority.")
class PriorityLength:
    """One priority list of a queue in the broker."""

    queue: str = strawberry.field(description="Queue name.")
    priority: int = strawberry.field(description=f"Priority {PRIORITY_RANGE} (lower runs first).")
    count: int = strawberry.field(description="Messages waiting at that priority.")


@derived(live.BrokerStatus, description="Snapshot of the broker: messages waiting in each queue.")
class BrokerStatus(FromView):
    """LLEN of each queue over all its priority lists."""

    queues: JSON

    @field(description="queues as a typed list.")
    def queue_lengths(self) -> list[Count]:
        return counts(cast(dict[str, int], self.queues))

    @field(description="Messages waiting per queue and priority, non-empty lists only (read when asked).")
    async def priority_lengths(self, info: Info) -> list[PriorityLength]:
        found = await live.broker_priority_lengths(info.context.services)
        return [
            PriorityLength(queue=queue, priority=priority, count=count)
            for queue, per_priority in found.items()
            for priority, count in enumerate(per_priority)
            if count
        ]


@derived(
    InspectResult, description="Raw Celery inspect, sections keyed by worker hostname; empty if none answers."
)
class WorkersInspect(FromView):
    """What the Celery workers said they are doing."""

    ping: JSON

    @field(description="Hostnames of the workers that answered.")
    def workers(self) -> list[str]:
        return sorted(cast(dict[str, Any], self.ping))


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
    job: Job | None = strawberry.field(name="worker", description="The job row, when there is one.")

    @property
    def is_terminal(self) -> bool:
        """SUCCESS, FAILURE or REVOKED: nothing will change any more."""
        return self.state in TERMINAL_STATES

    @classmethod
    def from_view(cls, view: TaskStatusView, tz: ZoneInfo) -> TaskStatus:
        """Build from the resolver's task status."""
        job = Job.from_view(view.job, tz) if view.job is not None else None
        return cls(
            task_id=view.task_id,
            state=view.state,
            status=view.state,
            result=JSON(view.result) if view.result is not None else None,
            worker_id=job.id if job else None,
            progress=job.progress if job else None,
            job=job,
        )


TERMINAL_STATES = frozenset({"SUCCESS", "FAILURE", "REVOKED"})


@strawberry.type(description="Everything the operators' screen shows; each section is loaded on its own.")
class Dashboard:
    """One failing source (e.g. Redis down) empties only its own section, named in ``errors``."""

    stats: Stats | None = strawberry.field(description="Aggregated counts.")
    queues: list[QueueState] = strawberry.field(description="State of each queue (counts only).")
    summary: Summary | None = strawberry.field(description="Totals across queues.")
    broker: BrokerStatus | None = strawberry.field(description="Broker snapshot.")
    active: list[Job] = strawberry.field(description="Running jobs (at most 50).")
    queued: JobPage | None = strawberry.field(description="First page (10) of queued jobs.")
    history: list[Job] = strawberry.field(description="Last 20 jobs that ended.")
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
            active=jobs_of(view.active, tz),
            queued=JobPage.from_page(view.queued, tz, cursors=False) if view.queued is not None else None,
            history=jobs_of(view.history, tz),
            errors=JSON(dict(view.errors)),
        )
