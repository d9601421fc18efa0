"""The orders the job list can be read in, and the sort key each one pages by.

Without an order the list is newest first by id (the seed's order, served by the primary key).
An explicit order sorts by one key and then by id in the same direction, so equal keys still
come in a fixed order and a cursor (key, id) names one place in the list.

Unfinished jobs have no finish time nor duration; they come last in both directions. The key
a page is sorted and sought by is the column with such NULLs replaced by a value past every
real one on the side the direction ends on, so paging after a cursor is one row comparison
``(key, id) < (cursor key, cursor id)`` (``>`` ascending) on both databases, with no NULL cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    TypeDecorator,
    UnaryExpression,
    bindparam,
    func,
    literal,
    tuple_,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from worker_automation.domain.errors import BadInput
from worker_automation.models import Job
from worker_automation.models.base import UtcDateTime


class OrderField(Enum):
    """What the job list is sorted by."""

    CREATED_AT = "CREATED_AT"
    FINISHED_AT = "FINISHED_AT"
    DURATION = "DURATION"
    PRIORITY = "PRIORITY"


class Direction(Enum):
    """Ascending or descending."""

    ASC = "ASC"
    DESC = "DESC"


@dataclass(frozen=True)
class JobOrder:
    """One explicit order of the job list (None stands for the default, newest first by id)."""

    field: OrderField
    direction: Direction = Direction.DESC

    @property
    def descending(self) -> bool:
        return self.direction is Direction.DESC

    @property
    def name(self) -> str:
        """``field:direction`` in lower case, as the command line writes it."""
        return f"{self.field.value.lower()}:{self.direction.value.lower()}"

    @classmethod
    def parse(cls, text: str, field: str = "order_by") -> JobOrder:
        """``created_at``, ``duration:asc``, ``PRIORITY:DESC`` (descending when not said)."""
        name, _, direction = text.strip().partition(":")
        try:
            return cls(OrderField(name.strip().upper()), Direction((direction.strip() or "desc").upper()))
        except ValueError:
            fields = ", ".join(f.value.lower() for f in OrderField)
            raise BadInput(field, f"{field} invalido: {text!r} (use {fields}, com :asc ou :desc)") from None


# Sentinels that stand for NULL in a sort key: before every real value (descending orders end on
# them) or after every real one (ascending orders end on them).
_FIRST_TIME = datetime(1, 1, 1, tzinfo=UTC)
_LAST_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
_FIRST_SECONDS = -1e18
_LAST_SECONDS = 1e18


class duration_seconds(FunctionElement[float]):
    """Seconds between a job's start and end (NULL unless both are set), as a float on both
    databases so a cursor carries the value the database compares."""

    type = Float()
    inherit_cache = True


@compiles(duration_seconds)
def _duration_sqlite(element: duration_seconds, compiler: SQLCompiler, **kw: Any) -> str:
    end, start = (compiler.process(c, **kw) for c in element.clauses)
    return f"((julianday({end}) - julianday({start})) * 86400.0)"


@compiles(duration_seconds, "postgresql")
def _duration_postgresql(element: duration_seconds, compiler: SQLCompiler, **kw: Any) -> str:
    end, start = (compiler.process(c, **kw) for c in element.clauses)
    return f"CAST(EXTRACT(EPOCH FROM ({end} - {start})) AS DOUBLE PRECISION)"


class _missing(ColumnElement[Any]):
    """The sentinel that stands for NULL in a sort key. PostgreSQL gets it written into the
    statement, as the expression indexes of these keys write it (migration 0013): an index is
    used only for the expression it was built on, and a parameter in its place matches none
    once a prepared statement runs its generic plan. SQLite gets a parameter. (asyncpg sends
    the first instant a datetime holds as -infinity, so PostgreSQL's first sentinel is that.)"""

    inherit_cache = True

    def __init__(self, value: datetime | float, sql: str, type_: Any) -> None:
        self.value = value
        self.sql = sql
        self.type = type_

    def _gen_cache_key(self, anon_map: Any, bindparams: Any) -> tuple[Any, ...]:
        return (self.__class__, self.sql)


@compiles(_missing)
def _missing_default(element: _missing, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(literal(element.value, element.type), **kw)


@compiles(_missing, "postgresql")
def _missing_postgresql(element: _missing, compiler: SQLCompiler, **kw: Any) -> str:
    return element.sql


_NO_FINISH = {
    True: _missing(_FIRST_TIME, "CAST('-infinity' AS TIMESTAMP WITH TIME ZONE)", UtcDateTime()),
    False: _missing(
        _LAST_TIME, "CAST('9999-12-31 23:59:59+00:00' AS TIMESTAMP WITH TIME ZONE)", UtcDateTime()
    ),
}
_NO_DURATION = {
    True: _missing(_FIRST_SECONDS, "CAST(-1e18 AS DOUBLE PRECISION)", Float()),
    False: _missing(_LAST_SECONDS, "CAST(1e18 AS DOUBLE PRECISION)", Float()),
}


def _key_type(field: OrderField) -> TypeDecorator[Any] | Integer | Float[float]:
    if field in (OrderField.CREATED_AT, OrderField.FINISHED_AT):
        return UtcDateTime()
    return Integer() if field is OrderField.PRIORITY else Float()


def sort_key(order: JobOrder) -> ColumnElement[Any]:
    """The value ``order`` sorts by, NULLs replaced as the module says."""
    columns = Job.__table__.c
    if order.field is OrderField.CREATED_AT:
        return columns.created_at
    if order.field is OrderField.PRIORITY:
        return columns.priority
    if order.field is OrderField.FINISHED_AT:
        return func.coalesce(Job.data_fim, _NO_FINISH[order.descending], type_=UtcDateTime())
    return func.coalesce(
        duration_seconds(Job.data_fim, Job.data_inicio), _NO_DURATION[order.descending], type_=Float()
    )


def order_clauses(
    order: JobOrder | None, key: ColumnElement[Any] | None = None, row_id: ColumnElement[Any] | None = None
) -> list[UnaryExpression[Any]]:
    """ORDER BY for ``order`` (newest first by id for None); ``key`` and ``row_id`` stand for the
    sort key and the id where a statement reads them from a subquery's columns."""
    by_id: ColumnElement[Any] = Job.__table__.c.id if row_id is None else row_id
    if order is None:
        return [by_id.desc()]
    by_key = sort_key(order) if key is None else key
    if order.descending:
        return [by_key.desc(), by_id.desc()]
    return [by_key.asc(), by_id.asc()]


def after_condition(
    order: JobOrder, key: ColumnElement[Any] | None = None, row_id: ColumnElement[Any] | None = None
) -> ColumnElement[bool]:
    """Rows after the cursor ``(after_key, after_id)`` in ``order`` (``key`` and ``row_id`` as
    for :func:`order_clauses`)."""
    row = tuple_(sort_key(order) if key is None else key, Job.__table__.c.id if row_id is None else row_id)
    cursor = tuple_(bindparam("after_key", type_=_key_type(order.field)), bindparam("after_id"))
    return row < cursor if order.descending else row > cursor


def key_text(order: JobOrder, value: Any) -> str:
    """A sort key read from a row, written into a cursor."""
    if isinstance(value, datetime):
        # Read back naive where the driver drops the zone of a computed value: UTC by construction.
        return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    if order.field is OrderField.PRIORITY:
        return str(int(value))
    return repr(float(value))


def key_value(order: JobOrder, text: str) -> Any:
    """The sort key of a cursor written by :func:`key_text` (ValueError when it is not one)."""
    if order.field in (OrderField.CREATED_AT, OrderField.FINISHED_AT):
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            raise ValueError(text)
        return moment
    if order.field is OrderField.PRIORITY:
        return int(text)
    return float(text)
