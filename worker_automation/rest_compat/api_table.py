"""The table of REST operations: one entry per route, with the handler that answers it, its
parameters, body, permissions, success message and the schema of its ``data``. The app's routes
(:mod:`worker_automation.rest_compat.documented_routes`) and the OpenAPI document
(:mod:`worker_automation.rest_compat.openapi`) are both built from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from worker_automation.domain.limits import INT32_MAX, INT32_MIN
from worker_automation.domain.ranges import PROGRESS_RANGE
from worker_automation.domain.vocabulary import Refusal
from worker_automation.resolvers.maintenance import (
    CleanupResult,
    ClearResult,
    ClearScope,
    PurgeResult,
    SyncResult,
)
from worker_automation.rest_compat import jobs, reads, writes
from worker_automation.rest_compat.http import Handler
from worker_automation.rest_compat.jobs import (
    MAX_PENDING,
    MSG_COMPLETED,
    MSG_CREATED,
    MSG_FAILED,
    MSG_LOST,
    MSG_PENDING,
    MSG_PROGRESS,
    MSG_STARTED,
    batch_message,
)
from worker_automation.rest_compat.reads import (
    MSG_ACTIVE,
    MSG_BROKER,
    MSG_DASHBOARD,
    MSG_INSPECT,
    MSG_JOB,
    MSG_LIST,
    MSG_QUEUE_LIVE,
    MSG_QUEUED,
    MSG_STATS,
    MSG_TASK_STATUS,
    search_message,
)
from worker_automation.rest_compat.writes import MSG_CANCEL, MSG_MOVE, MSG_REORDER, MSG_RETRY

WA = "/api/v1/worker-automation"
JOBS = "/api/v1/jobs"
READ = "worker_automation:read"
WRITE = "worker_automation:write"


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def array_of(name: str) -> dict[str, Any]:
    return {"type": "array", "items": ref(name)}


@dataclass(frozen=True)
class Param:
    """A path, query or header parameter; ``enum`` names a list filled in when the document is
    built."""

    name: str
    location: Literal["path", "query", "header"]
    schema: dict[str, Any]
    description: str = ""
    required: bool = False
    enum: Literal["queue", "status", "automation"] | None = None


@dataclass(frozen=True)
class Operation:
    """One documented route, and the handler that answers it."""

    method: str
    path: str
    operation_id: str
    summary: str
    tag: str
    data: dict[str, Any]
    message: str = ""
    scope: str | None = READ
    manager: bool = False
    auth: Literal["operator", "machine"] = "operator"
    params: tuple[Param, ...] = ()
    body: str | None = None
    body_required: bool = True
    errors: tuple[int, ...] = ()
    success_code: int = 200
    description: str = ""
    # Answers 200 with ``Idempotent-Replayed: true`` when an idempotency key finds what it made.
    replays: bool = False
    handler: Handler = field(kw_only=True)


_INT: dict[str, Any] = {"type": "integer"}
# Text sent by callers: no NUL character (no database stores it; the API answers 422).
NO_NUL = "^[^\\u0000]*$"
_TEXT: dict[str, Any] = {"type": "string", "maxLength": 255, "pattern": NO_NUL}
WORKER_ID = Param("worker_id", "path", {"type": "integer", "minimum": 1, "maximum": INT32_MAX}, "ID interno")
JOB_ID = Param("job_id", "path", {"type": "integer", "minimum": 1, "maximum": INT32_MAX}, "ID do job")
PAGE = Param("page", "query", {"type": "integer", "minimum": 1, "maximum": INT32_MAX, "default": 1}, "Pagina")


def per_page(default: int) -> Param:
    schema = {"type": "integer", "minimum": 1, "maximum": 100, "default": default}
    return Param("per_page", "query", schema, "Itens por pagina (1 a 100)")


QUEUE = Param("queue", "query", {"type": "string"}, "Fila", enum="queue")
ID32: dict[str, Any] = {"type": "integer", "minimum": INT32_MIN, "maximum": INT32_MAX}


def _wa(
    method: str, path: str, op_id: str, data: dict[str, Any], message: str, summary: str, **kw: Any
) -> Operation:
    tag = kw.pop("tag", "worker-automation")
    return Operation(method, f"{WA}{path}", op_id, summary, tag, data, message, **kw)


def _maintenance(
    method: str, path: str, op_id: str, data: str, message: str, summary: str, **kw: Any
) -> Operation:
    return _wa(
        method,
        path,
        op_id,
        ref(data),
        message,
        summary,
        tag="maintenance",
        scope=WRITE,
        manager=True,
        errors=(503,),
        **kw,
    )


def _action(
    path: str, op_id: str, message: str, summary: str, handler: Handler, body: str | None = None
) -> Operation:
    return _wa(
        "POST",
        path,
        op_id,
        ref("WorkerItem"),
        message,
        summary,
        tag="operations",
        scope=WRITE,
        params=(WORKER_ID,),
        body=body,
        errors=(404, 409, 503),
        handler=handler,
    )


def _job(method: str, path: str, op_id: str, message: str, summary: str, **kw: Any) -> Operation:
    kw.setdefault("params", (JOB_ID,))
    kw.setdefault("errors", (404, 409))
    data = kw.pop("data", ref("Job"))
    return Operation(
        method, f"{JOBS}{path}", op_id, summary, "jobs", data, message, None, auth="machine", **kw
    )


LIST_PARAMS = (
    Param("status", "query", {"type": "string"}, "Status do worker", enum="status"),
    QUEUE,
    Param("automation_type", "query", {"type": "string"}, "Chave da automacao", enum="automation"),
    Param("cliente_id", "query", ID32, "ID do cliente"),
    Param("usuario_id", "query", ID32, "ID do usuario"),
    Param("task_id", "query", _TEXT, "Task id Celery"),
    Param("q", "query", _TEXT, "Busca livre: automacao, cliente, erro, task id"),
    PAGE,
    per_page(20),
)
SCOPE = Param("scope", "query", {"type": "string", "enum": ["all", "queued", "running"], "default": "all"})
PURGE_PARAMS = (
    Param("queue_name", "path", {"type": "string"}, "Fila", enum="queue"),
    Param("confirm", "query", {"type": "boolean", "enum": [True]}, "Precisa ser true", required=True),
)
PENDING_PARAMS = (
    Param("automation", "query", {"type": "string"}, "Automacao (padrao: a da maquina)", enum="automation"),
    Param(
        "limit", "query", {"type": "integer", "minimum": 1, "maximum": MAX_PENDING, "default": 100}, "Maximo"
    ),
)
REFUSALS = ", ".join(reason.value for reason in Refusal)

# fmt: off
_WORKER_OPS: tuple[Operation, ...] = (
    _wa("GET", "/", "listWorkers", ref("WorkerPage"), MSG_LIST, "Lista paginada de workers",
        params=LIST_PARAMS, handler=reads.list_route),
    _wa("GET", "/stats", "getStats", ref("Stats"), MSG_STATS, "Totais por status e por fila",
        handler=reads.stats_route),
    _wa("GET", "/active", "listActive", array_of("WorkerItem"), MSG_ACTIVE, "Workers EXECUTANDO",
        handler=reads.active_route),
    _wa("GET", "/queued", "listQueued", ref("WorkerPage"), MSG_QUEUED, "Workers AGENDADO, prioridade e idade",
        params=(PAGE, per_page(10), QUEUE), handler=reads.queued_route),
    _wa("GET", "/search-automations", "searchAutomations", ref("SearchResult"),
        search_message(2), "Busca fuzzy no catalogo de automacoes",
        params=(Param("q", "query", _TEXT, "Termo de busca"),),
        description="Com q: score >= 60, do mais relevante ao menos. Sem q: o catalogo, por categoria.",
        handler=reads.search_route),
    _wa("GET", "/queue-live-status", "queueLiveStatus", ref("QueueLiveStatus"), MSG_QUEUE_LIVE,
        "Estado de cada fila agora", handler=reads.queue_live_route),
    _wa("GET", "/broker-status", "brokerStatus", ref("BrokerStatus"), MSG_BROKER, "LLEN de cada fila",
        handler=reads.broker_status_route),
    _wa("GET", "/workers-inspect", "workersInspect", ref("WorkersInspect"), MSG_INSPECT, "Inspect do Celery",
        handler=reads.workers_inspect_route),
    _wa("GET", "/status/{task_id}", "taskStatus", ref("TaskStatus"), MSG_TASK_STATUS, "Estado de uma task",
        params=(Param("task_id", "path", _TEXT, "Task id (UUID)"),), errors=(404,),
        handler=reads.task_status_route),
    _wa("GET", "/dashboard", "dashboard", ref("Dashboard"), MSG_DASHBOARD, "Dashboard agregado",
        description="Secoes isoladas: uma secao que falha vem vazia e nomeada em errors.",
        handler=reads.dashboard_route),
    _maintenance("POST", "/clear-queue", "clearQueue", "ClearResult",
                 ClearResult(18, ClearScope.ALL, None).message, "Cancela em massa", params=(SCOPE, QUEUE),
                 handler=writes.clear_queue_route),
    _maintenance("POST", "/broker/purge-queue/{queue_name}", "purgeQueue", "PurgeResult",
                 PurgeResult("scraping", 0).message, "Apaga a fila no broker", params=PURGE_PARAMS,
                 handler=writes.purge_queue_route),
    _maintenance("DELETE", "/cleanup-no-client", "cleanupNoClient", "CleanupResult",
                 CleanupResult(3).message, "Remove workers abertos sem cliente",
                 handler=writes.cleanup_no_client_route),
    _maintenance("POST", "/sync-orphans", "syncOrphans", "SyncResult",
                 SyncResult(2, 2).message, "Cancela workers que perderam a task",
                 handler=writes.sync_orphans_route),
    _wa("GET", "/{worker_id}", "getWorker", ref("WorkerItem"), MSG_JOB, "Detalhe de um worker",
        params=(WORKER_ID,), errors=(404,), handler=reads.job_route),
    _action("/{worker_id}/cancel", "cancelWorker", MSG_CANCEL, "Revoga a task e marca CANCELADO",
            writes.cancel_route),
    _action("/{worker_id}/retry", "retryWorker", MSG_RETRY, "Re-enfileira um worker FALHA ou CANCELADO",
            writes.retry_route),
    _action("/{worker_id}/move", "moveWorker", MSG_MOVE, "Migra o worker para outra fila",
            writes.move_route, "MoveBody"),
    _action("/{worker_id}/reorder", "reorderWorker", MSG_REORDER, "Altera a prioridade",
            writes.reorder_route, "ReorderBody"),
)

KEY_RULE = (
    "Com Idempotency-Key (ou idempotency_key no corpo): repetido com o mesmo pedido, devolve 200 "
    "e Idempotent-Replayed: true com o job que o primeiro criou, sem criar outro; a mesma chave com "
    "outro pedido e 409. A chave vale enquanto o job existir."
)
IDEMPOTENCY_KEY = Param(
    "Idempotency-Key",
    "header",
    {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^\\u0000-\\u001f\\u007f]+$"},
    "Chave de idempotencia do disparo (um UUID, por exemplo)",
)

_JOB_OPS: tuple[Operation, ...] = (
    Operation("POST", JOBS, "dispatchJob", "Dispara uma automacao", "jobs", ref("Job"),
              MSG_CREATED, WRITE, params=(IDEMPOTENCY_KEY,), body="DispatchBody", success_code=201,
              errors=(409, 503), replays=True,
              description="O contexto e validado contra o formulario da automacao; publica JobCreated. "
              f"{KEY_RULE}",
              handler=jobs.create_job),
    Operation("POST", f"{JOBS}/batch", "dispatchJobs", "Dispara um lote de automacoes", "jobs",
              array_of("Job"), batch_message(3), WRITE, body="DispatchBatchBody",
              success_code=201, errors=(409, 503), replays=True,
              description="Todos os jobs ou nenhum: um job invalido e um 422 que o nomeia (jobs[i].campo). "
              "Cada job pode levar sua idempotency_key; 200 quando todos ja existiam.",
              handler=jobs.create_jobs),
    _job("GET", "/pending", "pendingJobs", MSG_PENDING,
         "Jobs que a maquina pode reivindicar", data=array_of("Job"), params=PENDING_PARAMS, errors=(),
         handler=jobs.pending),
    _job("POST", "/{job_id}/start", "startJob", MSG_STARTED, "Reivindica o job",
         body="StartBody", body_required=False, description=f"Recusa: 409 com data.reason em {REFUSALS}.",
         handler=jobs.claim),
    _job("POST", "/{job_id}/progress", "jobProgress", MSG_PROGRESS, f"Progresso {PROGRESS_RANGE}",
         body="ProgressBody", handler=jobs.progress),
    _job("POST", "/{job_id}/complete", "completeJob", MSG_COMPLETED, "Resultado (CONCLUIDO)",
         body="CompleteBody", body_required=False, handler=jobs.complete),
    _job("POST", "/{job_id}/fail", "failJob", MSG_FAILED, "Falha (FALHA)", body="FailBody",
         handler=jobs.fail),
    _job("POST", "/{job_id}/lost", "lostJob", MSG_LOST,
         "Execucao perdida (relatada na inicializacao)", body="LostBody",
         description="O job volta a fila (automacao idempotente) ou termina FALHA (worker_lost).",
         handler=jobs.lost),
)
# fmt: on

OPERATIONS: tuple[Operation, ...] = _WORKER_OPS + _JOB_OPS
