"""What a job row looks like to callers: declared once, as :class:`JobView`, and rendered from
that declaration by each transport.

Each field of the view is stated once, in the order callers see it, with its type, its
description and its bounds (see :mod:`worker_automation.domain.shapes`). The rest is derived
from it when the module loads: the columns a list reads (:data:`ROW_FIELDS`), the documented REST
item (:data:`ITEM_FIELDS`), the full job that events, the worker protocol and GraphQL carry
(:data:`FIELDS`), and elsewhere the GraphQL ``Worker`` type and the OpenAPI schemas. The hot paths
(a list page builds hundreds of items) use tables made here, never a walk over the declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from enum import Enum
from functools import cache
from operator import attrgetter
from typing import TYPE_CHECKING, Annotated, Any, Final, get_args, get_origin, get_type_hints
from zoneinfo import ZoneInfo

from annotated_types import Ge, Interval
from sqlalchemy import ColumnElement, Select, UnaryExpression, null, select

from worker_automation.domain.ranges import (
    PRIORITY_MAX,
    PRIORITY_MIN,
    PRIORITY_RANGE,
    PROGRESS_MAX,
    PROGRESS_MIN,
    PROGRESS_RANGE,
)
from worker_automation.domain.shapes import Doc, facets, strip_optional
from worker_automation.models import Cliente, Job, JobStatus
from worker_automation.models.database import ReturnedRow

if TYPE_CHECKING:
    from worker_automation.catalog.registry import Automation

# The label of the joined client name in the rows of enriched_select.
CLIENT_NAME = "client_name"


def iso(value: datetime | None, tz: ZoneInfo) -> str | None:
    """ISO 8601 with the offset of ``tz`` (e.g. ``2026-07-08T09:15:00-03:00``)."""
    if value is None:
        return None
    return value.astimezone(tz).isoformat(timespec="seconds")


class Detail:
    """Marks a field of the full job that the documented REST item leaves out."""


DETAIL: Final = Detail()


@dataclass(frozen=True)
class OneOf:
    """Marks a text field whose values are those of ``enum`` (GraphQL types it as the enum)."""

    enum: type[Enum]


@dataclass(frozen=True)
class JobView:
    """A job row enriched with its automation's display name and its client's name."""

    id: Annotated[int, Doc("Internal id."), Ge(1)]
    task_id: Annotated[str | None, Doc("Celery task id (UUID); null if never sent.")]
    cliente_id: Annotated[int | None, Doc("Client the job runs for (not enforced).")]
    usuario_id: Annotated[int | None, Doc("User who triggered it.")]
    path_file: Annotated[str | None, Doc("File produced or consumed, if any.")]
    status: Annotated[str, Doc("Current state."), OneOf(JobStatus)]
    data_inicio: Annotated[datetime | None, Doc("When it started running.")]
    data_fim: Annotated[datetime | None, Doc("When it ended (done, failed, cancelled).")]
    mensagem_erro: Annotated[str | None, Doc("Error or cancellation message.")]
    automation_type: Annotated[str, Doc("Automation key in the registry.")]
    queue: Annotated[str, Doc("Celery queue it runs on.")]
    priority: Annotated[
        int, Doc(f"{PRIORITY_RANGE}, lower runs first."), Interval(ge=PRIORITY_MIN, le=PRIORITY_MAX)
    ]
    retry_count: Annotated[int, Doc("How many times it was retried."), Ge(0)]
    progress: Annotated[
        int,
        Doc(f"{PROGRESS_RANGE}, as reported by the automation."),
        Interval(ge=PROGRESS_MIN, le=PROGRESS_MAX),
    ]
    metadata_json: Annotated[dict[str, Any] | None, Doc("Free metadata (e.g. progress message).")]
    # Not columns: the registry's name for automation_type, and the joined client's name.
    display_name: Annotated[str, Doc("The automation's friendly name.")]
    client_name: Annotated[str | None, Doc("The client's razao social, if it exists.")]
    context: Annotated[dict[str, Any] | None, Doc("Input the job was dispatched with."), DETAIL]
    result: Annotated[Any | None, Doc("Return value, or the error on failure."), DETAIL]
    created_at: Annotated[datetime, Doc("When the job was created."), DETAIL]
    updated_at: Annotated[datetime, Doc("When the row last changed."), DETAIL]
    machine_id: Annotated[int | None, Doc("Machine that claimed it, if any."), DETAIL]

    def rest_item(self, tz: ZoneInfo) -> dict[str, Any]:
        """The documented REST item (snake_case, timestamps in ``tz``), keys in the documented order."""
        # A dataclass's __dict__ holds its fields in their order: copied, it is the full job.
        item = self.__dict__.copy()
        for name in DETAIL_FIELDS:
            del item[name]
        for name in _ITEM_INSTANTS:
            item[name] = iso(item[name], tz)
        return item

    def as_dict(self, tz: ZoneInfo) -> dict[str, Any]:
        """Every field, JSON-ready: what events carry (the REST item, then the details)."""
        data = self.__dict__.copy()
        for name in INSTANT_FIELDS:
            data[name] = iso(data[name], tz)
        return data


def _markers(name: str) -> tuple[object, ...]:
    hint = _HINTS[name]
    return get_args(hint)[1:] if get_origin(hint) is Annotated else ()


_HINTS = get_type_hints(JobView, include_extras=True)
# Every field, in the order callers see them; the REST item's, then the details.
FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in fields(JobView))
DETAIL_FIELDS: Final = tuple(name for name in FIELDS if DETAIL in _markers(name))
ITEM_FIELDS: Final = tuple(name for name in FIELDS if name not in DETAIL_FIELDS)
# Instants: datetimes in a view, ISO text in the service's zone wherever a transport shows them.
INSTANT_FIELDS: Final = tuple(f.name for f in facets(JobView) if strip_optional(f.hint)[0] is datetime)
# Text fields whose values are an enum's.
ENUM_FIELDS: Final[dict[str, type[Enum]]] = {
    name: marker.enum for name in FIELDS for marker in _markers(name) if isinstance(marker, OneOf)
}
# The fields read straight from the job row, in the view's order (the columns of enriched_select,
# then comes the client's name).
ROW_FIELDS: Final = tuple(name for name in FIELDS if name in Job.__table__.columns)
if FIELDS[: len(ITEM_FIELDS)] != ITEM_FIELDS:  # pragma: no cover - a declaration mistake
    raise RuntimeError("the details of JobView must follow the fields of the REST item")
# Where the two enriched fields stand: right after the item's columns, before the details'.
_ENRICHED_AT = FIELDS.index("display_name")
if (
    *ROW_FIELDS[:_ENRICHED_AT],
    "display_name",
    CLIENT_NAME,
    *ROW_FIELDS[_ENRICHED_AT:],
) != FIELDS:  # pragma: no cover - a declaration mistake
    raise RuntimeError("JobView must be its row's columns with display_name and client_name among them")
_ITEM_INSTANTS = tuple(name for name in INSTANT_FIELDS if name in ITEM_FIELDS)
# Positions in a row of enriched_select.
_AUTOMATION_AT = ROW_FIELDS.index("automation_type")
_CLIENT_AT = len(ROW_FIELDS)
_ROW_ITEM_INSTANTS = tuple((ROW_FIELDS.index(name), name) for name in _ITEM_INSTANTS)
# A loaded row's columns, by name, in the view's order.
_row_values = attrgetter(*ROW_FIELDS)
# The JSON documents a job was dispatched with and ended with: the largest columns of a row and
# the costliest to decode. REST list items never show them, nor a GraphQL list that does not
# select them; such lists read NULL in their place (see enriched_select).
DOCUMENT_FIELDS: tuple[str, ...] = ("context", "result")


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
# they will run (priority, 0 first, then age). Columns of both the statements and JobView.
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


def view_of(job: Job | ReturnedRow, client_name: str | None) -> JobView:
    """Build the view from a loaded row (an entity or a row of its columns) and the client name."""
    return view_of_columns(_row_values(job), client_name)


def view_of_columns(columns: Sequence[Any], client_name: str | None) -> JobView:
    """Build the view from a row's columns in :data:`ROW_FIELDS` order and the client name."""
    values: Any = (
        *columns[:_ENRICHED_AT],
        display_name_of(columns[_AUTOMATION_AT]),
        client_name,
        *columns[_ENRICHED_AT:],
    )
    return JobView(*values)


