"""The job row is declared once (JobView) and every rendering derived from it says the same."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

from starlette.routing import Route

from worker_automation.resolvers import job_views
from worker_automation.resolvers.job_views import JobView, display_name_of, rest_items_of, view_of, views_of
from worker_automation.rest_compat.api_table import OPERATIONS, WA
from worker_automation.rest_compat.documented_routes import documented_routes
from worker_automation.rest_compat.openapi import openapi_document
from worker_automation.schema.types import Job, jobs_of_rows
from worker_automation.settings import Settings

SAO_PAULO = ZoneInfo("America/Sao_Paulo")
T0 = datetime(2026, 7, 8, 12, 15, tzinfo=UTC)
VALUES: dict[str, Any] = {
    "id": 812,
    "task_id": "a3f8c1e2",
    "cliente_id": 1024,
    "usuario_id": 42,
    "path_file": None,
    "status": "EXECUTANDO",
    "data_inicio": T0,
    "data_fim": None,
    "mensagem_erro": None,
    "automation_type": "demo.sleep",
    "queue": "scan",
    "priority": 3,
    "retry_count": 1,
    "progress": 45,
    "metadata_json": {"progress_message": "meio"},
    "display_name": display_name_of("demo.sleep"),
    "client_name": "Comercio de Alimentos Ltda",
    "context": {"seconds": 2},
    "result": None,
    "created_at": T0,
    "updated_at": T0,
    "machine_id": 7,
}
# The documented REST item, in the documented order; then what the full job adds.
ITEM = (
    "id", "task_id", "cliente_id", "usuario_id", "path_file", "status", "data_inicio", "data_fim",
    "mensagem_erro", "automation_type", "queue", "priority", "retry_count", "progress", "metadata_json",
    "display_name", "client_name",
)  # fmt: skip
DETAILS = ("context", "result", "created_at", "updated_at", "machine_id")


def a_row() -> tuple[Any, ...]:
    """A row of enriched_select: the columns, then the client's name."""
    return (*(VALUES[name] for name in job_views.ROW_FIELDS), VALUES["client_name"])


def test_the_declaration_orders_the_item_then_the_details() -> None:
    assert job_views.ITEM_FIELDS == ITEM
    assert job_views.DETAIL_FIELDS == DETAILS
    assert job_views.FIELDS == ITEM + DETAILS
    assert "display_name" not in job_views.ROW_FIELDS and "client_name" not in job_views.ROW_FIELDS
    assert job_views.INSTANT_FIELDS == ("data_inicio", "data_fim", "created_at", "updated_at")


def test_the_rest_item_and_the_event_dict_keep_the_documented_keys_in_order() -> None:
    view = JobView(**VALUES)
    item = view.rest_item(SAO_PAULO)
    assert tuple(item) == ITEM
    assert item["data_inicio"] == "2026-07-08T09:15:00-03:00" and item["data_fim"] is None
    event = view.as_dict(SAO_PAULO)
    assert tuple(event) == ITEM + DETAILS
    assert event["created_at"] == "2026-07-08T09:15:00-03:00"
    assert rest_items_of([a_row()], SAO_PAULO) == [item]


def test_a_view_is_the_same_from_a_row_or_from_an_entity() -> None:
    entity: Any = SimpleNamespace(**VALUES)
    from_row = views_of([a_row()])
    assert from_row == [view_of(entity, VALUES["client_name"])] == [JobView(**VALUES)]


def test_every_builder_of_a_worker_makes_the_worker_its_own_init_makes() -> None:
    view = JobView(**VALUES)
    built = Job.from_view(view, SAO_PAULO)
    worker: Any = Job
    fields = {f.name: getattr(built, f.name) for f in dataclasses.fields(worker) if f.init}
    assert Job(**fields) == built
    assert Job.from_dict(view.as_dict(SAO_PAULO)) == built
    assert jobs_of_rows([a_row()], SAO_PAULO) == [built]


def test_a_worker_from_a_partial_dict_fills_what_cannot_be_null() -> None:
    shown = Job.from_dict({"id": 3, "automation_type": "demo.echo", "queue": "scan", "status": "AGENDADO"})
    values = vars(shown)
    assert [values[name] for name in ("id", "priority", "progress", "display_name")] == [3, 0, 0, "demo.echo"]
    assert values["task_id"] is None and values["created_at"] == ""


def test_the_openapi_item_lists_every_field_of_the_declaration() -> None:
    schemas = openapi_document(Settings())["components"]["schemas"]
    item = schemas["WorkerItem"]
    assert item["required"] == list(ITEM) == list(item["properties"])
    assert item["properties"]["priority"] == {"type": "integer", "minimum": 0, "maximum": 9}
    assert list(schemas["Job"]["allOf"][1]["properties"]) == list(DETAILS)


def test_each_operation_of_the_table_is_served_by_its_handler() -> None:
    routes = [r for r in documented_routes() if isinstance(r, Route)]
    served = {(r.path, method) for r in routes for method in r.methods or () if method != "HEAD"}
    assert served == {(op.path, op.method) for op in OPERATIONS} | {(WA, "GET")}
    handlers = {(r.path, method): r.endpoint for r in routes for method in r.methods or ()}
    for op in OPERATIONS:
        if op.path != f"{WA}/{{worker_id}}":  # (that one is wrapped: a literal segment is no id)
            assert handlers[(op.path, op.method)] is op.handler, op.operation_id
