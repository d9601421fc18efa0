"""The Query root: each field translates its arguments, calls one resolver and wraps its view."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import strawberry

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.domain.errors import BadInput
from worker_automation.resolvers import live, reads
from worker_automation.resolvers.automations import all_effective
from worker_automation.resolvers.clientes import list_clientes
from worker_automation.resolvers.machines import list_machines
from worker_automation.resolvers.pagination import Page, position_of_cursor, slice_size
from worker_automation.resolvers.processes import list_processes
from worker_automation.resolvers.search import search_automations
from worker_automation.schema.catalog import Automation, AutomationSearch
from worker_automation.schema.context import Info, selects
from worker_automation.schema.fields import field
from worker_automation.schema.inputs import JobFilterInput, JobOrderInput
from worker_automation.schema.monitoring import (
    BrokerStatus,
    Dashboard,
    QueueLiveStatus,
    Stats,
    TaskStatus,
    WorkersInspect,
)
from worker_automation.schema.operator_query import OperatorQuery
from worker_automation.schema.permissions import read
from worker_automation.schema.process_types import WorkerProcess, processes_of
from worker_automation.schema.types import (
    WAITING_FIELDS,
    Cliente,
    Job,
    JobPage,
    Machine,
    PageInfo,
    jobs_of,
    jobs_of_rows,
    read_waiting,
)
from worker_automation.schema.viewer import Viewer

# Asking for these fields of QueueState means loading the jobs of every queue, not only counts.
TASK_FIELDS = ("activeTasks", "pendingTasks")
# The fields of Worker whose values are the JSON documents of job_views.DOCUMENT_FIELDS.
DOCUMENT_FIELDS = ("context", "result")


async def load_queue_status(info: Info) -> QueueLiveStatus:
    """Every queue's state; the job lists only when the selection asks for them."""
    services = info.context.services
    states, summary = await live.queue_states(services, with_tasks=selects(info, *TASK_FIELDS))
    return QueueLiveStatus.build(states, summary, services.settings.tz)


def _with_cursors(page: JobPage, found: Page[Job] | reads.Slice[Job]) -> JobPage:
    """``page`` with the cursors the resolver made (an ordered list's carry its sort keys)."""
    info = page.page_info
    page.page_info = PageInfo(
        start_cursor=found.start_cursor,
        end_cursor=found.end_cursor,
        has_next_page=info.has_next_page,
        has_previous_page=info.has_previous_page,
    )
    return page


