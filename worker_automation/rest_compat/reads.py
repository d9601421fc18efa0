"""Read routes of ``/api/v1/worker-automation``: lists, stats, live views, task status, dashboard.

Each handler parses its parameters (BadInput names the field), calls one resolver and renders the
documented JSON; no rule lives here. ``read_route`` authenticates (read scope) and lets identical
requests arriving together share one answer; ``lookup_route`` does the same with a lookup by id
started beside the key's check.
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from worker_automation.domain.limits import INT32_MAX, INT32_MIN
from worker_automation.domain.ranges import MAX_PER_PAGE
from worker_automation.domain.shapes import as_dict
from worker_automation.models import JobStatus
from worker_automation.resolvers import live
from worker_automation.resolvers import reads as read_ops
from worker_automation.resolvers.automations import all_effective
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.job_views import JobView
from worker_automation.resolvers.pagination import Page
from worker_automation.resolvers.search import search_automations
from worker_automation.resolvers.services import Services
from worker_automation.rest_compat.http import int_param, lookup_route, read_route, success, text_param

MSG_LIST = "Workers recuperados com sucesso"
MSG_STATS = "Estatisticas recuperadas com sucesso"
MSG_ACTIVE = "Workers ativos recuperados com sucesso"
MSG_QUEUED = "Workers na fila recuperados com sucesso"
MSG_QUEUE_LIVE = "Status das filas recuperado com sucesso"
MSG_BROKER = "Snapshot do broker recuperado com sucesso"
MSG_INSPECT = "Inspect recuperado com sucesso"
MSG_TASK_STATUS = "Status da task recuperado com sucesso"
MSG_DASHBOARD = "Dashboard recuperado com sucesso"
MSG_JOB = "Worker encontrado com sucesso"

DASHBOARD_QUEUED_PER_PAGE = 10


def search_message(count: int) -> str:
    return f"{count} automacao(oes) encontrada(s)"


def job_id_of(request: Request) -> int:
    """The ``{worker_id}`` path parameter as an integer (BadInput naming it otherwise)."""
    value = int_param(request.path_params["worker_id"], "worker_id", minimum=1, maximum=INT32_MAX)
    assert value is not None  # a path segment is never empty
    return value


def page_args(query: QueryParams) -> tuple[int | None, int | None]:
    page = int_param(query.get("page"), "page", minimum=1, maximum=INT32_MAX)
    per_page = int_param(query.get("per_page"), "per_page", minimum=1, maximum=MAX_PER_PAGE)
    return page, per_page


def page_dict(page: Page[JobView], tz: ZoneInfo) -> dict[str, Any]:
    items = [item.rest_item(tz) for item in page.items]
    return items_page_dict(Page(items, page.total, page.page, page.per_page))


def items_page_dict(page: Page[dict[str, Any]]) -> dict[str, Any]:
    """The documented page of a page whose items are already REST items."""
    return {
        "items": page.items,
        "total": page.total,
        "page": page.page,
        "per_page": page.per_page,
        "pages": page.pages,
    }


def queue_dict(state: live.QueueState, tz: ZoneInfo, *, with_tasks: bool) -> dict[str, Any]:
    """One queue in the seed's key order; the dashboard leaves the task lists out."""
    data: dict[str, Any] = {"queue_name": state.queue_name, "workers_count": state.workers_count}
    if with_tasks:
        data["active_tasks"] = [item.rest_item(tz) for item in state.active_tasks]
        data["pending_tasks"] = [item.rest_item(tz) for item in state.pending_tasks]
    data.update(
        active_count=state.active_count,
        pending_count=state.pending_count,
        capacity=state.capacity,
        load_percent=state.load_percent,
    )
    return data


