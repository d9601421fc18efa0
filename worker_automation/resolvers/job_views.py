"""What a job row looks like to callers: one view, rendered by each transport."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from sqlalchemy import ColumnElement, Select, UnaryExpression, null, select
from sqlalchemy.engine import Row

from worker_automation.models import Cliente, Job

if TYPE_CHECKING:
    from worker_automation.catalog.registry import Automation

# The label of the joined client name in the rows of enriched_select.
CLIENT_NAME = "client_name"


def iso(value: datetime | None, tz: ZoneInfo) -> str | None:
    """ISO 8601 with the offset of ``tz`` (e.g. ``2026-07-08T09:15:00-03:00``)."""
    if value is None:
        return None
    return value.astimezone(tz).isoformat(timespec="seconds")


@dataclass(frozen=True)
class JobView:
    """A job row enriched with its automation's display name and its client's name."""

    id: int
    task_id: str | None
    cliente_id: int | None
    usuario_id: int | None
    path_file: str | None
    status: str
    data_inicio: datetime | None
    data_fim: datetime | None
    mensagem_erro: str | None
    automation_type: str
    queue: str
    priority: int
    retry_count: int
    progress: int
    metadata_json: dict[str, Any] | None
    context: dict[str, Any] | None
    result: Any
    created_at: datetime
    updated_at: datetime
    machine_id: int | None
    display_name: str
    client_name: str | None

    def rest_item(self, tz: ZoneInfo) -> dict[str, Any]:
        """The documented REST item (snake_case, timestamps in ``tz``), keys in the documented order."""
        return {
            "id": self.id,
            "task_id": self.task_id,
            "cliente_id": self.cliente_id,
            "usuario_id": self.usuario_id,
            "path_file": self.path_file,
            "status": self.status,
            "data_inicio": iso(self.data_inicio, tz),
            "data_fim": iso(self.data_fim, tz),
            "mensagem_erro": self.mensagem_erro,
            "automation_type": self.automation_type,
            "queue": self.queue,
            "priority": self.priority,
            "retry_count": self.retry_count,
            "progress": self.progress,
            "metadata_json": self.metadata_json,
            "display_name": self.display_name,
            "client_name": self.client_name,
        }

    def as_dict(self, tz: ZoneInfo) -> dict[str, Any]:
        """Every field, JSON-ready: what events carry (the REST item, then the rest)."""
        data = self.rest_item(tz)
        data["context"] = self.context
        data["result"] = self.result
        data["created_at"] = iso(self.created_at, tz)
        data["updated_at"] = iso(self.updated_at, tz)
        data["machine_id"] = self.machine_id
        return data


# The fields of WorkerView read straight from the job row, in the view's order; then come the
# display name (from the registry) and the client's name (joined).
ROW_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(JobView))[:-2]
_AUTOMATION_AT = ROW_FIELDS.index("automation_type")
# The JSON documents a job was dispatched with and ended with: the largest columns of a row and
# the costliest to decode. REST list items never show them, nor a GraphQL list that does not
# select them; such lists read NULL in their place (see enriched_select).
DOCUMENT_FIELDS: tuple[str, ...] = ("context", "result")
# The fields of a REST item read straight from the row: the leading fields of ROW_FIELDS, up to
# metadata_json (then come the display name and the client's name).
_REST_ROW_FIELDS = ROW_FIELDS.index("metadata_json") + 1
_REST_ROW_KEYS = ROW_FIELDS[:_REST_ROW_FIELDS]
_DATA_INICIO_AT = ROW_FIELDS.index("data_inicio")
_DATA_FIM_AT = ROW_FIELDS.index("data_fim")


def enriched_select(*, documents: bool = True) -> Select[Any]:
    """Rows with their client's name, joined in the same query (never one query per row).

    Plain columns, not ORM objects: a view is built straight from each row (loading entities
    into the session cost more than the query itself). The columns come in the view's field
    order, so :func:`views_of` builds a view by position. Without ``documents`` the columns of
    :data:`DOCUMENT_FIELDS` are read as NULL, for callers that show neither.
    """
    columns = Job.__table__.columns

    def column(name: str) -> ColumnElement[Any]:
        if not documents and name in DOCUMENT_FIELDS:
            return null().label(name)
        return columns[name]

    return (
        select(*(column(name) for name in ROW_FIELDS), Cliente.razao_social.label(CLIENT_NAME))
        .select_from(Job)
        .outerjoin(Cliente, Cliente.id == Job.cliente_id)
    )


# The two orders jobs are listed in: running ones longest running first, queued ones in the order
# they will run (priority, 0 first, then age). Columns of both the statements and WorkerView.
RUNNING_ORDER: tuple[str, ...] = ("data_inicio", "id")
RUN_ORDER: tuple[str, ...] = ("priority", "created_at", "id")


def order_by(columns: tuple[str, ...]) -> list[UnaryExpression[Any]]:
    """``columns`` ascending, for a statement's ORDER BY."""
    return [getattr(Job, name).asc() for name in columns]


