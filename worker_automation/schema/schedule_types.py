"""GraphQL types of schedules: the Schedule itself and its create/update inputs."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import strawberry

from worker_automation.resolvers.schedules import ScheduleInput as ScheduleData
from worker_automation.resolvers.schedules import ScheduleView
from worker_automation.resolvers.views import iso
from worker_automation.schema.scalars import JSON, DateTime


def _stamp(value: str | None) -> DateTime | None:
    return DateTime(value) if value else None


@strawberry.type(description="A cron timetable that creates a job at each occurrence.")
class Schedule:
    """A schedule with the state of its timetable."""

    id: int = strawberry.field(description="Internal id (its jobs carry it in metadataJson.schedule_id).")
    automation_type: str = strawberry.field(description="Automation of the jobs it creates.")
    cliente_id: int | None = strawberry.field(description="Client of the jobs it creates.")
    context: JSON | None = strawberry.field(description="Input of the jobs it creates (checked by the form).")
    priority: int = strawberry.field(description="Priority of the jobs it creates (0..9).")
    cron: str = strawberry.field(description="Five-field cron expression (minute hour day month weekday).")
    timezone: str = strawberry.field(description="IANA zone the cron expression is read in.")
    enabled: bool = strawberry.field(description="False: no occurrence fires.")
    next_run_at: DateTime | None = strawberry.field(description="Next occurrence to fire (null: disabled).")
    last_run_at: DateTime | None = strawberry.field(description="When it last created a job.")
    last_worker_id: int | None = strawberry.field(description="The last job it created.")
    created_at: DateTime = strawberry.field(description="When it was created.")

    @classmethod
    def from_view(cls, view: ScheduleView, tz: ZoneInfo) -> Schedule:
        """Build from the resolver's view, timestamps in ``tz``."""
        return cls(
            id=view.id,
            automation_type=view.automation_type,
            cliente_id=view.cliente_id,
            context=JSON(view.context) if view.context is not None else None,
            priority=view.priority,
            cron=view.cron,
            timezone=view.timezone,
            enabled=view.enabled,
            next_run_at=_stamp(iso(view.next_run_at, tz)),
            last_run_at=_stamp(iso(view.last_run_at, tz)),
            last_worker_id=view.last_worker_id,
            created_at=DateTime(iso(view.created_at, tz) or ""),
        )


@strawberry.input(description="A new schedule.")
class ScheduleInput:
    """What createSchedule needs (the context is validated against the automation's form)."""

    automation_type: str = strawberry.field(description="Automation key in the registry.")
    cron: str = strawberry.field(description="Five-field cron expression, e.g. '0 6 * * 1-5'.")
    cliente_id: int | None = strawberry.field(default=None, description="Client of the jobs.")
    context: JSON | None = strawberry.field(default=None, description="Input of the jobs (the form).")
    priority: int = strawberry.field(default=0, description="0..9, lower runs first.")
    timezone: str | None = strawberry.field(default=None, description="IANA zone (default: WA_TIMEZONE).")
    enabled: bool = strawberry.field(default=True, description="False: created paused.")

    def to_data(self) -> ScheduleData:
        """The resolver's input."""
        return ScheduleData(
            self.automation_type,
            self.cliente_id,
            self.context,
            self.priority,
            self.cron,
            self.timezone,
            self.enabled,
        )


@strawberry.input(description="Changes to a schedule; omitted fields stay as they are.")
class ScheduleUpdateInput:
    """What updateSchedule takes; a new cron, zone or enabled starts the timetable from now."""

    automation_type: str | None = strawberry.field(default=None, description="Automation key.")
    cron: str | None = strawberry.field(default=None, description="Five-field cron expression.")
    cliente_id: int | None = strawberry.field(default=None, description="Client of the jobs.")
    context: JSON | None = strawberry.field(default=None, description="Input of the jobs.")
    priority: int | None = strawberry.field(default=None, description="0..9, lower runs first.")
    timezone: str | None = strawberry.field(default=None, description="IANA zone.")
    enabled: bool | None = strawberry.field(default=None, description="False: no occurrence fires.")

    def to_data(self) -> ScheduleData:
        """The resolver's input (None keeps the current value)."""
        return ScheduleData(
            self.automation_type,
            self.cliente_id,
            self.context,
            self.priority,
            self.cron,
            self.timezone,
            self.enabled,
        )
