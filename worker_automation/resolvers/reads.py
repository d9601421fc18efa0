"""Read operations on job rows: list, detail, active, queued, stats, task status."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Final, Generic, Literal, TypeVar
from zoneinfo import ZoneInfo

from annotated_types import Ge
from sqlalchemy import ColumnElement, Select, bindparam, func, select

from worker_automation.domain.errors import BadInput, NotFound
from worker_automation.domain.limits import INT32_MAX, INT32_MIN
from worker_automation.domain.shapes import Doc
from worker_automation.models import CELERY_STATE, Job, JobStatus
from worker_automation.models.database import Database
from worker_automation.resolvers.counts import (
    bucketed_seek,
    count_matching,
    counted_total,
    counters,
    finished_parameters,
    finished_total,
)
from worker_automation.resolvers.job_filter import (
    RANGES,
    JobFilter,
    TotalSource,
    check_queue,
    filter_parameters,
    range_conditions,
)
from worker_automation.resolvers.job_order import (
    JobOrder,
    OrderField,
    after_condition,
    order_clauses,
    sort_key,
)
from worker_automation.resolvers.job_text import text_search
from worker_automation.resolvers.job_views import (
    RUN_ORDER,
    RUNNING_ORDER,
    JobView,
    enriched_select,
    order_by,
    rest_items_of,
    views_of,
)
from worker_automation.resolvers.literals import written_count
from worker_automation.resolvers.pagination import Page, PageRequest, cursor_of, ordered_cursor_of

# How a list statement finds its page: skipping rows, skipping whole buckets of ids by their
# counters first (deep pages filtered by status and queue alone), after a cursor, or from the newest.
Seek = Literal["offset", "bucketed", "after", "first"]
# From this offset on, a page filtered by status and/or queue alone is found through the bucket
# counters (reading them costs about as much as skipping this many index entries).
BUCKETED_FROM = 2000
# How many rows a list statement fetches is written into it, rounded up to one of these (the page
# is cut to its size after): with the count a parameter, PostgreSQL's generic plan for a prepared
# statement assumes a tenth of the matching rows and costs ~40x the custom one, so every page was
# planned anew (~0.45 ms of the server's ~0.75 at 1M rows). Written in, the count lets it keep the
# generic plan after five runs. A short ladder keeps the statements few; sizes + 1 serve cursor
# slices, which fetch one row more than they show.
FETCH_SIZES = (1, 2, 5, 10, 11, 20, 21, 25, 26, 50, 51, 100, 101)
MSG_JOB_NOT_FOUND = "Worker nao encontrado."
MSG_TASK_NOT_FOUND = "Task nao encontrada."
T = TypeVar("T")


async def list_jobs(
    db: Database,
    queues: dict[str, int],
    filters: JobFilter,
    page: int | None = None,
    per_page: int | None = None,
    *,
    documents: bool = True,
) -> Page[JobView]:
    """Newest first, filtered, paginated: one statement whatever the page size (a second one,
    for the total, only when the page is past the end). Without ``documents`` the views carry
    no context nor result (None), for callers that show neither."""
    return await list_page(db, queues, filters, page, per_page, views_of, documents=documents)


async def list_job_items(
    db: Database,
    queues: dict[str, int],
    filters: JobFilter,
    tz: ZoneInfo,
    page: int | None = None,
    per_page: int | None = None,
) -> Page[dict[str, Any]]:
    """The page of :func:`list_jobs` as REST items (:meth:`JobView.rest_item`, timestamps in
    ``tz``), built straight from the rows."""
    return await list_page(
        db, queues, filters, page, per_page, lambda rows: rest_items_of(rows, tz), documents=False
    )


async def list_page(
    db: Database,
    queues: dict[str, int],
    filters: JobFilter,
    page: int | None,
    per_page: int | None,
    build: Callable[[Sequence[Sequence[Any]]], list[T]],
    *,
    documents: bool,
    order: JobOrder | None = None,
) -> Page[T]:
    """The page of :func:`list_jobs` with its items built by ``build`` from the rows of
    :func:`enriched_select` (a transport's own items, without views in between), sorted by
    ``order`` (when None, the filters' :meth:`JobFilter.implied_order`: newest first unless a
    time range is set)."""
    request = PageRequest.of(page, per_page, default_per_page=20)
    order = order if order is not None else filters.implied_order()
    values, parameters = _parameters(filters, queues)
    total = filters.total_source
    bucketed = total == "counters" and order is None and request.offset >= BUCKETED_FROM
    rows_q, count_q = _list_statements(
        tuple(values),
        with_text=filters.text is not None,
        total=total,
        seek="bucketed" if bucketed else "offset",
        documents=documents,
        fetch=fetch_size(request.per_page),
        ranges=tuple(filters.ranges()),
        order=order,
    )
    parameters.update(page_offset=request.offset)
    # Every list page of every screen runs this: on the driver's fast path (see Database.rows).
    rows = (await db.rows(rows_q, parameters, generic=one_plan(filters, values, order)))[: request.per_page]
    # Past the last page no row carries the total: it is asked for alone.
    matching = int(rows[0][-1]) if rows else await _count(db, count_q, parameters)
    start, end = _cursors(rows, order)
    return Page(build(rows), matching, request.page, request.per_page, start, end)


# Equality filters whose pages, in the default order, follow one index whatever their values:
# the primary key, ``(queue, id)``, ``(status, queue, id)``.
_ONE_PLAN_FILTERS: Final[tuple[frozenset[str], ...]] = (
    frozenset(),
    frozenset({"queue"}),
    frozenset({"status", "queue"}),
)
# The order each range's column is read along (its own index).
_RANGE_ORDER: Final = {"created_at": OrderField.CREATED_AT, "data_fim": OrderField.FINISHED_AT}


def one_plan(filters: JobFilter, values: Mapping[str, Any], order: JobOrder | None) -> bool:
    """Whether the page statement for ``filters`` (equality filters ``values``) sorted by
    ``order`` is best run by one plan for any values and any page (see ``Database.rows``): it
    walks one index that holds its filters and its order, so no value of a parameter makes
    another plan better. A page filtered by something else (a client, say: a handful of jobs or
    a third of them) or searched by text is planned for its values, as is any filter or range
    beside an order that is not its own."""
    if filters.text is not None:
        return False
    ranges = filters.ranges()
    if ranges:
        orders = {_RANGE_ORDER[RANGES[name][0]] for name in ranges}
        return not values and order is not None and orders == {order.field}
    if order is not None:
        return not values
    return frozenset(values) in _ONE_PLAN_FILTERS


def _parameters(filters: JobFilter, queues: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`filter_parameters`, and those of :func:`finished_total` when it gives the total."""
    values, parameters = filter_parameters(filters, queues)
    if filters.total_source == "finished":
        parameters.update(finished_parameters(filters.finished_from, filters.finished_to))
    return values, parameters


def _cursors(rows: Sequence[Sequence[Any]], order: JobOrder | None) -> tuple[str | None, str | None]:
    """The cursors of the first and last of ``rows`` (ordered rows carry their sort key just
    before the total)."""
    if not rows:
        return None, None
    if order is None:
        return cursor_of(rows[0][0]), cursor_of(rows[-1][0])
    return (
        ordered_cursor_of(order, rows[0][-2], rows[0][0]),
        ordered_cursor_of(order, rows[-1][-2], rows[-1][0]),
    )


async def _count(db: Database, count_q: Select[Any], parameters: dict[str, Any]) -> int:
    async with db.connection() as conn:
        return int(await conn.scalar(count_q, parameters) or 0)


def fetch_size(rows: int) -> int:
    """The smallest of :data:`FETCH_SIZES` that holds ``rows`` (itself past the largest)."""
    return next((size for size in FETCH_SIZES if size >= rows), rows)


@cache
def _list_statements(
    filtered: tuple[str, ...],
    *,
    with_text: bool,
    total: TotalSource,
    seek: Seek = "offset",
    documents: bool = True,
    fetch: int = 20,
    ranges: tuple[str, ...] = (),
    order: JobOrder | None = None,
) -> tuple[Select[Any], Select[Any]]:
    """The page and count statements for one combination of filters, built once (parameters
    ``filter_<column>``, the text search's when asked, and ``page_offset`` for offset and
    bucketed pages or ``after_id`` for a slice after a cursor; bucketed only for filters on
    status and queue alone). The page statement fetches up to ``fetch`` rows, a number written
    into its text (see :data:`FETCH_SIZES`); without ``documents`` the rows carry NULL for
    context and result (see :func:`enriched_select`).

    Each page row carries the total as its last column, from ``total`` (see
    :data:`TotalSource`): the trigger-maintained counters (filtered by status and queue alone),
    those of finish times (parameters of :func:`finished_parameters`), or a count. The bounds
    ``ranges`` (parameters ``range_<name>``) narrow it by time. Sorted by ``order``, the page
    is that order's (``after_key`` and ``after_id`` after a cursor) and each row carries its
    sort key just before the total.
    """
    conds: list[ColumnElement[bool]] = [
        getattr(Job, name) == bindparam(f"filter_{name}") for name in filtered
    ]
    conds.extend(range_conditions(ranges, order))
    if with_text:
        conds.append(text_search())
    count_q: Select[Any]
    if total == "counters":
        count_q = counted_total(filtered, "filter_")
    elif total == "finished":
        count_q = finished_total(filtered, "filter_")
    else:
        count_q = select(func.count()).select_from(Job).where(*conds)
    if with_text:
        return _matched_page(conds, filtered, seek, documents, fetch, order), count_q
    # The page's ids first (an index-only scan skips ``offset`` entries without visiting their
    # rows), then only the page's rows are read and joined: a deep page no longer reads every row
    # it skips. Bucketed, the entries skipped are only those of the page's own bucket of ids. After
    # a cursor the same index is entered at the cursor's id: nothing is skipped.
    ordered = select(Job.id).where(*conds).order_by(*order_clauses(order))
    page_ids = _sought(ordered.limit(written_count(fetch)), seek, filtered, order)
    rows_q = enriched_select(documents=documents)
    if order is not None:
        rows_q = rows_q.add_columns(sort_key(order).label("sort_key"))
    rows_q = (
        rows_q.add_columns(count_q.correlate(None).scalar_subquery().label("total"))
        .where(Job.id.in_(page_ids.correlate(None)))
        .order_by(*order_clauses(order))
    )
    return rows_q, count_q


def _sought(
    page: Select[Any],
    seek: Seek,
    filtered: tuple[str, ...],
    order: JobOrder | None,
    key: ColumnElement[Any] | None = None,
    row_id: ColumnElement[Any] | None = None,
) -> Select[Any]:
    """``page`` (ordered by ``order``) narrowed to the page ``seek`` says (see :data:`Seek`);
    ``key`` and ``row_id`` as for :func:`order_clauses`."""
    if seek == "offset":
        return page.offset(bindparam("page_offset"))
    if seek == "bucketed":
        below, skip = bucketed_seek(filtered, "filter_", "page_offset")
        return page.where(below).offset(skip)
    if seek == "after":
        if order is not None:
            return page.where(after_condition(order, key, row_id))
        return page.where((Job.__table__.c.id if row_id is None else row_id) < bindparam("after_id"))
    return page


def _matched_page(
    conds: list[ColumnElement[bool]],
    filtered: tuple[str, ...],
    seek: Seek,
    documents: bool,
    fetch: int,
    order: JobOrder | None,
) -> Select[Any]:
    """The page statement of a free-text search: every match is found through the indexes of the
    search's alternatives (see ``job_text``) and counted in the same pass, then the page is cut
    from them. Walking an index in the list's order and testing each row instead, as the other
    lists do, reads rows up to the page's depth whatever matches, and a search usually matches
    few: at 1M rows a CNPJ in 1,607 contexts took 650 ms at page 32 that way, 40 ms this way.
    Rows carry what :func:`_list_statements` says (the sort key, then the total)."""
    key = [sort_key(order).label("sort_key")] if order is not None else []
    # The count over every match is computed before the page is cut (a window over all of them),
    # so no ordered index can stand in for finding them.
    total = func.count().over().label("total")
    matched = select(Job.id.label("id"), *key, total).where(*conds).subquery("matched")
    matched_key = matched.c.sort_key if order is not None else None
    ordered = select(*matched.c).order_by(*order_clauses(order, matched_key, matched.c.id))
    page = _sought(ordered, seek, filtered, order, matched_key, matched.c.id)
    page_q = page.limit(written_count(fetch)).subquery("page")
    page_key = page_q.c.sort_key if order is not None else None
    # The page's rows with their sort key and total as the page read them.
    rows_q = enriched_select(documents=documents)
    if page_key is not None:
        rows_q = rows_q.add_columns(page_key)
    return (
        rows_q.add_columns(page_q.c.total)
        .where(Job.id == page_q.c.id)
        .order_by(*order_clauses(order, page_key, page_q.c.id))
    )


@dataclass(frozen=True)
class Slice(Generic[T]):
    """Jobs after a cursor, whether more follow, how many match in all, and the cursors of the
    first and last of them."""

    items: list[T]
    has_next: bool
    total: int
    start_cursor: str | None = None
    end_cursor: str | None = None


async def slice_after(
    db: Database,
    queues: dict[str, int],
    filters: JobFilter,
    first: int,
    after: int | None,
    build: Callable[[Sequence[Sequence[Any]]], list[T]],
    *,
    documents: bool,
    order: JobOrder | None = None,
    after_key: Any = None,
) -> Slice[T]:
    """The ``first`` jobs after the job ``after`` (from the start when None), filtered, with its
    items built by ``build`` from the rows of :func:`enriched_select`, sorted by ``order`` (when
    None, the filters' :meth:`JobFilter.implied_order`); ``after_key`` is the sort key of the job
    ``after`` in that order, both read from a cursor of it.

    Keyset pagination: each slice starts at its cursor's id in the index, so its cost does not
    grow with depth, and jobs created meanwhile (newer ids) never shift the slices that follow.
    """
    order = order if order is not None else filters.implied_order()
    values, parameters = _parameters(filters, queues)
    # One row more than asked for says whether another slice follows.
    rows_q, count_q = _list_statements(
        tuple(values),
        with_text=filters.text is not None,
        total=filters.total_source,
        seek="after" if after is not None else "first",
        documents=documents,
        fetch=fetch_size(first + 1),
        ranges=tuple(filters.ranges()),
        order=order,
    )
    if after is not None:
        parameters["after_id"] = after
        if order is not None:
            parameters["after_key"] = after_key
    # No OFFSET: PostgreSQL keeps a slice's generic plan of its own accord, but the connections
    # kept for such pages are fewer, and fewer statements at once leave the API more of the CPU.
    rows = (await db.rows(rows_q, parameters, generic=one_plan(filters, values, order)))[: first + 1]
    total = int(rows[0][-1]) if rows else await _count(db, count_q, parameters)
    start, end = _cursors(rows[:first], order)
    return Slice(build(rows[:first]), len(rows) > first, total, start, end)


async def get_job(db: Database, job_id: int) -> JobView:
    # An id out of the column's range names no row (and the driver would refuse the parameter).
    rows = await db.rows(_BY_ID, {"job_id": job_id}) if INT32_MIN <= job_id <= INT32_MAX else []
    if not rows:
        raise NotFound(MSG_JOB_NOT_FOUND, worker_id=job_id)
    return views_of(rows[:1])[0]


async def active_jobs(db: Database, limit: int | None = None) -> list[JobView]:
    """Every EXECUTANDO row, longest running first (``limit`` caps it for dashboards)."""
    query = (
        enriched_select().where(Job.status == JobStatus.EXECUTANDO.value).order_by(*order_by(RUNNING_ORDER))
    )
    if limit is not None:
        query = query.limit(limit)
    async with db.reader() as session:
        return views_of(await session.execute(query))


async def queued_jobs(
    db: Database,
    queues: dict[str, int],
    page: int | None = None,
    per_page: int | None = None,
    queue: str | None = None,
) -> Page[JobView]:
    """AGENDADO rows in the order they will run: priority (0 first), then age."""
    request = PageRequest.of(page, per_page, default_per_page=10)
    conds: list[ColumnElement[bool]] = [Job.status == JobStatus.AGENDADO.value]
    if queue:
        conds.append(Job.queue == check_queue(queue, queues))
    async with db.reader() as session:
        total = await count_matching(session, status=JobStatus.AGENDADO.value, queue=queue or None)
        rows = await session.execute(
            enriched_select()
            .where(*conds)
            .order_by(*order_by(RUN_ORDER))
            .offset(request.offset)
            .limit(request.per_page)
        )
        items = views_of(rows)
    return Page(items, total, request.page, request.per_page)


@dataclass(frozen=True)
class Stats:
    """Totals by status and by queue."""

    total: Annotated[int, Doc("Every job row."), Ge(0)]
    by_status: Annotated[dict[str, int], Doc('Map status -> count, e.g. {"AGENDADO": 18}.')]
    by_queue: Annotated[dict[str, int], Doc('Map queue -> count, e.g. {"certidao": 640}.')]


async def stats(db: Database, queues: dict[str, int]) -> Stats:
    """Every status and every configured queue appear, with zero when empty.

    Callers asking at the same moment share one read (each still gets one made after it asked).
    """
    return await db.shared.run(("stats", tuple(queues)), lambda: _stats(db, queues))


async def _stats(db: Database, queues: dict[str, int]) -> Stats:
    async with db.connection() as conn:
        return stats_of(await counters(conn), queues)


def stats_of(counts: dict[tuple[str, str], int], queues: dict[str, int]) -> Stats:
    """The totals of the (queue, status) counters; every status and configured queue appear."""
    by_status = {s.value: 0 for s in JobStatus}
    by_queue = dict.fromkeys(queues, 0)
    total = 0
    for (queue, status), count in counts.items():
        by_status[status] = by_status.get(status, 0) + count
        by_queue[queue] = by_queue.get(queue, 0) + count
        total += count
    return Stats(total, by_status, by_queue)


@dataclass(frozen=True)
class TaskStatus:
    """A task's state in Celery's vocabulary, from the database (or the result backend)."""

    task_id: str
    state: str
    result: dict[str, Any] | None
    job: JobView | None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "task_id": self.task_id,
            "status": self.state,
            "state": self.state,
            "result": self.result,
        }
        if self.job is not None:
            data["worker_id"] = self.job.id
            data["progress"] = self.job.progress
        return data


