"""Operator reads: history (throughput, durations), the audit trail, schedules.

A base of :class:`~worker_automation.schema.query.Query`: its fields are the Query's.
"""

from __future__ import annotations

import strawberry

from worker_automation.resolvers import health, history
from worker_automation.resolvers.audit_log import AuditFilter, audit_page
from worker_automation.resolvers.schedules import list_schedules
from worker_automation.schema.context import Info
from worker_automation.schema.fields import field
from worker_automation.schema.health_types import AutomationHealthDay
from worker_automation.schema.operator_types import (
    AuditFilterInput,
    AuditPage,
    DurationStats,
    ThroughputBucket,
    instant,
)
from worker_automation.schema.permissions import read
from worker_automation.schema.scalars import DateTime
from worker_automation.schema.schedule_types import Schedule


@strawberry.type
class OperatorQuery:
    """History, audit and schedule reads."""

    @field(
        description=(
            "Jobs finished per time bucket (CONCLUIDO, FALHA, CANCELADO) from since (default: 24 hours "
            "ago) to now, oldest first, every bucket present; buckets follow WA_TIMEZONE's clock."
        ),
        extensions=read(),
    )
    async def throughput(
        self,
        info: Info,
        since: DateTime | None = None,
        bucket_minutes: int = 60,
        queue: str | None = None,
        automation_type: str | None = None,
    ) -> list[ThroughputBucket]:
        tz = info.context.tz
        buckets = await history.throughput(
            info.context.services, instant(since, "since", tz), bucket_minutes, queue, automation_type
        )
        return [ThroughputBucket.from_view(b, tz) for b in buckets]

    @field(
        description=(
            "Run time percentiles of the runs that ended (CONCLUIDO or FALHA) since since (default: 24 "
            "hours ago), for one automation or all."
        ),
        extensions=read(),
    )
    async def durations(
        self, info: Info, automation_type: str | None = None, since: DateTime | None = None
    ) -> DurationStats:
        since_at = instant(since, "since", info.context.tz)
        found = await history.durations(info.context.services, automation_type, since_at)
        return DurationStats.from_view(found)

    @field(
        description=(
            "One automation's finished jobs and run-time percentiles per day of WA_TIMEZONE over the "
            "last `days` days (1 to 400, today included), oldest first, every day present; the days "
            "keep their counts after retention deletes the jobs."
        ),
        extensions=read(),
    )
    async def automation_health(
        self, info: Info, automation_type: str, days: int = 30
    ) -> list[AutomationHealthDay]:
        found = await health.automation_health(info.context.services, automation_type, days)
        return [AutomationHealthDay.from_view(d) for d in found]

    @field(
        description="The audit trail, newest first, filtered and paginated.",
        extensions=read(),
    )
    async def audit_log(
        self, info: Info, filter: AuditFilterInput | None = None, page: int = 1, per_page: int = 20
    ) -> AuditPage:
        tz = info.context.tz
        chosen = filter or AuditFilterInput()
        filters = AuditFilter(
            chosen.actor, chosen.action, instant(chosen.since, "filter.since", tz), chosen.target
        )
        found = await audit_page(info.context.services.db, filters, page, per_page)
        return AuditPage.from_page(found, tz)

    @field(description="Every schedule, by id.", extensions=read())
    async def schedules(self, info: Info) -> list[Schedule]:
        views = await list_schedules(info.context.services.db)
        return [Schedule.from_view(v, info.context.tz) for v in views]
