"""The worker protocol over REST: trigger a job, and let machines claim, run and report it."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from worker_automation.domain.errors import BadInput, Unavailable
from worker_automation.domain.limits import INT32_MAX, check_text
from worker_automation.domain.ranges import check_range
from worker_automation.resolvers import claims, lost_runs
from worker_automation.resolvers.auth import SCOPE_WRITE
from worker_automation.resolvers.automations import registered
from worker_automation.resolvers.dispatch import JobRequest, Recorded, dispatch_keyed, dispatch_many_keyed
from worker_automation.resolvers.dispatch_keys import FIELD as KEY_FIELD
from worker_automation.resolvers.visibility import job_for_machine
from worker_automation.rest_compat.http import (
    error,
    guarded,
    int_param,
    json_body,
    key_first,
    machine_key_of,
    machine_of,
    principal_of,
    success,
    text_param,
)

MSG_CREATED = "Job criado com sucesso"
MSG_PENDING = "Jobs pendentes recuperados com sucesso"
MSG_STARTED = "Job reivindicado com sucesso"
MSG_PROGRESS = "Progresso registrado"
MSG_COMPLETED = "Job concluido com sucesso"
MSG_FAILED = "Falha registrada"
MSG_LOST = "Execucao perdida registrada"


def batch_message(created: int) -> str:
    return f"{created} job(s) criado(s) com sucesso"


# Most pending jobs one request lists (the OpenAPI document says the same).
MAX_PENDING = 500


def _job_id(request: Request) -> int:
    value = int_param(request.path_params["job_id"], "job_id", minimum=1, maximum=INT32_MAX)
    assert value is not None
    return value


# What a trigger reads from its body (and each job of a batch).
JOB_FIELDS = ("automation_type", "cliente_id", "context", "priority", "usuario_id", KEY_FIELD)
# The header a single trigger may carry its idempotency key in instead of the body.
KEY_HEADER = "idempotency-key"
# Set on an answer that is the job a key made before, not a new one.
REPLAYED_HEADER = "Idempotent-Replayed"


def _text(body: dict[str, Any], name: str) -> str | None:
    """The body's optional text field ``name``."""
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise BadInput(name, f"{name} deve ser texto")
    return value


def _task_id(body: dict[str, Any]) -> str | None:
    """The run a worker's request is about (optional), text a database can compare."""
    task_id = _text(body, "task_id")
    return None if task_id is None else check_text(task_id, "task_id")


def _job_request(body: dict[str, Any], key: str | None = None) -> JobRequest:
    sent = body.get(KEY_FIELD)
    if key is not None and sent is not None and sent != key:
        raise BadInput(KEY_FIELD, f"{KEY_FIELD} difere do cabecalho Idempotency-Key")
    return JobRequest(
        body.get("automation_type"),
        body.get("cliente_id"),
        body.get("context", {}),
        body.get("priority", 0),
        body.get("usuario_id"),
        sent if sent is not None else key,
    )


def _answer(message: str, data: Any, recorded: Recorded) -> Response:
    """201 when the request made a job; 200 and ``Idempotent-Replayed: true`` when every job
    is one its key made before."""
    if any(recorded.fresh):
        return success(message, data, 201)
    response = success(message, data, 200)
    response.headers[REPLAYED_HEADER] = "true"
    return response


@guarded
async def create_job(request: Request) -> Response:
    """Trigger an automation: the context is validated against its form. Sent again with the
    same idempotency key (``Idempotency-Key`` header or ``idempotency_key``), the job the first
    request made."""
    services, principal = await principal_of(request, SCOPE_WRITE)
    key = request.headers.get(KEY_HEADER)
    job = _job_request(await json_body(request, checked=JOB_FIELDS), key)
    try:
        recorded = await dispatch_keyed(services, principal.actor, job)
    except Unavailable as exc:
        return error(exc.message, 503, {"id": exc.details.get("worker_id")})
    (view,) = recorded.views
    return _answer(MSG_CREATED, view.as_dict(services.settings.tz), recorded)


