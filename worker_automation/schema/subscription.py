"""The Subscription root: live views fed by the process's event bus.

Each subscription attaches its :class:`Feed` before reading any state, so no change can fall
between the first payload and the events after it, and opens a fresh operation scope before each
payload so loaders never serve data cached by an earlier payload.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any
from zoneinfo import ZoneInfo

import strawberry

from worker_automation.broker.events import Event
from worker_automation.domain.errors import BadInput
from worker_automation.domain.sharing import Recent
from worker_automation.domain.vocabulary import EventKind, QueueChange
from worker_automation.resolvers import live
from worker_automation.resolvers.automations import registered
from worker_automation.resolvers.claims import pending_jobs
from worker_automation.resolvers.earlier_tasks import replaced_by
from worker_automation.resolvers.machine_runs import ended_runs, may_end_a_run
from worker_automation.resolvers.machines import MachineView
from worker_automation.resolvers.presence import machine_present
from worker_automation.resolvers.processes import watch_of
from worker_automation.resolvers.visibility import PUBLIC_JOB_FIELDS, may_claim
from worker_automation.schema.context import GraphQLContext, Info, selects
from worker_automation.schema.fields import subscription
from worker_automation.schema.inputs import JobEventFilter
from worker_automation.schema.monitoring import Dashboard, QueueLiveStatus, TaskStatus
from worker_automation.schema.permissions import machine, read
from worker_automation.schema.process_types import WorkerProcess, processes_of
from worker_automation.schema.query import TASK_FIELDS
from worker_automation.schema.scalars import JSON
from worker_automation.schema.streams import Feed, FeedClosed, coalesced
from worker_automation.schema.types import Job, JobEvent

# A task id with no job row is only known to Celery's result backend, which sends no events.
BACKEND_POLL_SECONDS = 2.0
# The payload of an event is a pure function of the event and the time zone: built once for every
# subscription of the process (see worker_automation.domain.sharing).
_EVENTS: Recent[tuple[str, str], JobEvent] = Recent(64)


def _shared_event(event: Event, tz: ZoneInfo) -> JobEvent:
    return _EVENTS.get((event.id, tz.key), lambda: JobEvent.from_event(event, tz))


def _replaced(task_id: str, event: Event) -> TaskStatus:
    """The status of a task whose job was moved, reordered or removed: its task was revoked."""
    job = Job.from_dict(event.job)
    detail = "Worker removido" if event.kind is EventKind.DELETED else replaced_by(job.task_id)
    return TaskStatus(
        task_id=task_id,
        state="REVOKED",
        status="REVOKED",
        result=JSON({"exc_type": "TaskRevokedError", "exc_message": detail}),
        worker_id=job.id,
        progress=job.progress,
        job=job,
    )


def _for_machine(machine: MachineView, job: dict[str, Any]) -> Job:
    """The job as ``machine`` may read it: a job it cannot claim keeps its id, automation and
    queue, and the fields the type cannot leave empty (status, timestamps, display name)."""
    if may_claim(machine, job.get("automation_type"), job.get("queue")):
        return Job.from_dict(job)
    shown = {name: job.get(name) for name in (*PUBLIC_JOB_FIELDS, "status", "created_at", "updated_at")}
    return Job.from_dict(shown)


async def _task_status(context: GraphQLContext, task_id: str) -> TaskStatus:
    return TaskStatus.from_view(await live.task_status(context.services, task_id), context.tz)


@strawberry.type(description="Live views. Operator subscriptions need worker_automation:read.")
class Subscription:
    """Push entry points, over websockets (graphql-transport-ws or graphql-ws)."""

    @subscription(
        description=(
            "Every queue's state at once, then a fresh state after each change (at most ~4 per second; "
            "the last change is always followed by a push)."
        ),
        extensions=read(),
    )
    async def queue_load(self, info: Info) -> AsyncGenerator[QueueLiveStatus, None]:
        context = info.context
        services = context.services
        with_tasks = selects(info, *TASK_FIELDS)

        async def load() -> QueueLiveStatus:
            # Read after the last event heard; subscribers reading at once share the read.
            states, summary = await live.queue_states(services, with_tasks=with_tasks)
            return QueueLiveStatus.build(states, summary, services.settings.tz)

        feed = Feed(services.events, queue_changes=True)
        try:
            async for state in coalesced(feed, load):
                context.begin_operation()
                yield state
        finally:
            feed.close()

    @subscription(
        description=(
            "Job events (created, claimed, progress, completed, failed, cancelled, moved, reordered, "
            "deleted) with the job as it is after each; RESYNC when events may have been missed."
        ),
        extensions=read(),
    )
    async def worker_events(
        self, info: Info, filter: JobEventFilter | None = None
    ) -> AsyncGenerator[JobEvent, None]:
        context = info.context
        chosen = filter or JobEventFilter()
        chosen.check(context.services.settings.queues)
        feed = Feed(context.services.events)
        try:
            async for event in feed.events():
                if event.kind is EventKind.RESYNC or chosen.matches(event.job):
                    context.begin_operation()
                    yield _shared_event(event, context.tz)
        finally:
            feed.close()

    @subscription(
        description=(
            "A task's state now, then on every change (state or progress); completes once the state "
            "is terminal (SUCCESS, FAILURE, REVOKED)."
        ),
        extensions=read(),
    )
    async def task_status(self, info: Info, task_id: str) -> AsyncGenerator[TaskStatus, None]:
        context = info.context
        feed = Feed(context.services.events)
        try:
            current = await _task_status(context, task_id)
            context.begin_operation()
            yield current
            while not current.is_terminal:
                job_id = current.worker_id
                event = await feed.next(within=BACKEND_POLL_SECONDS if job_id is None else None)
                if event is not None and event.kind is not EventKind.RESYNC:
                    row = event.job
                    if job_id is not None and row.get("id") == job_id:
                        if event.kind is EventKind.DELETED or row.get("task_id") != task_id:
                            context.begin_operation()
                            yield _replaced(task_id, event)
                            return
                    elif row.get("task_id") != task_id:
                        continue
                latest = await _task_status(context, task_id)
                if (latest.state, latest.progress) != (current.state, current.progress):
                    context.begin_operation()
                    yield latest
                current = latest
        except FeedClosed:
            return
        finally:
            feed.close()

    @subscription(
        description=(
            "For worker machines (X-Worker-Api-Key): each new job, of one automation or of all. After "
            "missed events the machine's pending jobs are sent again (claims refuse duplicates), and "
            "when a queue is resumed, its pending jobs."
        ),
        extensions=machine(),
    )
    async def job_created(self, info: Info, automation: str | None = None) -> AsyncGenerator[Job, None]:
        context = info.context
        services = context.services
        if automation is not None:
            registered(automation, "automation")
        me = await context.machine()
        # Presence: while this subscription is open the machine is there (resolvers.presence).
        presence = await machine_present(services, me)
        feed = Feed(services.events, queue_changes=True)
        try:
            while True:
                event = await feed.next()
                if event is None or event.kind is QueueChange.PAUSED:
                    continue
                if event.kind is EventKind.RESYNC or event.kind is QueueChange.RESUMED:
                    # After missed events, and when a queue is resumed (its jobs were refused
                    # while it was paused, and sweeps leave them out), the pending jobs are sent.
                    try:
                        missed = await pending_jobs(services, me, automation)
                    except BadInput:
                        missed = []
                    if event.kind is QueueChange.RESUMED:
                        missed = [view for view in missed if view.queue == event.job.get("queue")]
                    for view in missed:
                        context.begin_operation()
                        yield _for_machine(me, view.as_dict(context.tz))
                elif event.kind is EventKind.CREATED and (
                    automation is None or event.job.get("automation_type") == automation
                ):
                    context.begin_operation()
                    yield _for_machine(me, event.job)
        except FeedClosed:
            return
        finally:
            feed.close()
            presence.close()

    @subscription(
        description=(
            "For worker machines (X-Worker-Api-Key): each run of this machine's jobs that the API "
            "ended while it ran (an operator's cancel or move, a time limit), as the job now stands, "
            "so that the machine stops it; first those of `running` (the ids of the jobs it runs) "
            "already ended. Ends after missed events: subscribe again with the jobs still running."
        ),
        extensions=machine(),
    )
    async def runs_ended(self, info: Info, running: list[int] | None = None) -> AsyncGenerator[Job, None]:
        context = info.context
        services = context.services
        me = await context.machine()
        feed = Feed(services.events)
        try:
            for view in await ended_runs(services.db, me, running or []):
                context.begin_operation()
                yield _for_machine(me, view.as_dict(context.tz))
            async for event in feed.events():
                if event.kind is EventKind.RESYNC:
                    return
                if isinstance(event.kind, EventKind) and may_end_a_run(me, event.kind, event.job):
                    context.begin_operation()
                    yield _for_machine(me, event.job)
        finally:
            feed.close()

    @subscription(
        description="Every process that runs jobs at once, then again whenever one appears, changes "
        "or goes (looked at every few seconds, once for every subscriber of the API process).",
        extensions=read(),
    )
    async def processes(self, info: Info) -> AsyncGenerator[list[WorkerProcess], None]:
        context = info.context
        services = context.services
        async for views in watch_of(services).changes(services):
            context.begin_operation()
            yield processes_of(views, services.settings.tz)

    @subscription(
        description="The dashboard at once, then after each change (coalesced like queueLoad).",
        extensions=read(),
    )
    async def dashboard(self, info: Info) -> AsyncGenerator[Dashboard, None]:
        context = info.context
        services = context.services

        async def load() -> Dashboard:
            # Read after the last event heard; subscribers reading at once share the read.
            return Dashboard.from_view(await live.dashboard(services), services.settings.tz)

        feed = Feed(services.events, queue_changes=True)
        try:
            async for board in coalesced(feed, load):
                context.begin_operation()
                yield board
        finally:
            feed.close()
