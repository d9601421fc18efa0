"""The job list's time ranges, explicit orders (pages and cursor slices) and search over context
values, on SQLite and real PostgreSQL."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from tests.integration.test_read_resolvers import QUEUES, T0, db, insert_rows, job
from worker_automation.domain.errors import BadInput
from worker_automation.models.database import Database
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.job_order import Direction, JobOrder, OrderField
from worker_automation.resolvers.job_views import views_of
from worker_automation.resolvers.pagination import cursor_of, position_of_cursor
from worker_automation.resolvers.reads import list_jobs, list_page, slice_after

__all__ = ["db"]

ROWS = 13


def _spec(n: int) -> dict[str, Any]:
    """Row ``n`` of a set where every order differs from the order of ids: priorities repeat,
    some jobs never ended (and so have no duration) and durations do not follow creation."""
    created = T0 + timedelta(minutes=(n * 7) % ROWS)
    row = job(n, created_at=created, updated_at=created, priority=n % 3)
    if n % 4 != 0:
        start = created + timedelta(seconds=5)
        row.update(
            status="CONCLUIDO",
            data_inicio=start,
            data_fim=start + timedelta(seconds=(n * 37) % 11 + 1),
        )
    return row


@pytest.fixture
async def spread(db: Database) -> list[dict[str, Any]]:
    """The rows of :func:`_spec`, each with its id."""
    rows = [_spec(n) for n in range(ROWS)]
    ids = await insert_rows(db, rows)
    return [{**row, "id": job_id} for row, job_id in zip(rows, ids, strict=True)]


def expected(rows: list[dict[str, Any]], order: JobOrder) -> list[int]:
    """The ids of ``rows`` in ``order`` worked out in Python: the key, then the id in the same
    direction, rows without the key last either way."""

    def key(row: dict[str, Any]) -> Any:
        if order.field is OrderField.CREATED_AT:
            return row["created_at"]
        if order.field is OrderField.PRIORITY:
            return row["priority"]
        if row["data_fim"] is None:
            return None
        if order.field is OrderField.FINISHED_AT:
            return row["data_fim"]
        return row["data_fim"] - row["data_inicio"]

    present = [r for r in rows if key(r) is not None]
    missing = [r for r in rows if key(r) is None]
    reverse = order.descending
    present.sort(key=lambda r: (key(r), r["id"]), reverse=reverse)
    missing.sort(key=lambda r: r["id"], reverse=reverse)
    return [r["id"] for r in present + missing]


ORDERS = [JobOrder(field, direction) for field in OrderField for direction in Direction]


def _names(order: JobOrder) -> str:
    return order.name


@pytest.mark.parametrize("order", ORDERS, ids=_names)
async def test_pages_in_every_order(db: Database, spread: list[dict[str, Any]], order: JobOrder) -> None:
    seen: list[int] = []
    for page in (1, 2, 3, 4):
        found = await list_page(db, QUEUES, JobFilter(), page, 4, views_of, documents=False, order=order)
        assert found.total == ROWS
        seen.extend(v.id for v in found.items)
    assert seen == expected(spread, order)


@pytest.mark.parametrize("order", ORDERS, ids=_names)
async def test_cursor_slices_in_every_order(
    db: Database, spread: list[dict[str, Any]], order: JobOrder
) -> None:
    seen: list[int] = []
    after: str | None = None
    for _ in range(ROWS):
        key, after_id = position_of_cursor(after, order) if after is not None else (None, None)
        part = await slice_after(
            db, QUEUES, JobFilter(), 3, after_id, views_of, documents=False, order=order, after_key=key
        )
        seen.extend(v.id for v in part.items)
        after = part.end_cursor
        if not part.has_next:
            break
    assert seen == expected(spread, order)


@pytest.mark.parametrize("order", ORDERS, ids=_names)
async def test_ordered_slices_with_a_filter(
    db: Database, spread: list[dict[str, Any]], order: JobOrder
) -> None:
    done = [r for r in spread if r["status"] == "CONCLUIDO"]
    first = await slice_after(
        db, QUEUES, JobFilter(status="CONCLUIDO"), 4, None, views_of, documents=False, order=order
    )
    assert first.end_cursor is not None
    key, after_id = position_of_cursor(first.end_cursor, order)
    rest = await slice_after(
        db,
        QUEUES,
        JobFilter(status="CONCLUIDO"),
        50,
        after_id,
        views_of,
        documents=False,
        order=order,
        after_key=key,
    )
    assert first.total == rest.total == len(done)
    assert [v.id for v in first.items + rest.items] == expected(done, order)


# A search's pages are cut from all of its matches, counted in the same pass.
SEARCHED = "55667788000199"


@pytest.fixture
async def searched(db: Database) -> list[dict[str, Any]]:
    """The rows of :func:`_spec`, two of every three with :data:`SEARCHED` in their context."""
    rows = [_spec(n) for n in range(ROWS)]
    for n, row in enumerate(rows):
        row["context"] = {"cnpj": SEARCHED if n % 3 else "11222333000181", "n": n}
    ids = await insert_rows(db, rows)
    found = [{**row, "id": job_id} for row, job_id in zip(rows, ids, strict=True)]
    return [row for row in found if row["context"]["cnpj"] == SEARCHED]


@pytest.mark.parametrize("order", [None, *ORDERS], ids=lambda order: order.name if order else "NEWEST")
async def test_a_search_in_pages_and_slices_in_every_order(
    db: Database, searched: list[dict[str, Any]], order: JobOrder | None
) -> None:
    newest = sorted((r["id"] for r in searched), reverse=True)
    wanted = expected(searched, order) if order is not None else newest
    found = JobFilter(q=SEARCHED[2:10])
    seen: list[int] = []
    for page in (1, 2, 3, 4):
        part = await list_page(db, QUEUES, found, page, 3, views_of, documents=False, order=order)
        assert part.total == len(searched)
        seen.extend(v.id for v in part.items)
    assert seen == wanted
    # Past the last page: no rows, the total still counted.
    beyond = await list_page(db, QUEUES, found, 9, 3, views_of, documents=False, order=order)
    assert (beyond.items, beyond.total) == ([], len(searched))
    sliced: list[int] = []
    after: str | None = None
    for _ in range(ROWS):
        key, after_id = position_of_cursor(after, order) if after is not None else (None, None)
        chunk = await slice_after(
            db, QUEUES, found, 4, after_id, views_of, documents=False, order=order, after_key=key
        )
        assert chunk.total == len(searched)
        sliced.extend(v.id for v in chunk.items)
        after = chunk.end_cursor
        if not chunk.has_next:
            break
    assert sliced == wanted


async def test_a_cursor_of_another_order_is_bad_input(db: Database, spread: list[dict[str, Any]]) -> None:
    by_priority = JobOrder(OrderField.PRIORITY, Direction.ASC)
    part = await slice_after(db, QUEUES, JobFilter(), 2, None, views_of, documents=False, order=by_priority)
    assert part.end_cursor is not None
    for other in (None, JobOrder(OrderField.PRIORITY, Direction.DESC), JobOrder(OrderField.DURATION)):
        with pytest.raises(BadInput) as refused:
            position_of_cursor(part.end_cursor, other)
        assert refused.value.field == "after"
    with pytest.raises(BadInput):
        position_of_cursor(cursor_of(spread[0]["id"]), by_priority)
    assert position_of_cursor(cursor_of(7), None) == (None, 7)


@pytest.mark.parametrize(
    ("bounds", "wanted"),
    [
        ({"created_from": T0 + timedelta(minutes=3)}, lambda r: r["created_at"] >= T0 + timedelta(minutes=3)),
        ({"created_to": T0 + timedelta(minutes=3)}, lambda r: r["created_at"] < T0 + timedelta(minutes=3)),
        (
            {"created_from": T0 + timedelta(minutes=2), "created_to": T0 + timedelta(minutes=5)},
            lambda r: T0 + timedelta(minutes=2) <= r["created_at"] < T0 + timedelta(minutes=5),
        ),
        (
            {"finished_from": T0 + timedelta(minutes=6)},
            lambda r: r["data_fim"] is not None and r["data_fim"] >= T0 + timedelta(minutes=6),
        ),
        (
            {"finished_to": T0 + timedelta(minutes=6)},
            lambda r: r["data_fim"] is not None and r["data_fim"] < T0 + timedelta(minutes=6),
        ),
    ],
    ids=["created_from", "created_to", "created_range", "finished_from", "finished_to"],
)
async def test_time_ranges(
    db: Database,
    spread: list[dict[str, Any]],
    bounds: dict[str, Any],
    wanted: Callable[[dict[str, Any]], bool],
) -> None:
    filters = JobFilter(**bounds)
    found = await list_jobs(db, QUEUES, filters, per_page=100)
    # A range is read in its own time's order, newest first.
    implied = filters.implied_order()
    field = (
        OrderField.FINISHED_AT
        if "finished_from" in bounds or "finished_to" in bounds
        else OrderField.CREATED_AT
    )
    assert implied == JobOrder(field, Direction.DESC)
    matching = expected([r for r in spread if wanted(r)], implied)
    assert 0 < len(matching) < ROWS
    assert [v.id for v in found.items] == matching
    assert found.total == len(matching)


async def test_a_range_bound_equal_on_both_sides_is_empty_and_reversed_is_bad_input(
    db: Database, spread: list[dict[str, Any]]
) -> None:
    moment = T0 + timedelta(minutes=4)
    empty = await list_jobs(db, QUEUES, JobFilter(created_from=moment, created_to=moment))
    assert (empty.total, empty.items) == (0, [])
    for start, end in (("created_from", "created_to"), ("finished_from", "finished_to")):
        reversed_bounds: dict[str, Any] = {start: moment, end: moment - timedelta(seconds=1)}
        with pytest.raises(BadInput) as refused:
            await list_jobs(db, QUEUES, JobFilter(**reversed_bounds))
        assert refused.value.field == start


async def test_q_matches_context_values_not_keys(db: Database) -> None:
    ids = await insert_rows(
        db,
        [
            job(0, context={"cnpj": "11222333000181", "ano": 2024}),
            job(1, context={"razao": "Metalúrgica Aço Forte", "itens": [{"protocolo": "AB-77"}]}),
            job(2, context={"aviso": 'diz "sim"'}),
            job(3, context=None),
        ],
    )

    async def matching(q: str) -> list[int]:
        return [v.id for v in (await list_jobs(db, QUEUES, JobFilter(q=q))).items]

    assert await matching("22233300") == [ids[0]]
    assert await matching("2024") == [ids[0]]
    assert await matching("metalurgica aco") == [ids[1]]
    assert await matching("ab-77") == [ids[1]]
    assert await matching('"sim"') == [ids[2]]
    assert await matching("cnpj") == []
    assert await matching("protocolo") == []


async def test_finished_range_totals_from_the_hour_counters(db: Database) -> None:
    """The total of a list bounded by finish time (alone or with status and queue) is read off
    the counters of whole hours plus the rows of the hours its ends cut: equal to a count for
    bounds inside an hour, on an hour, one-sided and across days; the page follows finish time."""
    rng = random.Random(17)
    rows = []
    for n in range(240):
        created = T0 + timedelta(minutes=rng.randrange(3 * 24 * 60))
        row = job(n, created_at=created, updated_at=created, queue=rng.choice(list(QUEUES)))
        if n % 5:
            # Some on the hour exactly: the first instant of a slot.
            end = created.replace(minute=0, second=0, microsecond=0) if n % 7 == 0 else created
            row.update(
                status=rng.choice(["CONCLUIDO", "FALHA", "CANCELADO"]), data_fim=end + timedelta(hours=1)
            )
        rows.append(row)
    ids = await insert_rows(db, rows)
    spread = [{**row, "id": job_id} for row, job_id in zip(rows, ids, strict=True)]
    hour = timedelta(hours=1)
    start = T0.replace(minute=0, second=0, microsecond=0)
    bounds: list[dict[str, Any]] = [
        {
            "finished_from": start + 5 * hour + timedelta(minutes=17),
            "finished_to": start + 50 * hour + timedelta(seconds=3),
        },
        {"finished_from": start + 7 * hour, "finished_to": start + 30 * hour},
        {
            "finished_from": start + 9 * hour + timedelta(minutes=1),
            "finished_to": start + 9 * hour + timedelta(minutes=40),
        },
        # Ends near the far side of the hours they cut (those hours counted from that side).
        {
            "finished_from": start + 12 * hour + timedelta(minutes=45),
            "finished_to": start + 30 * hour + timedelta(minutes=50),
        },
        {
            "finished_from": start + 12 * hour + timedelta(minutes=45),
            "finished_to": start + 13 * hour + timedelta(minutes=50),
        },
        {"finished_from": start + 20 * hour + timedelta(minutes=59)},
        {"finished_from": start + 20 * hour + timedelta(minutes=1)},
        {"finished_to": start + 40 * hour + timedelta(minutes=2)},
        {"finished_to": start + 40 * hour + timedelta(minutes=58)},
        {"finished_from": start + 11 * hour, "finished_to": start + 11 * hour},
    ]
    for bound in bounds:
        narrowings: list[dict[str, Any]] = [{}, {"status": "FALHA"}, {"queue": "scan", "status": "CONCLUIDO"}]
        for narrowed in narrowings:
            filters = JobFilter(**bound, **narrowed)
            assert filters.total_source == "finished"

            def wanted(
                r: dict[str, Any], bound: dict[str, Any] = bound, narrowed: dict[str, Any] = narrowed
            ) -> bool:
                end = r.get("data_fim")
                return (
                    end is not None
                    and end >= bound.get("finished_from", end)
                    and ("finished_to" not in bound or end < bound["finished_to"])
                    and all(r[name] == value for name, value in narrowed.items())
                )

            matching = expected([r for r in spread if wanted(r)], JobOrder(OrderField.FINISHED_AT))
            found = await list_page(db, QUEUES, filters, 1, 10, views_of, documents=False)
            assert found.total == len(matching), (bound, narrowed)
            assert [v.id for v in found.items] == matching[:10]
            # The same rows, counted when another filter (a client) leaves the counters out.
            counted = JobFilter(**bound, **narrowed, cliente_id=1)
            assert counted.total_source == "counted"
