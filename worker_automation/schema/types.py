"""GraphQL object types of jobs and who they belong to: Worker, WorkerPage, WorkerEvent, Machine, Cliente.

``Worker`` (the class ``Job``) is derived from the job row's declaration, :class:`JobView`: its
fields, their order, types and descriptions, and the tables its builders use. A Worker built from
a view, from a row of a list page or from an event's dict (:meth:`JobView.as_dict`) holds the same
values, so a job looks the same whether it was read, returned by a mutation or pushed by a
subscription.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast
from zoneinfo import ZoneInfo

import strawberry

from worker_automation.broker.events import Event
from worker_automation.domain.shapes import facets, strip_optional
from worker_automation.models import utcnow
from worker_automation.resolvers.clientes import ClienteView
from worker_automation.resolvers.job_views import (
    CLIENT_NAME,
    ENUM_FIELDS,
    FIELDS,
    INSTANT_FIELDS,
    ROW_FIELDS,
    JobView,
    display_name_of,
    iso,
)
from worker_automation.resolvers.machines import MachineView
from worker_automation.resolvers.pagination import Page, cursor_of
from worker_automation.resolvers.presence import is_connected
from worker_automation.resolvers.reads import Slice
from worker_automation.resolvers.waiting import Waiting
from worker_automation.schema.attempt_types import Attempt
from worker_automation.schema.context import Info
from worker_automation.schema.derived import FromView, derived
from worker_automation.schema.enums import ChangeKind, EventKind, JobStatus, MachineStatus, change_of
from worker_automation.schema.fields import field
from worker_automation.schema.process_types import WaitingReason, waiting_of_job, waiting_of_jobs
from worker_automation.schema.scalars import DateTime, ZonedInstant


@strawberry.type(description="A registered worker process: serves one automation, or one queue.")
class Machine:
    """A machine as operators see it (never its key)."""

    id: int = strawberry.field(description="Internal id.")
    name: str = strawberry.field(description="Unique name given at registration.")
    automation: str | None = strawberry.field(description="The automation key it serves, if dedicated.")
    queue: str | None = strawberry.field(description="The Celery queue it serves, if a pool worker.")
    status: MachineStatus = strawberry.field(description="LIGADO (may claim jobs) or DESLIGADO.")
    is_on: bool = strawberry.field(description="True when the machine may claim jobs.")
    created_at: DateTime = strawberry.field(description="When it was registered.")
    last_claim_at: DateTime | None = strawberry.field(description="When it last claimed a job.")
    last_seen_at: DateTime | None = strawberry.field(
        description="When its jobCreated subscription was last known open (now, while connected); "
        "null for a machine that never subscribed."
    )
    connected_since: strawberry.Private[datetime | None]
    seen_at: strawberry.Private[datetime | None]

    @field(
        description="True while the machine holds its jobCreated subscription open (its presence). "
        "A dedicated machine away longer than the recovery window has its running jobs ended "
        "machine_lost (or queued again when its automation is idempotent)."
    )
    def connected(self, info: Info) -> bool:
        settings = info.context.services.settings
        return is_connected(self.connected_since, self.seen_at, settings, utcnow())

    @classmethod
    def from_view(cls, view: MachineView, tz: ZoneInfo) -> Machine:
        """Build from the resolver's view, timestamps in ``tz``."""
        return cls(
            id=view.id,
            name=view.name,
            automation=view.automation,
            queue=view.queue,
            status=MachineStatus(view.status),
            is_on=view.is_on,
            created_at=DateTime(iso(view.created_at, tz) or ""),
            last_claim_at=DateTime(stamp) if (stamp := iso(view.last_claim_at, tz)) else None,
            last_seen_at=DateTime(seen) if (seen := iso(view.last_seen_at, tz)) else None,
            connected_since=view.connected_since,
            seen_at=view.last_seen_at,
        )


@derived(ClienteView, description="A client company jobs run for.")
class Cliente(FromView):
    """A client of the platform (minimal copy of the wider platform's record)."""