def views_of(rows: Any) -> list[JobView]:
    """Views from the rows of :func:`enriched_select`, by position (a row's attribute lookups by
    name cost twice as much as building the view: lists and live screens build hundreds)."""
    result: list[JobView] = []
    for row in rows:
        values: Any = (
            *row[:_ENRICHED_AT],
            display_name_of(row[_AUTOMATION_AT]),
            row[_CLIENT_AT],
            *row[_ENRICHED_AT:_CLIENT_AT],
        )
        result.append(JobView(*values))
    return result


def rest_items_of(rows: Any, tz: ZoneInfo) -> list[dict[str, Any]]:
    """The REST items (:meth:`JobView.rest_item`) of the rows of :func:`enriched_select`, built
    straight from each row: a list page renders its items without a view in between."""
    items: list[dict[str, Any]] = []
    for row in rows:
        # The item's columns come first in both; zip stops at the row's (the names go on).
        item = dict(zip(ITEM_FIELDS, row[:_ENRICHED_AT]))  # noqa: B905
        for at, name in _ROW_ITEM_INSTANTS:
            item[name] = iso(row[at], tz)
        item["display_name"] = display_name_of(row[_AUTOMATION_AT])
        item[CLIENT_NAME] = row[_CLIENT_AT]
        items.append(item)
    return items