@guarded
async def create_jobs(request: Request) -> Response:
    """Trigger a batch (``{"jobs": [{automation_type, cliente_id, context, priority,
    idempotency_key}, ...]}``): every job is created, or none when one is invalid; a job whose
    key was sent before is the one it made."""
    services, principal = await principal_of(request, SCOPE_WRITE)
    items = (await json_body(request)).get("jobs")
    if not isinstance(items, list):
        raise BadInput("jobs", "jobs deve ser uma lista de jobs")
    requests: list[JobRequest] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadInput(f"jobs[{index}]", "cada job deve ser um objeto JSON")
        requests.append(_job_request(item))
    try:
        recorded = await dispatch_many_keyed(services, principal.actor, requests)
    except Unavailable as exc:
        return error(exc.message, 503, {"ids": exc.details.get("worker_ids")})
    tz = services.settings.tz
    return _answer(batch_message(len(recorded.made)), [v.as_dict(tz) for v in recorded.views], recorded)


@guarded
async def pending(request: Request) -> Response:
    services, machine = await machine_of(request)
    limit = int_param(request.query_params.get("limit"), "limit", default=100)
    assert limit is not None
    check_range(limit, "limit", 1, MAX_PENDING)
    automation = text_param(request.query_params.get("automation"), "automation")
    if automation is not None:
        registered(automation, "automation")  # an unknown one is a 422, not an empty list
    jobs = await claims.pending_jobs(services, machine, automation, limit)
    tz = services.settings.tz
    data = [job_for_machine(machine, j.as_dict(tz)) for j in jobs]
    return success(MSG_PENDING, data)


@guarded
async def claim(request: Request) -> Response:
    services, machine = await machine_key_of(request)
    async with key_first(services, machine):
        job_id = _job_id(request)
        body = await json_body(request, required=False, checked=("task_id",))
        view = await claims.claim(services, machine, job_id, _task_id(body))
        # The run's time limit (None: none) beside the job: a machine stops the run on its own
        # clock when it passes it.
        timeout = (await services.time_limits.current(services.db)).get(view.automation_type)
        return success(MSG_STARTED, {**view.as_dict(services.settings.tz), "timeout_seconds": timeout})


@guarded
async def progress(request: Request) -> Response:
    services, machine = await machine_of(request)
    job_id = _job_id(request)
    body = await json_body(request, checked=("progress", "message"))
    if "progress" not in body:
        raise BadInput("progress", "progress e obrigatorio")
    message = _text(body, "message")
    view = await claims.report_progress(services, machine, job_id, body["progress"], message)
    return success(MSG_PROGRESS, view.as_dict(services.settings.tz))


@guarded
async def complete(request: Request) -> Response:
    services, machine = await machine_key_of(request)
    async with key_first(services, machine):
        job_id = _job_id(request)
        # The result is the operation's to judge: one it cannot store ends the job FALHA.
        body: dict[str, Any] = await json_body(request, required=False, checked=("task_id",))
        view = await claims.complete(services, machine, job_id, body.get("result"), _task_id(body))
        return success(MSG_COMPLETED, view.as_dict(services.settings.tz))


@guarded
async def fail(request: Request) -> Response:
    services, machine = await machine_key_of(request)
    async with key_first(services, machine):
        job_id = _job_id(request)
        body = await json_body(request, checked=("error", "exc_type", "traceback"))
        exc_type, traceback = _text(body, "exc_type"), _text(body, "traceback")
        view = await claims.fail(
            services, machine, job_id, body.get("error"), exc_type, traceback, _task_id(body)
        )
        return success(MSG_FAILED, view.as_dict(services.settings.tz))


@guarded
async def lost(request: Request) -> Response:
    """A worker's start-up report of a run it held when its process died (``{"fault":
    "worker_lost", "task_id": ...}``): the job is queued again or failed, as recovery decides."""
    services, machine = await machine_of(request)
    job_id = _job_id(request)
    body = await json_body(request, checked=("fault", "task_id"))
    view = await lost_runs.recover_lost(services, machine, job_id, body.get("fault"), _task_id(body))
    return success(MSG_LOST, view.as_dict(services.settings.tz))