def _at(value: datetime | None, tz: ZoneInfo) -> DateTime | None:
    return None if value is None else DateTime(value.astimezone(tz).isoformat(timespec="seconds"))


T = TypeVar("T")
# Where a job keeps why it waits once its page has read it (see read_waiting), and the mark of a
# job whose page did not.
_WAITING_READ: Final = "waiting_read"
_UNREAD: Final = object()


def _reason_of(waiting: Waiting | None) -> WaitingReason | None:
    return WaitingReason(waiting.reason) if waiting is not None else None


def _position_of(waiting: Waiting | None) -> int | None:
    return waiting.position if waiting is not None else None


@derived(JobView, name="Worker", description="One execution of an automation (a 'worker' in the REST API).")
class Job:
    """A job row with its automation's display name and its client's name: the fields of
    :class:`JobView`, in its order, then what only GraphQL resolves."""

    status: JobStatus  # the view's text, as the enum
    if TYPE_CHECKING:  # the fields the code below and the subscriptions read, typed for the checker
        id: int
        task_id: str | None
        cliente_id: int | None
        progress: int
        machine_id: int | None

    @field(description="The machine that claimed the job (batched per operation).")
    async def machine(self, info: Info) -> Machine | None:
        if self.machine_id is None:
            return None
        view = await info.context.loaders.machines.load(self.machine_id)
        return Machine.from_view(view, info.context.tz) if view is not None else None

    @field(description="The client record behind clienteId (batched per operation).")
    async def cliente(self, info: Info) -> Cliente | None:
        if self.cliente_id is None:
            return None
        view = await info.context.loaders.clientes.load(self.cliente_id)
        return Cliente.from_view(view) if view is not None else None

    @field(description="Every run of the job, oldest first, kept across retries (batched per operation).")
    async def attempts(self, info: Info) -> list[Attempt]:
        views = await info.context.loaders.attempts.load(self.id)
        return [Attempt.from_view(view, info.context.tz) for view in views]

    def _waiting(self, info: Info, pick: Callable[[Waiting | None], T]) -> T:
        """``pick`` of why the job waits (None unless queued): at once when its page read it (see
        :func:`read_waiting`), else an awaitable of it, batched per operation. The three fields
        below are plain resolvers for that reason: Strawberry and graphql-core await a resolver's
        awaitable result, and a page of values read at once no longer costs an await per field."""
        if self.status is not JobStatus.AGENDADO:
            return pick(None)
        known = self.__dict__.get(_WAITING_READ, _UNREAD)
        if known is not _UNREAD:
            return pick(known)

        async def later() -> T:
            return pick(await waiting_of_job(info, self.id))

        return cast(T, later())

    @field(
        description="Why a queued (AGENDADO) job is not running yet; null for any other status "
        "(batched per operation)."
    )
    def waiting_reason(self, info: Info) -> WaitingReason | None:
        return self._waiting(info, _reason_of)

    @field(
        description="1-based place among the queued jobs of its queue in claim order (priority, then "
        "age); null unless AGENDADO (batched per operation)."
    )
    def queue_position(self, info: Info) -> int | None:
        return self._waiting(info, _position_of)

    @field(
        description="When a queued automatic retry may run: no claim before it (null unless the "
        "job is AGENDADO as an automatic retry; batched per operation)."
    )
    def next_attempt_at(self, info: Info) -> DateTime | None:
        tz = info.context.tz
        return self._waiting(info, lambda w: None if w is None else _at(w.next_attempt_at, tz))

    @classmethod
    def from_view(cls, view: JobView, tz: ZoneInfo) -> Job:
        """Build from a resolver's view, timestamps in ``tz`` (the same values as
        :meth:`from_dict` of :meth:`JobView.as_dict`, without the dict in between: lists and
        live screens build hundreds)."""
        values = view.__dict__.copy()
        values["status"] = JobStatus(values["status"])
        for name, empty in _INSTANTS:
            values[name] = _at(values[name], tz) or empty
        return _made(values)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        """Build from :meth:`JobView.as_dict` output (what events carry); a field left out reads
        as null, or as the empty value of its type where the type allows no null."""
        values: dict[str, Any] = {name: data.get(name) for name in FIELDS}
        for name, empty in _EMPTY:
            if values[name] is None:
                values[name] = empty
        values["status"] = JobStatus(values["status"])
        if not values["display_name"]:
            values["display_name"] = values["automation_type"]
        return _made(values)