@strawberry.type(description="Reads. Every field needs an API key with worker_automation:read.")
class Query(OperatorQuery):
    """Read-only entry points."""

    @field(
        description=(
            "Jobs, newest first unless orderBy says otherwise (filtered by a range of finish or "
            "creation times, in that time's order, newest first), filtered and paginated: by page number "
            "(page, perPage), or by cursor with first (how many) and after (a pageInfo.endCursor of "
            "the same order), which stays stable while jobs are created and costs the same at any depth."
        ),
        extensions=read(),
    )
    async def workers(
        self,
        info: Info,
        filter: JobFilterInput | None = None,
        page: int = 1,
        per_page: int = 20,
        first: int | None = None,
        after: str | None = None,
        order_by: JobOrderInput | None = None,
    ) -> JobPage:
        services = info.context.services
        chosen = (filter or JobFilterInput()).to_filter(services.settings.tz)
        order = order_by.to_order() if order_by is not None else chosen.implied_order()
        # The JSON documents are read only when the selection shows them; the workers are built
        # straight from the rows.
        documents = selects(info, *DOCUMENT_FIELDS)
        waiting = selects(info, *WAITING_FIELDS)
        tz = services.settings.tz

        def build(rows: Sequence[Sequence[Any]]) -> list[Job]:
            return jobs_of_rows(rows, tz)

        if first is None and after is None:
            found = await reads.list_page(
                services.db,
                services.settings.queues,
                chosen,
                page,
                per_page,
                build,
                documents=documents,
                order=order,
            )
            if waiting:
                await read_waiting(info, found.items)
            return _with_cursors(JobPage.of_jobs(found), found)
        if page != 1:
            raise BadInput("page", "page nao se combina com first/after: use um ou outro")
        size = slice_size(first, per_page)
        after_key, after_id = position_of_cursor(after, order) if after is not None else (None, None)
        part = await reads.slice_after(
            services.db,
            services.settings.queues,
            chosen,
            size,
            after_id,
            build,
            documents=documents,
            order=order,
            after_key=after_key,
        )
        if waiting:
            await read_waiting(info, part.items)
        return _with_cursors(JobPage.from_slice(part, size, after=after is not None), part)

    @field(description="One job by id (NOT_FOUND when there is none).", extensions=read())
    async def worker(self, info: Info, id: int) -> Job | None:
        view = await reads.get_job(info.context.services.db, id)
        return Job.from_view(view, info.context.tz)

    @field(description="Totals by status and by queue.", extensions=read())
    async def stats(self, info: Info) -> Stats:
        services = info.context.services
        return Stats.from_view(await reads.stats(services.db, services.settings.queues))

    @field(description="Every running job, longest running first.", extensions=read())
    async def active_workers(self, info: Info) -> list[Job]:
        return jobs_of(await reads.active_jobs(info.context.services.db), info.context.tz)

    @field(description="Queued jobs in run order (priority, then age).", extensions=read())
    async def queued_workers(
        self, info: Info, page: int = 1, per_page: int = 10, queue: str | None = None
    ) -> JobPage:
        services = info.context.services
        found = await reads.queued_jobs(services.db, services.settings.queues, page, per_page, queue)
        return JobPage.from_page(found, services.settings.tz, cursors=False)

    @field(
        description="Fuzzy search of the automation catalogue (score >= 60); without q, everything.",
        extensions=read(),
    )
    async def search_automations(self, info: Info, q: str | None = None) -> AutomationSearch:
        return AutomationSearch.from_view(search_automations(AUTOMATION_REGISTRY.values(), q))

    @field(description="Each configured queue right now, with totals.", extensions=read())
    async def queue_live_status(self, info: Info) -> QueueLiveStatus:
        return await load_queue_status(info)

    @field(description="Messages waiting in the broker per queue.", extensions=read())
    async def broker_status(self, info: Info) -> BrokerStatus:
        return BrokerStatus.from_view(await live.broker_status(info.context.services))

    @field(
        description="Raw Celery inspect of the workers (waits up to the inspect timeout).", extensions=read()
    )
    async def workers_inspect(self, info: Info) -> WorkersInspect:
        return WorkersInspect.from_view(await live.workers_inspect(info.context.services))

    @field(
        description="A task's state in Celery's vocabulary (NOT_FOUND when nobody knows it).",
        extensions=read(),
    )
    async def task_status(self, info: Info, task_id: str) -> TaskStatus | None:
        view = await live.task_status(info.context.services, task_id)
        return TaskStatus.from_view(view, info.context.tz)

    @field(
        description="Every section of the operators' screen; a failing source empties only its section.",
        extensions=read(),
    )
    async def dashboard(self, info: Info) -> Dashboard:
        return Dashboard.from_view(await live.dashboard(info.context.services), info.context.tz)

    @field(description="The automation catalogue with the limits in force.", extensions=read())
    async def automations(self, info: Info) -> list[Automation]:
        return [Automation.from_definition(a) for a in await all_effective(info.context.services.db)]

    @field(description="Registered worker machines.", extensions=read())
    async def machines(self, info: Info) -> list[Machine]:
        views = await list_machines(info.context.services.db)
        return [Machine.from_view(v, info.context.tz) for v in views]

    @field(
        description="Every process that runs jobs: Celery pool workers (from Celery's inspect, shared "
        "for a few seconds) and dedicated machines (from their presence).",
        extensions=read(),
    )
    async def processes(self, info: Info) -> list[WorkerProcess]:
        return processes_of(await list_processes(info.context.services), info.context.tz)

    @field(description="Client companies, by name.", extensions=read())
    async def clientes(self, info: Info) -> list[Cliente]:
        return [Cliente.from_view(v) for v in await list_clientes(info.context.services.db)]

    @field(
        description="The caller's key: perfil, scopes, what it may do, and the service's time zone. "
        "Any valid operator key may ask (UNAUTHENTICATED without one)."
    )
    async def viewer(self, info: Info) -> Viewer:
        principal = await info.context.principal()
        return Viewer.from_principal(principal, info.context.services.settings.timezone)
