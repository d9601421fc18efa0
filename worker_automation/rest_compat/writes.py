"""Write routes of ``/api/v1/worker-automation``: operator actions and destructive maintenance.

Permissions are checked before any parameter is read, so a caller without rights learns nothing
about its input; the resolvers validate, apply the state rules and write the audit trail.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from worker_automation.domain.errors import BadInput
from worker_automation.domain.shapes import as_dict
from worker_automation.resolvers import job_actions, maintenance
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.auth import SCOPE_WRITE
from worker_automation.resolvers.job_views import JobView
from worker_automation.resolvers.services import Services
from worker_automation.rest_compat.http import (
    bool_param,
    guarded,
    json_body,
    principal_of,
    success,
    text_param,
)
from worker_automation.rest_compat.reads import job_id_of
from worker_automation.rest_compat.schemas import REST_FIELDS

MSG_CANCEL = "Task cancelada com sucesso"
MSG_RETRY = "Task re-enfileirada com sucesso"
MSG_MOVE = "Worker migrado de fila com sucesso"
MSG_REORDER = "Prioridade alterada com sucesso"


@guarded
async def cancel_route(request: Request) -> Response:
    services, principal = await principal_of(request, SCOPE_WRITE)
    view = await job_actions.cancel(services, principal.actor, job_id_of(request))
    return success(MSG_CANCEL, view.rest_item(services.settings.tz))


@guarded
async def retry_route(request: Request) -> Response:
    services, principal = await principal_of(request, SCOPE_WRITE)
    view = await job_actions.retry(services, principal.actor, job_id_of(request))
    return success(MSG_RETRY, view.rest_item(services.settings.tz))


async def _change(
    request: Request,
    name: str,
    change: Callable[[Services, Actor, int, Any], Awaitable[JobView]],
    message: str,
) -> Response:
    """Apply ``change`` to the job with the body's one field ``name`` (required, not null)."""
    services, principal = await principal_of(request, SCOPE_WRITE)
    job_id = job_id_of(request)
    body = await json_body(request, checked=(name,))
    if body.get(name) is None:
        raise BadInput(name, f"{name} e obrigatorio")
    view = await change(services, principal.actor, job_id, body[name])
    return success(message, view.rest_item(services.settings.tz))


@guarded
async def move_route(request: Request) -> Response:
    return await _change(request, "target_queue", job_actions.move, MSG_MOVE)


@guarded
async def reorder_route(request: Request) -> Response:
    return await _change(request, "new_priority", job_actions.reorder, MSG_REORDER)


@guarded
async def clear_queue_route(request: Request) -> Response:
    services, principal = await principal_of(request, SCOPE_WRITE, manager=True)
    query = request.query_params
    for name in ("scope", "queue"):
        given = query.get(name)
        if given is not None and not given.strip():
            # Present but empty is a mistake, not "everything": this call cancels jobs.
            raise BadInput(name, f"{name} nao pode ser vazio (omita-o para todos)")
    scope = text_param(query.get("scope"), "scope")
    queue = text_param(query.get("queue"), "queue")
    result = await maintenance.clear_queue(services, principal.actor, scope, queue)
    return success(result.message, as_dict(result, REST_FIELDS["ClearResult"]))


@guarded
async def purge_queue_route(request: Request) -> Response:
    services, principal = await principal_of(request, SCOPE_WRITE, manager=True)
    queue_name = text_param(request.path_params["queue_name"], "queue_name") or ""
    confirm = bool_param(request.query_params.get("confirm"), "confirm")
    result = await maintenance.purge_queue(services, principal.actor, queue_name, confirm)
    return success(result.message, as_dict(result, REST_FIELDS["PurgeResult"]))


@guarded
async def cleanup_no_client_route(request: Request) -> Response:
    services, principal = await principal_of(request, SCOPE_WRITE, manager=True)
    result = await maintenance.cleanup_no_client(services, principal.actor)
    return success(result.message, as_dict(result, REST_FIELDS["CleanupResult"]))


@guarded
async def sync_orphans_route(request: Request) -> Response:
    services, principal = await principal_of(request, SCOPE_WRITE, manager=True)
    result = await maintenance.sync_orphans(services, principal.actor)
    return success(result.message, as_dict(result, REST_FIELDS["SyncResult"]))