def _made(values: dict[str, Any]) -> Job:
    """A Worker holding ``values`` (one per field of :class:`JobView`). Its dataclass __init__
    would only set them one by one, after matching 22 keywords: a list page builds one per row."""
    job: Job = object.__new__(Job)
    job.__dict__ = values
    return job


def _required(hint: Any) -> bool:
    return not strip_optional(hint)[1]


# Per instant of the view: what it is when null (the empty text where the type allows no null).
_INSTANTS: tuple[tuple[str, DateTime | None], ...] = tuple(
    (f.name, DateTime("") if _required(f.hint) else None) for f in facets(JobView) if f.name in INSTANT_FIELDS
)


# The empty value of each field that cannot be null, for a dict that leaves it out (the text of
# an instant, as events carry instants).
_EMPTIES: dict[Any, Any] = {int: 0, str: "", datetime: DateTime("")}
_EMPTY: tuple[tuple[str, Any], ...] = tuple(
    (f.name, _EMPTIES[f.hint]) for f in facets(JobView) if _required(f.hint) and f.name not in ENUM_FIELDS
)


def jobs_of(views: list[JobView], tz: ZoneInfo) -> list[Job]:
    """GraphQL workers from resolver views."""
    return [Job.from_view(v, tz) for v in views]


# The names of a row of enriched_select, by position: its columns, then the client's name.
_ROW_NAMES = (*ROW_FIELDS, CLIENT_NAME)


def jobs_of_rows(rows: Sequence[Sequence[Any]], tz: ZoneInfo) -> list[Job]:
    """GraphQL workers straight from the rows of ``enriched_select`` (the same values as
    :meth:`Job.from_view` of their views, without the views in between: a list page builds
    one per row). Their timestamps are rendered only for the fields the query selects."""
    jobs: list[Job] = []
    new, instants = object.__new__, _INSTANTS  # (looked up once: this loop is the page)
    for row in rows:
        # A row may carry more columns after these (zip stops at the names); strict= would cost
        # a keyword call per row.
        values = dict(zip(_ROW_NAMES, row))  # noqa: B905
        values["status"] = JobStatus(values["status"])
        for name, empty in instants:
            value = values[name]
            values[name] = empty if value is None else ZonedInstant(value, tz)
        values["display_name"] = display_name_of(values["automation_type"])
        job: Job = new(Job)
        job.__dict__ = values  # as _made does
        jobs.append(job)
    return jobs


@strawberry.type(description="Where a list stands, for cursor (keyset) pagination.")
class PageInfo:
    """Cursors of a list's first and last items and whether more items follow."""

    start_cursor: str | None = strawberry.field(
        description="Cursor of the first item; null when empty or not the job list by age."
    )
    end_cursor: str | None = strawberry.field(
        description=(
            "Cursor of the last item: pass it as `after` to `workers` for the next items; null when "
            "empty or not the job list by age (queuedWorkers, dashboard)."
        )
    )
    has_next_page: bool = strawberry.field(description="True when more items follow this one.")
    has_previous_page: bool = strawberry.field(
        description="True when items come before these (a page past the first, or a slice after a cursor)."
    )

    @classmethod
    def of(
        cls,
        items: Sequence[JobView] | Sequence[Job],
        *,
        has_next: bool,
        has_previous: bool,
        cursors: bool = True,
    ) -> PageInfo:
        """For ``items`` of the newest-first job list (other orders carry no cursors)."""
        return cls(
            start_cursor=cursor_of(items[0].id) if items and cursors else None,
            end_cursor=cursor_of(items[-1].id) if items and cursors else None,
            has_next_page=has_next,
            has_previous_page=has_previous,
        )


