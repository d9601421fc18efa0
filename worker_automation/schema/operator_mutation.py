"""Operator mutations beyond one job at a time: bulk actions, queue pause, retention, schedules.

A base of :class:`~worker_automation.schema.mutation.Mutation`: its fields are the Mutation's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import strawberry

from worker_automation.resolvers import bulk, pauses, retention, schedule_firing, schedules
from worker_automation.schema.context import Info
from worker_automation.schema.fields import mutation
from worker_automation.schema.inputs import JobFilterInput
from worker_automation.schema.operator_types import BulkResult, PruneResult, QueuePause
from worker_automation.schema.permissions import manager, write
from worker_automation.schema.schedule_types import Schedule, ScheduleInput, ScheduleUpdateInput
from worker_automation.schema.types import Job

if TYPE_CHECKING:
    from worker_automation.resolvers.audit import Actor
    from worker_automation.resolvers.job_filter import JobFilter
    from worker_automation.resolvers.services import Services

    BulkAction = Callable[[Services, Actor, JobFilter, int | None], Awaitable[bulk.BulkResult]]


async def _acting(info: Info) -> tuple[Services, Actor]:
    """What a mutation acts with: the services, and the caller (whose key is checked here)."""
    principal = await info.context.principal()
    return info.context.services, principal.actor


async def _bulk(info: Info, action: BulkAction, filter: JobFilterInput, limit: int | None) -> BulkResult:
    services, actor = await _acting(info)
    return BulkResult.from_view(await action(services, actor, filter.to_filter(services.settings.tz), limit))


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
    async def retry_workers(self, info: Info, filter: JobFilterInput, limit: int | None = None) -> BulkResult:
        return await _bulk(info, bulk.retry_jobs, filter, limit)

    @mutation(
        description=(
            "Cancel every queued or running job the filter matches (running ones are terminated; "
            f"finished ones stay), newest first, up to limit (default {bulk.DEFAULT_BULK}), in one "
            "transaction."
        ),
        extensions=write(),
    )
    async def cancel_workers(
        self, info: Info, filter: JobFilterInput, limit: int | None = None
    ) -> BulkResult:
        return await _bulk(info, bulk.cancel_jobs, filter, limit)

    @mutation(
        description=(
            "Pause a queue: its jobs are still accepted, none is claimed until it is resumed "
            "(survives restarts; managers only)."
        ),
        extensions=manager(),
    )
    async def pause_queue(self, info: Info, queue: str) -> QueuePause:
        services, actor = await _acting(info)
        state = await pauses.pause_queue(services.db, services.settings.queues, actor, queue, services.events)
        return QueuePause.from_view(state, info.context.tz)

    @mutation(
        description="Resume a paused queue: its queued jobs run without anyone acting (managers only).",
        extensions=manager(),
    )
    async def resume_queue(self, info: Info, queue: str) -> QueuePause:
        services, actor = await _acting(info)
        state = await pauses.resume_queue(
            services.db, services.settings.queues, actor, queue, services.broker, services.events
        )
        return QueuePause.from_view(state, info.context.tz)

    @mutation(
        description=(
            "Delete finished jobs (CONCLUIDO, FALHA, CANCELADO) that ended more than olderThanDays days "
            "ago, with their attempts, in batches (managers only). With dryRun, count them and delete "
            "nothing."
        ),
        extensions=manager(),
    )
    async def prune_workers(
        self, info: Info, older_than_days: int, dry_run: bool | None = False
    ) -> PruneResult:
        services, actor = await _acting(info)
        dry = bool(dry_run)  # null counts as the default
        found = await retention.prune_jobs(services.db, actor, older_than_days, dry_run=dry)
        return PruneResult(
            deleted=0 if dry else found, matched=found, older_than_days=older_than_days, dry_run=dry
        )

    @mutation(
        description=(
            "Create a schedule: a job of the automation at each occurrence of cron (read in timezone, "
            "default WA_TIMEZONE); the context is checked against the automation's form."
        ),
        extensions=write(),
    )
    async def create_schedule(self, info: Info, input: ScheduleInput) -> Schedule:
        services, actor = await _acting(info)
        view = await schedules.create_schedule(
            services.db, services.settings.timezone, actor, input.to_data()
        )
        return Schedule.from_view(view, info.context.tz)

    @mutation(description="Change a schedule; omitted fields stay.", extensions=write())
    async def update_schedule(self, info: Info, id: int, input: ScheduleUpdateInput) -> Schedule:
        services, actor = await _acting(info)
        view = await schedules.update_schedule(services.db, actor, id, input.to_data())
        return Schedule.from_view(view, info.context.tz)

    @mutation(
        description="Delete a schedule (the jobs it created stay); returns it as it was.", extensions=write()
    )
    async def delete_schedule(self, info: Info, id: int) -> Schedule:
        services, actor = await _acting(info)
        view = await schedules.get_schedule(services.db, id)
        await schedules.delete_schedule(services.db, actor, id)
        return Schedule.from_view(view, info.context.tz)

    @mutation(
        description="Create the schedule's job now, outside its timetable; returns the job.",
        extensions=write(),
    )
    async def run_schedule_now(self, info: Info, id: int) -> Job:
        services, actor = await _acting(info)
        view = await schedule_firing.run_schedule_now(services, actor, id)
        return Job.from_view(view, info.context.tz)
