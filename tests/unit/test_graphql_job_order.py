"""``workers(orderBy:)`` and the time ranges of ``WorkerFilter`` through GraphQL: numbered pages
and cursor slices agree in every order, cursors belong to their order, bad bounds name the field."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert

from tests.unit.graphql_support import Api, code, make_api
from worker_automation.models import Job
from worker_automation.resolvers.services import Services

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
LIST = """query($f: WorkerFilter, $o: WorkerOrder, $first: Int, $after: String, $perPage: Int! = 100) {
  workers(filter: $f, orderBy: $o, first: $first, after: $after, perPage: $perPage) {
    total items { id priority createdAt dataFim }
    pageInfo { endCursor hasNextPage }
  }
}"""
ORDERS = [
    {"field": field, "direction": direction}
    for field in ("CREATED_AT", "FINISHED_AT", "DURATION", "PRIORITY")
    for direction in ("ASC", "DESC")
]


@pytest.fixture
async def api(embedded_broker_services: Services) -> Api:
    built = await make_api(embedded_broker_services)
    rows: list[dict[str, Any]] = []
    for i in range(11):
        created = T0 + timedelta(minutes=(i * 5) % 11)
        finished = i % 3 != 0
        rows.append(
            {
                "task_id": f"order-{i}",
                "status": "CONCLUIDO" if finished else "AGENDADO",
                "automation_type": "demo.echo",
                "queue": "certidao",
                "priority": i % 4,
                "retry_count": 0,
                "progress": 0,
                "created_at": created,
                "updated_at": created,
                "data_inicio": created if finished else None,
                "data_fim": created + timedelta(seconds=(i * 7) % 5 + 1) if finished else None,
            }
        )
    async with built.services.db.session() as session:
        await session.execute(insert(Job), rows)
    return built


async def walk(api: Api, order: dict[str, str], first: int) -> list[int]:
    seen: list[int] = []
    after = None
    for _ in range(50):
        page = (await api.ok(LIST, {"o": order, "first": first, "after": after}))["workers"]
        seen += [int(item["id"]) for item in page["items"]]
        if not page["pageInfo"]["hasNextPage"]:
            return seen
        after = page["pageInfo"]["endCursor"]
    raise AssertionError("the walk never ended")


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: f"{o['field']}-{o['direction']}")
async def test_slices_walk_the_numbered_pages_of_every_order(api: Api, order: dict[str, str]) -> None:
    paged = (await api.ok(LIST, {"o": order}))["workers"]
    ids = [int(item["id"]) for item in paged["items"]]
    assert len(ids) == paged["total"] == 11
    assert await walk(api, order, 3) == ids
    if order["field"] in ("FINISHED_AT", "DURATION"):
        # Unfinished jobs come last whichever the direction.
        assert [item["dataFim"] is None for item in paged["items"]][-4:] == [True] * 4
    if order["field"] == "PRIORITY":
        priorities = [item["priority"] for item in paged["items"]]
        assert priorities == sorted(priorities, reverse=order["direction"] == "DESC")


async def test_the_default_order_is_newest_first_by_id(api: Api) -> None:
    plain = (await api.ok(LIST))["workers"]["items"]
    ids = [int(item["id"]) for item in plain]
    assert ids == sorted(ids, reverse=True)


async def test_a_cursor_of_another_order_is_bad_user_input(api: Api) -> None:
    page = (await api.ok(LIST, {"o": {"field": "PRIORITY"}, "first": 2}))["workers"]
    for other in (None, {"field": "PRIORITY", "direction": "ASC"}, {"field": "CREATED_AT"}):
        error = await api.fails(LIST, {"o": other, "first": 2, "after": page["pageInfo"]["endCursor"]})
        assert code(error) == "BAD_USER_INPUT"
        assert (error.extensions or {}).get("field") == "after", error.formatted
    newest = (await api.ok(LIST, {"first": 2}))["workers"]["pageInfo"]["endCursor"]
    error = await api.fails(LIST, {"o": {"field": "DURATION"}, "first": 2, "after": newest})
    assert code(error) == "BAD_USER_INPUT"


async def test_created_range_with_and_without_an_offset(api: Api) -> None:
    bounds = {"createdFrom": "2026-03-02T12:03:00+00:00", "createdTo": "2026-03-02T09:07:00"}  # -03:00 zone
    page = (await api.ok(LIST, {"f": bounds}))["workers"]
    created = sorted(
        datetime.fromisoformat(item["createdAt"]).astimezone(UTC).minute for item in page["items"]
    )
    assert created == [3, 4, 5, 6]


async def test_a_from_after_its_to_names_the_field(api: Api) -> None:
    for start, end in (("createdFrom", "createdTo"), ("finishedFrom", "finishedTo")):
        bounds = {start: "2026-03-02T12:05:00+00:00", end: "2026-03-02T12:04:00+00:00"}
        error = await api.fails(LIST, {"f": bounds})
        assert code(error) == "BAD_USER_INPUT"
        assert (error.extensions or {}).get("field") in (start, start.replace("F", "_f")), error.formatted


async def test_bulk_actions_take_the_time_ranges(api: Api) -> None:
    bounds = '{status: AGENDADO, createdTo: "2026-03-02T12:05:00+00:00"}'
    listed = (await api.ok(f"{{ workers(filter: {bounds}) {{ total }} }}"))["workers"]["total"]
    done = (await api.ok(f"mutation {{ cancelWorkers(filter: {bounds}) {{ matched changed }} }}"))[
        "cancelWorkers"
    ]
    assert listed == done["matched"] == done["changed"] == 3
    left = (await api.ok("{ workers(filter: {status: AGENDADO}) { total } }"))["workers"]["total"]
    assert left == 1


async def test_an_instant_keeps_its_fraction_of_a_second(api: Api) -> None:
    # The row created at 12:03:00 is before 12:03:00.5: a bound is not rounded to the second.
    bounds = {"createdFrom": "2026-03-02T12:03:00.5+00:00", "createdTo": "2026-03-02T12:07:00+00:00"}
    page = (await api.ok(LIST, {"f": bounds}))["workers"]
    created = sorted(
        datetime.fromisoformat(item["createdAt"]).astimezone(UTC).minute for item in page["items"]
    )
    assert created == [4, 5, 6]


# Not instants, and instants past what a range can hold (years 1900-8999), with and without offset.
BAD_INSTANTS = ("yesterday", "2026-13-45", "9999-12-31T23:59:59", "0001-01-01T00:00:00+14:00", "1899-12-31")


@pytest.mark.parametrize("text", BAD_INSTANTS)
async def test_a_bad_instant_is_bad_user_input_naming_its_argument(
    api: Api, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    cases = [
        (LIST, {"f": {"finishedTo": text}}, "filter.finishedTo"),
        (LIST, {"f": {"createdFrom": text}}, "filter.createdFrom"),
        (f'{{ workers(filter: {{createdTo: "{text}"}}) {{ total }} }}', None, "filter.createdTo"),
        (
            f'mutation {{ cancelWorkers(filter: {{finishedFrom: "{text}"}}) {{ matched }} }}',
            None,
            "filter.finishedFrom",
        ),
        ("query($s: DateTime) { durations(since: $s) { count } }", {"s": text}, "since"),
        (f'{{ throughput(since: "{text}") {{ completed }} }}', None, "since"),
        ("query($s: DateTime) { auditLog(filter: {since: $s}) { total } }", {"s": text}, "filter.since"),
    ]
    total = (await api.ok("{ workers { total } }"))["workers"]["total"]
    for query, variables, field in cases:
        error = await api.fails(query, variables)
        assert code(error) == "BAD_USER_INPUT", error.formatted
        assert (error.extensions or {}).get("field") == field, error.formatted
        assert field in error.message, error.formatted
    # Nothing was cancelled, and a caller's mistake is no error of the service's.
    assert (await api.ok("{ workers { total } }"))["workers"]["total"] == total
    assert (await api.ok("{ workers(filter: {status: CANCELADO}) { total } }"))["workers"]["total"] == 0
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