@strawberry.type(
    name="WorkerPage",
    description=(
        "One page of jobs, with the totals of the documented pagination contract and the cursors "
        "of cursor (keyset) pagination."
    ),
)
class JobPage:
    """A page of :class:`Job`."""

    items: list[Job] = strawberry.field(description="The jobs of this page.")
    total: int = strawberry.field(description="Jobs matching, over all pages.")
    page: int = strawberry.field(
        description="This page's number (from 1); 0 for a slice asked for with first/after (not numbered)."
    )
    per_page: int = strawberry.field(description="Page size (at most 100).")
    pages: int = strawberry.field(description="Number of pages of this size.")
    page_info: PageInfo = strawberry.field(
        description="Cursors of this page's first and last jobs and whether more follow."
    )

    @classmethod
    def from_page(cls, page: Page[JobView], tz: ZoneInfo, *, cursors: bool = True) -> JobPage:
        """Build from a resolver's page (``cursors`` only for the newest-first job list)."""
        return cls.of_jobs(
            Page(jobs_of(page.items, tz), page.total, page.page, page.per_page), cursors=cursors
        )

    @classmethod
    def of_jobs(cls, page: Page[Job], *, cursors: bool = True) -> JobPage:
        """Build from a page of workers already built (``cursors`` as for :meth:`from_page`)."""
        return cls(
            items=page.items,
            total=page.total,
            page=page.page,
            per_page=page.per_page,
            pages=page.pages,
            page_info=PageInfo.of(
                page.items, has_next=page.page < page.pages, has_previous=page.page > 1, cursors=cursors
            ),
        )

    @classmethod
    def from_slice(cls, found: Slice[Job], size: int, *, after: bool) -> JobPage:
        """Build from a slice of workers after a cursor (``size`` asked for)."""
        return cls(
            items=found.items,
            total=found.total,
            page=0,
            per_page=size,
            pages=math.ceil(found.total / size) if found.total else 0,
            page_info=PageInfo.of(found.items, has_next=found.has_next, has_previous=after),
        )


@strawberry.type(name="WorkerEvent", description="Something happened to a job.")
class JobEvent:
    """One bus event as subscribers receive it."""

    id: str = strawberry.field(description="Event id (unique; for de-duplication).")
    kind: EventKind = strawberry.field(description="What happened.")
    change: ChangeKind = strawberry.field(description="How a kept list of jobs should change.")
    at: DateTime = strawberry.field(description="When the event was published.")
    job: Job | None = strawberry.field(
        name="worker", description="The job after the change; null for RESYNC."
    )

    @classmethod
    def from_event(cls, event: Event, tz: ZoneInfo) -> JobEvent:
        """Build from a bus event."""
        job = Job.from_dict(event.job) if event.job else None
        kind = EventKind(event.kind)
        return cls(
            id=event.id,
            kind=kind,
            change=change_of(kind),
            at=DateTime(_in_zone(event.at, tz)),
            job=job,
        )


def _in_zone(stamp: str, tz: ZoneInfo) -> str:
    try:
        return datetime.fromisoformat(stamp).astimezone(tz).isoformat(timespec="seconds")
    except ValueError:
        return stamp


# The fields of Worker that say why a queued job waits.
WAITING_FIELDS = ("waitingReason", "queuePosition", "nextAttemptAt")


async def read_waiting(info: Info, jobs: Sequence[Job]) -> None:
    """Read why the queued ones among ``jobs`` (a page) wait, in one statement, so their
    :data:`WAITING_FIELDS` answer without a load each."""
    queued = [job.id for job in jobs if job.status is JobStatus.AGENDADO]
    if not queued:
        return
    found = await waiting_of_jobs(info, queued)
    for job in jobs:
        if job.status is JobStatus.AGENDADO:
            job.__dict__[_WAITING_READ] = found.get(job.id)
