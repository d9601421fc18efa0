"""Schedules: create, change, list and delete the cron timetables that create jobs.

A schedule names an automation, a client, a context (checked against the automation's form when
it is written) and a priority, and a cron expression read in a time zone (``WA_TIMEZONE`` unless
given). ``next_run_at`` is the next occurrence to fire; firing lives in
:mod:`worker_automation.resolvers.schedule_firing`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated, Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from sqlalchemy import select

from worker_automation.catalog.forms import validate_context
from worker_automation.domain.errors import BadInput, NotFound
from worker_automation.domain.ranges import PRIORITY_RANGE, check_priority
from worker_automation.domain.shapes import Doc
from worker_automation.models import Schedule, utcnow
from worker_automation.models.database import Database, Executor
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.automations import effective

MSG_SCHEDULE_NOT_FOUND: Final = "Agendamento nao encontrado."
# The columns' sizes.
MAX_CRON: Final = 120
MAX_TIMEZONE: Final = 64


@dataclass(frozen=True)
class ScheduleInput:
    """What a caller gives; on update, None keeps the current value."""

    automation_type: Any = None
    cliente_id: Any = None
    context: Any = None
    priority: Any = None
    cron: Any = None
    timezone: Any = None
    enabled: Any = None


@dataclass(frozen=True)
class ScheduleView:
    """A schedule as every transport shows it."""

    id: Annotated[int, Doc("Internal id (its jobs carry it in metadataJson.schedule_id).")]
    automation_type: Annotated[str, Doc("Automation of the jobs it creates.")]
    cliente_id: Annotated[int | None, Doc("Client of the jobs it creates.")]
    context: Annotated[dict[str, Any] | None, Doc("Input of the jobs it creates (checked by the form).")]
    priority: Annotated[int, Doc(f"Priority of the jobs it creates ({PRIORITY_RANGE}).")]
    cron: Annotated[str, Doc("Five-field cron expression (minute hour day month weekday).")]
    timezone: Annotated[str, Doc("IANA zone the cron expression is read in.")]
    enabled: Annotated[bool, Doc("False: no occurrence fires.")]
    next_run_at: Annotated[datetime | None, Doc("Next occurrence to fire (null: disabled).")]
    last_run_at: Annotated[datetime | None, Doc("When it last created a job.")]
    last_worker_id: Annotated[int | None, Doc("The last job it created.")]
    created_at: Annotated[datetime, Doc("When it was created.")]


def schedule_view(row: Schedule) -> ScheduleView:
    return ScheduleView(
        row.id,
        row.automation_type,
        row.cliente_id,
        row.context,
        row.priority,
        row.cron,
        row.timezone,
        row.enabled,
        row.next_run_at,
        row.last_run_at,
        row.last_worker_id,
        row.created_at,
    )


def check_cron(value: Any) -> str:
    """A five-field cron expression (``*/5 * * * *``), or BadInput naming ``cron``."""
    if not isinstance(value, str) or not value.strip():
        raise BadInput("cron", "cron e obrigatorio (ex.: '*/5 * * * *')")
    cron = " ".join(value.split())
    if len(cron) > MAX_CRON or len(cron.split(" ")) != 5 or not _parses(cron):
        raise BadInput("cron", f"cron invalido: {value[:80]!r} (5 campos: minuto hora dia mes dia-da-semana)")
    return cron


def _parses(cron: str) -> bool:
    try:
        return bool(croniter.is_valid(cron))
    except Exception:  # the library's own checks, whatever they raise on odd input
        return False


def check_timezone(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MAX_TIMEZONE:
        raise BadInput("timezone", "timezone deve ser um nome IANA (ex.: America/Sao_Paulo)")
    try:
        ZoneInfo(value.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise BadInput("timezone", f"timezone desconhecido: {value[:80]!r}") from None
    return value.strip()


def next_occurrence(cron: str, timezone: str, after: datetime) -> datetime:
    """The first occurrence of ``cron`` (read in ``timezone``) strictly after ``after``."""
    local = after.astimezone(ZoneInfo(timezone))
    try:
        found: datetime = croniter(cron, local).get_next(datetime)
    except Exception:  # a valid expression that never matches a date (e.g. 31 February)
        raise BadInput("cron", f"cron nunca ocorre: {cron!r}") from None
    return found.astimezone(ZoneInfo("UTC"))


async def _checked(conn: Executor, data: ScheduleInput) -> ScheduleInput:
    """``data`` complete and validated: BadInput names the field; the context cleaned by the form."""
    if not isinstance(data.automation_type, str) or not data.automation_type:
        raise BadInput("automation_type", "automation_type e obrigatorio")
    automation = await effective(conn, data.automation_type)
    cliente_id = data.cliente_id
    if cliente_id is not None and (isinstance(cliente_id, bool) or not isinstance(cliente_id, int)):
        raise BadInput("cliente_id", "cliente_id deve ser um inteiro")
    context = validate_context(automation.form, {} if data.context is None else data.context)
    if not isinstance(data.enabled, bool):
        raise BadInput("enabled", "enabled deve ser true ou false")
    return replace(
        data,
        context=context,
        priority=check_priority(data.priority),
        cron=check_cron(data.cron),
        timezone=check_timezone(data.timezone),
    )


async def list_schedules(db: Database) -> list[ScheduleView]:
    async with db.reader() as session:
        rows = await session.scalars(select(Schedule).order_by(Schedule.id))
        return [schedule_view(r) for r in rows.all()]


async def get_schedule(db: Database, schedule_id: int) -> ScheduleView:
    async with db.reader() as session:
        row = await session.get(Schedule, schedule_id)
        if row is None:
            raise NotFound(MSG_SCHEDULE_NOT_FOUND, schedule_id=schedule_id)
        return schedule_view(row)


async def create_schedule(
    db: Database, default_timezone: str, actor: Actor, data: ScheduleInput
) -> ScheduleView:
    """A new schedule; its first occurrence is the next one from now (none while disabled). Its
    zone is ``default_timezone`` (WA_TIMEZONE) unless given."""
    filled = replace(
        data,
        priority=0 if data.priority is None else data.priority,
        timezone=data.timezone or default_timezone,
        enabled=True if data.enabled is None else data.enabled,
    )
    async with audited(db, actor, "create_schedule", None) as note:
        async with db.session() as session:
            clean = await _checked(session, filled)
            row = Schedule(
                automation_type=clean.automation_type,
                cliente_id=clean.cliente_id,
                context=clean.context,
                priority=clean.priority,
                cron=clean.cron,
                timezone=clean.timezone,
                enabled=clean.enabled,
                next_run_at=next_occurrence(clean.cron, clean.timezone, utcnow()) if clean.enabled else None,
                created_by=actor.label,
            )
            session.add(row)
            await session.flush()
            note.target = f"schedule:{row.id}"
            note.detail = {"automation_type": row.automation_type, "cron": row.cron, "timezone": row.timezone}
            return schedule_view(row)


async def update_schedule(db: Database, actor: Actor, schedule_id: int, data: ScheduleInput) -> ScheduleView:
    """Change the fields given; a new timetable (cron, zone, enabled) starts from now."""
    async with audited(db, actor, "update_schedule", f"schedule:{schedule_id}") as note:
        async with db.session() as session:
            row = await session.get(Schedule, schedule_id, with_for_update=True)
            if row is None:
                raise NotFound(MSG_SCHEDULE_NOT_FOUND, schedule_id=schedule_id)
            current = ScheduleInput(
                row.automation_type,
                row.cliente_id,
                row.context,
                row.priority,
                row.cron,
                row.timezone,
                row.enabled,
            )
            given = {name: value for name, value in vars(data).items() if value is not None}
            clean = await _checked(session, replace(current, **given))
            note.detail = {"changed": sorted(given)}
            timetable = (clean.cron, clean.timezone, clean.enabled) != (row.cron, row.timezone, row.enabled)
            row.automation_type = clean.automation_type
            row.cliente_id = clean.cliente_id
            row.context = clean.context
            row.priority = clean.priority
            row.cron = clean.cron
            row.timezone = clean.timezone
            row.enabled = clean.enabled
            if not clean.enabled:
                row.next_run_at = None
            elif timetable or row.next_run_at is None:
                row.next_run_at = next_occurrence(clean.cron, clean.timezone, utcnow())
            await session.flush()
            return schedule_view(row)


async def delete_schedule(db: Database, actor: Actor, schedule_id: int) -> int:
    """Delete the schedule (the jobs it created stay); returns its id."""
    async with audited(db, actor, "delete_schedule", f"schedule:{schedule_id}"):
        async with db.session() as session:
            row = await session.get(Schedule, schedule_id, with_for_update=True)
            if row is None:
                raise NotFound(MSG_SCHEDULE_NOT_FOUND, schedule_id=schedule_id)
            await session.delete(row)
    return schedule_id