def result_object(status: JobStatus, job: JobView) -> dict[str, Any] | None:
    """``result`` as an object: the return value on success, the error on failure, else null."""
    if status is JobStatus.CONCLUIDO:
        value = job.result
        return value if isinstance(value, dict) else {"value": value}
    if status is JobStatus.FALHA:
        failure = job.result if isinstance(job.result, dict) else {}
        return {
            "exc_type": failure.get("exc_type", "AutomationError"),
            "exc_message": failure.get("exc_message", job.mensagem_erro),
            "traceback": failure.get("traceback"),
        }
    if status is JobStatus.CANCELADO:
        return {"exc_type": "TaskRevokedError", "exc_message": job.mensagem_erro or "revoked"}
    return None


# Built once: a lookup by id or by task id is one read by a unique index, where building the
# statement and running it through an ORM session cost more than the read itself.
_BY_ID = enriched_select().where(Job.id == bindparam("job_id"))
_BY_TASK_ID = enriched_select().where(Job.task_id == bindparam("task_id"))


async def task_status_from_db(db: Database, task_id: str) -> TaskStatus | None:
    """The status of ``task_id`` from its row, or None when no row has it."""
    if not task_id.strip():
        raise BadInput("task_id", "task_id nao pode ser vazio")
    rows = await db.rows(_BY_TASK_ID, {"task_id": task_id})
    if not rows:
        return None
    job = views_of(rows[:1])[0]
    status = JobStatus(job.status)
    return TaskStatus(task_id, CELERY_STATE[status], result_object(status, job), job)
