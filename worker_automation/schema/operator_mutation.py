"""Operator mutations beyond one job at a time: bulk actions, queue pause, retention, schedules.

A base of :class:`~worker_automation.schema.mutation.Mutation`: its fields are the Mutation's.
"""

from __future__ import annotations

import strawberry

from worker_automation.resolvers import bulk, pauses, retention, schedule_firing, schedules
from worker_automation.schema.context import Info
from worker_automation.schema.fields import mutation
from worker_automation.schema.inputs import WorkerFilterInput
from worker_automation.schema.operator_types import BulkResult, PruneResult, QueuePause
from worker_automation.schema.permissions import manager, write
from worker_automation.schema.schedule_types import Schedule, ScheduleInput, ScheduleUpdateInput
from worker_automation.schema.types import Worker


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

    @mutation(
        description=(
            "Pause a queue: its jobs are still accepted, none is claimed until it is resumed "
            "(survives restarts; managers only)."
        ),
        extensions=manager(),
    )
    async def pause_queue(self, info: Info, queue: str) -> QueuePause:
        principal = await info.context.principal()
        services = info.context.services
        state = await pauses.pause_queue(services.db, services.settings.queues, principal.actor, queue)
        return QueuePause.from_view(state, info.context.tz)

    @mutation(
        description="Resume a paused queue: its queued jobs run without anyone acting (managers only).",
        extensions=manager(),
    )
    async def resume_queue(self, info: Info, queue: str) -> QueuePause:
        principal = await info.context.principal()
        services = info.context.services
        state = await pauses.resume_queue(
            services.db, services.settings.queues, principal.actor, queue, services.broker
        )
        return QueuePause.from_view(state, info.context.tz)

    @mutation(
        description=(
            "Delete finished jobs (CONCLUIDO, FALHA, CANCELADO) that ended more than olderThanDays days "
            "ago, with their attempts, in batches (managers only)."
        ),
        extensions=manager(),
    )
    async def prune_workers(self, info: Info, older_than_days: int) -> PruneResult:
        principal = await info.context.principal()
        deleted = await retention.prune_workers(info.context.services.db, principal.actor, older_than_days)
        return PruneResult(deleted=deleted, older_than_days=older_than_days)

    @mutation(
        description=(
            "Create a schedule: a job of the automation at each occurrence of cron (read in timezone, "
            "default WA_TIMEZONE); the context is checked against the automation's form."
        ),
        extensions=write(),
    )
    async def create_schedule(self, info: Info, input: ScheduleInput) -> Schedule:
        principal = await info.context.principal()
        services = info.context.services
        view = await schedules.create_schedule(
            services.db, services.settings.timezone, principal.actor, input.to_data()
        )
        return Schedule.from_view(view, info.context.tz)

    @mutation(description="Change a schedule; omitted fields stay.", extensions=write())
    async def update_schedule(self, info: Info, id: int, input: ScheduleUpdateInput) -> Schedule:
        principal = await info.context.principal()
        view = await schedules.update_schedule(info.context.services.db, principal.actor, id, input.to_data())
        return Schedule.from_view(view, info.context.tz)

    @mutation(
        description="Delete a schedule (the jobs it created stay); returns it as it was.", extensions=write()
    )
    async def delete_schedule(self, info: Info, id: int) -> Schedule:
        principal = await info.context.principal()
        services = info.context.services
        view = await schedules.get_schedule(services.db, id)
        await schedules.delete_schedule(services.db, principal.actor, id)
        return Schedule.from_view(view, info.context.tz)

    @mutation(
        description="Create the schedule's job now, outside its timetable; returns the job.",
        extensions=write(),
    )
    async def run_schedule_now(self, info: Info, id: int) -> Worker:
        principal = await info.context.principal()
        view = await schedule_firing.run_schedule_now(info.context.services, principal.actor, id)
        return Worker.from_view(view, info.context.tz)