@read_route
async def list_route(request: Request, services: Services) -> Response:
    query = request.query_params
    filters = JobFilter(
        status=text_param(query.get("status"), "status"),
        queue=text_param(query.get("queue"), "queue"),
        automation_type=text_param(query.get("automation_type"), "automation_type"),
        cliente_id=int_param(query.get("cliente_id"), "cliente_id", minimum=INT32_MIN, maximum=INT32_MAX),
        usuario_id=int_param(query.get("usuario_id"), "usuario_id", minimum=INT32_MIN, maximum=INT32_MAX),
        task_id=text_param(query.get("task_id"), "task_id"),
        q=text_param(query.get("q"), "q"),
    )
    page, per_page = page_args(query)
    settings = services.settings
    found = await read_ops.list_job_items(services.db, settings.queues, filters, settings.tz, page, per_page)
    return success(MSG_LIST, items_page_dict(found))


@read_route
async def stats_route(request: Request, services: Services) -> Response:
    totals = await read_ops.stats(services.db, services.settings.queues)
    return success(MSG_STATS, as_dict(totals))


@read_route
async def active_route(request: Request, services: Services) -> Response:
    items = await read_ops.active_jobs(services.db)
    return success(MSG_ACTIVE, [item.rest_item(services.settings.tz) for item in items])


@read_route
async def queued_route(request: Request, services: Services) -> Response:
    query = request.query_params
    page, per_page = page_args(query)
    queue = text_param(query.get("queue"), "queue")
    found = await read_ops.queued_jobs(services.db, services.settings.queues, page, per_page, queue)
    return success(MSG_QUEUED, page_dict(found, services.settings.tz))


@read_route
async def search_route(request: Request, services: Services) -> Response:
    q = text_param(request.query_params.get("q"), "q")
    result = search_automations(await all_effective(services.db), q)
    return success(search_message(result.count), result.to_dict())


@read_route
async def queue_live_route(request: Request, services: Services) -> Response:
    status = await live.queue_live_status(services)
    tz = services.settings.tz
    data = {
        "queues": [queue_dict(state, tz, with_tasks=True) for state in status.queues],
        "summary": as_dict(status.summary),
    }
    return success(MSG_QUEUE_LIVE, data)


@read_route
async def broker_status_route(request: Request, services: Services) -> Response:
    return success(MSG_BROKER, as_dict(await live.broker_status(services)))


@read_route
async def workers_inspect_route(request: Request, services: Services) -> Response:
    return success(MSG_INSPECT, as_dict(await live.workers_inspect(services)))


@lookup_route
async def task_status_route(request: Request, services: Services) -> Response:
    task_id = text_param(request.path_params["task_id"], "task_id") or ""
    status = await live.task_status(services, task_id)
    return success(MSG_TASK_STATUS, status.as_dict())


def dashboard_dict(board: live.Dashboard, queues: dict[str, int], tz: ZoneInfo) -> dict[str, Any]:
    """Every section in its documented shape; a failed section keeps that shape, emptied."""
    stats = board.stats or read_ops.Stats(0, {s.value: 0 for s in JobStatus}, dict.fromkeys(queues, 0))
    summary = board.summary or live.Summary(0, 0, 0, 0)
    broker = board.broker or live.BrokerStatus(False, {})
    queued = board.queued or Page[JobView]([], 0, 1, DASHBOARD_QUEUED_PER_PAGE)
    return {
        "stats": as_dict(stats),
        "queues": [queue_dict(state, tz, with_tasks=False) for state in board.queues],
        "summary": as_dict(summary),
        "broker": as_dict(broker),
        "active": [item.rest_item(tz) for item in board.active],
        "queued": page_dict(queued, tz),
        "history": [item.rest_item(tz) for item in board.history],
        "errors": dict(board.errors),
    }


@read_route
async def dashboard_route(request: Request, services: Services) -> Response:
    board = await live.dashboard(services)
    return success(MSG_DASHBOARD, dashboard_dict(board, services.settings.queues, services.settings.tz))


@lookup_route
async def job_route(request: Request, services: Services) -> Response:
    view = await read_ops.get_job(services.db, job_id_of(request))
    return success(MSG_JOB, view.rest_item(services.settings.tz))
