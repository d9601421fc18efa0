"""GraphQL types of schedules: the Schedule itself and its create/update inputs."""

from __future__ import annotations

import dataclasses

import strawberry

from worker_automation.domain.ranges import PRIORITY_RANGE
from worker_automation.resolvers.schedules import ScheduleInput as ScheduleData
from worker_automation.resolvers.schedules import ScheduleView
from worker_automation.schema.derived import FromView, derived
from worker_automation.schema.scalars import JSON


@derived(ScheduleView, description="A cron timetable that creates a job at each occurrence.")
class Schedule(FromView):
    """A schedule with the state of its timetable."""


def _data_of(given: ScheduleInput | ScheduleUpdateInput) -> ScheduleData:
    """The resolver's input: the fields of the same names."""
    return ScheduleData(**{f.name: getattr(given, f.name) for f in dataclasses.fields(ScheduleData)})


@strawberry.input(description="A new schedule.")
class ScheduleInput:
    """What createSchedule needs (the context is validated against the automation's form)."""

    automation_type: str = strawberry.field(description="Automation key in the registry.")
    cron: str = strawberry.field(description="Five-field cron expression, e.g. '0 6 * * 1-5'.")
    cliente_id: int | None = strawberry.field(default=None, description="Client of the jobs.")
    context: JSON | None = strawberry.field(default=None, description="Input of the jobs (the form).")
    priority: int = strawberry.field(default=0, description=f"{PRIORITY_RANGE}, lower runs first.")
    timezone: str | None = strawberry.field(default=None, description="IANA zone (default: WA_TIMEZONE).")
    enabled: bool = strawberry.field(default=True, description="False: created paused.")

    def to_data(self) -> ScheduleData:
        """The resolver's input."""
        return _data_of(self)


@strawberry.input(description="Changes to a schedule; omitted fields stay as they are.")
class ScheduleUpdateInput:
    """What updateSchedule takes; a new cron, zone or enabled starts the timetable from now."""

    automation_type: str | None = strawberry.field(default=None, description="Automation key.")
    cron: str | None = strawberry.field(default=None, description="Five-field cron expression.")
    cliente_id: int | None = strawberry.field(default=None, description="Client of the jobs.")
    context: JSON | None = strawberry.field(default=None, description="Input of the jobs.")
    priority: int | None = strawberry.field(default=None, description=f"{PRIORITY_RANGE}, lower runs first.")
    timezone: str | None = strawberry.field(default=None, description="IANA zone.")
    enabled: bool | None = strawberry.field(default=None, description="False: no occurrence fires.")

    def to_data(self) -> ScheduleData:
        """The resolver's input (None keeps the current value)."""
        return _data_of(self)