def sort_key(columns: tuple[str, ...]) -> Callable[[JobView], tuple[tuple[bool, Any], ...]]:
    """The same order for views already in memory (missing values last, as PostgreSQL does)."""

    def key(view: JobView) -> tuple[tuple[bool, Any], ...]:
        return tuple(((value := getattr(view, name)) is None, value) for name in columns)

    return key


def display_name_of(automation_type: str) -> str:
    """The registry's friendly name, or the key itself for automations no longer registered."""
    automation = _registry().get(automation_type)
    return automation.display_name if automation else automation_type


@cache
def _registry() -> Mapping[str, Automation]:
    # Imported on first use (the catalogue imports this module's neighbours), then kept: every
    # row of every list page asks.
    from worker_automation.catalog.registry import AUTOMATION_REGISTRY

    return AUTOMATION_REGISTRY


def view_of(job: Job | Row[Any], client_name: str | None) -> JobView:
    """Build the view from a loaded row (an entity or a row of its columns) and the client name."""
    return JobView(
        id=job.id,
        task_id=job.task_id,
        cliente_id=job.cliente_id,
        usuario_id=job.usuario_id,
        path_file=job.path_file,
        status=job.status,
        data_inicio=job.data_inicio,
        data_fim=job.data_fim,
        mensagem_erro=job.mensagem_erro,
        automation_type=job.automation_type,
        queue=job.queue,
        priority=job.priority,
        retry_count=job.retry_count,
        progress=job.progress,
        metadata_json=job.metadata_json,
        context=job.context,
        result=job.result,
        created_at=job.created_at,
        updated_at=job.updated_at,
        machine_id=job.machine_id,
        display_name=display_name_of(job.automation_type),
        client_name=client_name,
    )


def views_of(rows: Any) -> list[JobView]:
    """Views from the rows of :func:`enriched_select`, by position (a row's attribute lookups by
    name cost twice as much as building the view: lists and live screens build hundreds)."""
    count = len(ROW_FIELDS)
    result: list[JobView] = []
    for row in rows:
        values: Any = (*row[:count], display_name_of(row[_AUTOMATION_AT]), row[count])
        result.append(JobView(*values))
    return result


def rest_items_of(rows: Any, tz: ZoneInfo) -> list[dict[str, Any]]:
    """The REST items (:meth:`JobView.rest_item`) of the rows of :func:`enriched_select`, built
    straight from each row: a list page renders its items without a view in between."""
    client_at = len(ROW_FIELDS)
    items: list[dict[str, Any]] = []
    for row in rows:
        item = dict(zip(_REST_ROW_KEYS, row[:_REST_ROW_FIELDS], strict=True))
        item["data_inicio"] = iso(row[_DATA_INICIO_AT], tz)
        item["data_fim"] = iso(row[_DATA_FIM_AT], tz)
        item["display_name"] = display_name_of(row[_AUTOMATION_AT])
        item["client_name"] = row[client_at]
        items.append(item)
    return items
