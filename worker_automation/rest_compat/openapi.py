"""The OpenAPI 3.0 document of the REST API, built from the operation table in
:mod:`worker_automation.rest_compat.api_table` and served at ``GET /api/v1/openapi.json``.

Enumerations that depend on configuration (the queues) are filled from the running settings, so
the document always describes the service that serves it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.domain.limits import INT32_MAX
from worker_automation.domain.ranges import PRIORITY_MAX, PRIORITY_MIN, PROGRESS_MAX, PROGRESS_MIN
from worker_automation.domain.vocabulary import REPORTED_FAULTS
from worker_automation.models import JobStatus
from worker_automation.resolvers.dispatch import MAX_BATCH
from worker_automation.rest_compat.api_table import IDEMPOTENCY_KEY, NO_NUL, OPERATIONS, Operation, Param
from worker_automation.rest_compat.jobs import REPLAYED_HEADER
from worker_automation.rest_compat.schemas import job_schemas, shape_schemas
from worker_automation.settings import Settings

OPENAPI_PATH = "/api/v1/openapi.json"

_STATUS_CODES: dict[int, str] = {
    400: "Requisicao invalida",
    401: "API Key ausente, invalida ou revogada",
    403: "Sem o escopo ou o perfil exigido",
    404: "Nao encontrado",
    409: "Operacao ilegal no estado atual; nada foi alterado",
    408: "O corpo da requisicao nao chegou a tempo (WA_BODY_READ_TIMEOUT_SECONDS)",
    413: "Corpo da requisicao maior que WA_MAX_BODY_BYTES",
    422: "Parametro ou corpo invalido; data.field nomeia o campo",
    503: "Broker (Redis) indisponivel",
}
_SECURITY: dict[str, list[dict[str, list[str]]]] = {
    "operator": [{"ApiKeyHeader": []}, {"BearerKey": []}],
    "machine": [{"WorkerApiKey": []}],
}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


def _obj(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


def _int(minimum: int | None = None, maximum: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


_STR: dict[str, Any] = {"type": "string"}
# Text a caller sends: no NUL character (refused with 422 naming the field).
_IN: dict[str, Any] = {"type": "string", "pattern": NO_NUL}
# What Python's ``str.strip()`` takes for blank (``str.isspace``), spelt out: ``\s`` differs
# between regex dialects, and a blank ``error`` is refused.
_SPACE = (
    "\\t\\n\\u000b\\u000c\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a"
    "\\u2028\\u2029\\u202f\\u205f\\u3000"
)
# Text with something other than blanks in it, and no NUL.
_NOT_BLANK: dict[str, Any] = {"type": "string", "pattern": f"^[^\\u0000]*[^\\u0000{_SPACE}][^\\u0000]*$"}


def _schemas(queues: list[str]) -> dict[str, Any]:
    queue_enum = {"type": "string", "enum": queues}
    item = _ref("WorkerItem")
    search_item = _obj(
        ["key", "display_name", "category", "queue", "requires_selenium"],
        key=_STR,
        display_name=_STR,
        category=_STR,
        queue=_STR,
        requires_selenium={"type": "boolean"},
        score=_int(0, 100),
    )
    return {
        "ErrorEnvelope": _obj(
            ["status", "message", "data"],
            status={"type": "string", "enum": ["error"]},
            message=_STR,
            data={"type": "object", "nullable": True, "description": "field: o campo invalido (422)"},
        ),
        **job_schemas(),
        "WorkerPage": _obj(
            ["items", "total", "page", "per_page", "pages"],
            items={"type": "array", "items": item},
            total=_int(0),
            page=_int(1),
            per_page=_int(1, 100),
            pages=_int(0),
        ),
        **shape_schemas(
            "Stats", "Summary", "QueueLoad", "QueueLive", "QueueLiveStatus", "BrokerStatus", "WorkersInspect"
        ),
        "TaskStatus": _obj(
            ["task_id", "status", "state", "result"],
            task_id=_STR,
            status={**_STR, "description": "Estado Celery: PENDING, STARTED, SUCCESS, FAILURE, REVOKED..."},
            state=_STR,
            result={"type": "object", "nullable": True},
            worker_id=_int(1),
            progress=_int(PROGRESS_MIN, PROGRESS_MAX),
        ),
        "Dashboard": _obj(
            ["stats", "queues", "summary", "broker", "active", "queued", "history", "errors"],
            stats=_ref("Stats"),
            queues={"type": "array", "items": _ref("QueueLoad")},
            summary=_ref("Summary"),
            broker=_ref("BrokerStatus"),
            active={"type": "array", "items": item},
            queued=_ref("WorkerPage"),
            history={"type": "array", "items": item},
            errors={"type": "object", "additionalProperties": _STR, "description": "secao -> motivo"},
        ),
        "SearchResult": _obj(
            ["results"],
            results={"type": "array", "items": search_item},
            by_category={"type": "object", "additionalProperties": {"type": "array", "items": search_item}},
            total=_int(0),
        ),
        **shape_schemas("ClearResult", "PurgeResult", "CleanupResult", "SyncResult"),
        "MoveBody": _obj(["target_queue"], target_queue=queue_enum),
        "ReorderBody": _obj(["new_priority"], new_priority=_int(PRIORITY_MIN, PRIORITY_MAX)),
        "DispatchBody": _obj(
            ["automation_type"],
            automation_type={"type": "string", "enum": sorted(AUTOMATION_REGISTRY)},
            cliente_id=_nullable(_int(1, INT32_MAX)),
            context=_nullable(
                {"type": "object", "description": "Validado contra o formulario da automacao (null: vazio)"}
            ),
            priority={**_int(PRIORITY_MIN, PRIORITY_MAX), "default": PRIORITY_MIN},
            idempotency_key=_nullable(IDEMPOTENCY_KEY.schema),
        ),
        "DispatchBatchBody": _obj(
            ["jobs"],
            jobs={"type": "array", "minItems": 1, "maxItems": MAX_BATCH, "items": _ref("DispatchBody")},
        ),
        "StartBody": {"type": "object", "properties": {"task_id": _IN}},
        "ProgressBody": _obj(["progress"], progress=_int(PROGRESS_MIN, PROGRESS_MAX), message=_IN),
        "CompleteBody": {
            "type": "object",
            "properties": {
                "result": {"description": "Valor devolvido"},
                "task_id": {**_IN, "description": "A execucao relatada (recusa 409 stale_task se outra)"},
            },
        },
        "FailBody": _obj(["error"], error=_NOT_BLANK, exc_type=_IN, traceback=_IN, task_id=_IN),
        "LostBody": _obj(["fault"], fault={"type": "string", "enum": sorted(REPORTED_FAULTS)}, task_id=_IN),
    }


def _param_schema(param: Param, queues: list[str]) -> dict[str, Any]:
    schema = dict(param.schema)
    if param.enum == "queue":
        schema["enum"] = queues
    elif param.enum == "status":
        schema["enum"] = [s.value for s in JobStatus]
    elif param.enum == "automation":
        schema["enum"] = sorted(AUTOMATION_REGISTRY)
    return schema


def _parameter(op: Operation, param: Param, queues: list[str]) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": param.name,
        "in": param.location,
        "required": param.location == "path" or param.required,
        "description": param.description,
        "schema": _param_schema(param, queues),
    }
    if op.method == "GET" and param.location == "query" and not param.required:
        # A read's filter left empty (``?queue=``) is no filter, as the seed's routes read it.
        document["allowEmptyValue"] = True
    return document


def _operation(op: Operation, queues: list[str]) -> dict[str, Any]:
    envelope = _obj(
        ["status", "message", "data"],
        status={"type": "string", "enum": ["success"]},
        message={**_STR, "example": op.message} if op.message else _STR,
        data=op.data,
    )
    responses: dict[str, Any] = {
        str(op.success_code): {
            "description": op.message or op.summary,
            "content": {"application/json": {"schema": envelope}},
        }
    }
    if op.replays:
        responses["200"] = {
            "description": "O mesmo pedido com a mesma idempotency key: o que ela criou antes",
            "headers": {REPLAYED_HEADER: {"schema": {"type": "string", "enum": ["true"]}}},
            "content": {"application/json": {"schema": envelope}},
        }
    body_errors = (408, 413) if op.body is not None else ()
    for code in sorted({401, 403, 422, *op.errors, *body_errors}):
        responses[str(code)] = {
            "description": _STATUS_CODES[code],
            "content": {"application/json": {"schema": _ref("ErrorEnvelope")}},
        }
    document: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "tags": [op.tag],
        "security": _SECURITY[op.auth],
        "parameters": [_parameter(op, p, queues) for p in op.params],
        "responses": responses,
    }
    if op.description:
        document["description"] = op.description
    if op.scope:
        document["x-required-scope"] = op.scope
    if op.manager:
        document["x-required-perfil"] = ["administrador", "diretoria"]
    if op.body:
        document["requestBody"] = {
            "required": op.body_required,
            "content": {"application/json": {"schema": _ref(op.body)}},
        }
    return document


@lru_cache(maxsize=8)
def _document(queues: tuple[str, ...]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, list(queues))
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Worker Automation",
            "version": "1.0.0",
            "description": "Gestao de tasks Celery e workers da plataforma Alcance, e o protocolo dos "
            "workers. Toda resposta segue o envelope {status, message, data}.",
        },
        "paths": paths,
        "components": {
            "schemas": _schemas(list(queues)),
            "securitySchemes": {
                "ApiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "BearerKey": {"type": "http", "scheme": "bearer", "description": "A mesma API Key"},
                "WorkerApiKey": {"type": "apiKey", "in": "header", "name": "X-Worker-Api-Key"},
            },
        },
    }


def openapi_document(settings: Settings) -> dict[str, Any]:
    """The document for a service running with ``settings``."""
    return _document(tuple(settings.queues))


async def openapi_endpoint(request: Request) -> Response:
    return JSONResponse(openapi_document(request.app.state.settings))


def openapi_routes() -> list[BaseRoute]:
    return [Route(OPENAPI_PATH, openapi_endpoint, methods=["GET"], name="openapi")]
