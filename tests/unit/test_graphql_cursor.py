"""Cursor (keyset) pagination of the GraphQL job list, on SQLite and PostgreSQL: the same jobs as
the numbered pages, stable while jobs are created, the same filters, and clear errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, update

from tests.unit.graphql_support import Api, code, make_api
from worker_automation.models import Job
from worker_automation.resolvers.job_views import JobView
from worker_automation.resolvers.pagination import cursor_of
from worker_automation.resolvers.services import Services
from worker_automation.schema.types import Job as JobType

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SLICE = """query($f: WorkerFilter, $first: Int, $after: String) {
  workers(filter: $f, first: $first, after: $after) {
    total page perPage items { id queue status }
    pageInfo { startCursor endCursor hasNextPage hasPreviousPage }
  }
}"""


@pytest.fixture
async def api(embedded_broker_services: Services) -> Api:
    return await make_api(embedded_broker_services)


async def add_jobs(api: Api, count: int, *, start: int = 0) -> None:
    rows: list[dict[str, Any]] = [
        {
            "task_id": f"cursor-{start + i}",
            "status": "CONCLUIDO" if i % 3 else "FALHA",
            "automation_type": "demo.echo",
            "queue": "scan" if i % 2 else "certidao",
            "priority": 0,
            "retry_count": 0,
            "progress": 0,
            "created_at": T0 + timedelta(seconds=start + i),
            "updated_at": T0 + timedelta(seconds=start + i),
        }
        for i in range(count)
    ]
    async with api.services.db.session() as session:
        await session.execute(insert(Job), rows)


async def walk(api: Api, first: int, filters: dict[str, Any] | None = None) -> list[int]:
    """Every job id, slice after slice, following endCursor until hasNextPage is false."""
    seen: list[int] = []
    after = None
    for _ in range(100):
        page = (await api.ok(SLICE, {"f": filters, "first": first, "after": after}))["workers"]
        seen += [int(item["id"]) for item in page["items"]]
        assert page["pageInfo"]["hasPreviousPage"] is (after is not None)
        if not page["pageInfo"]["hasNextPage"]:
            return seen
        after = page["pageInfo"]["endCursor"]
        assert after == cursor_of(seen[-1])
    raise AssertionError("the walk never ended")


async def test_slices_walk_the_same_jobs_as_the_numbered_pages(api: Api) -> None:
    await add_jobs(api, 23)
    filters = {"queue": "scan", "status": "CONCLUIDO"}
    paged = await api.ok(
        "query($f: WorkerFilter) { workers(filter: $f, perPage: 100) { total items { id } } }",
        {"f": filters},
    )
    expected = [int(item["id"]) for item in paged["workers"]["items"]]
    assert len(expected) == paged["workers"]["total"] > 5
    assert await walk(api, 3, filters) == expected
    assert await walk(api, 100) == sorted(await walk(api, 4), reverse=True)
    first = (await api.ok(SLICE, {"f": filters, "first": 3}))["workers"]
    assert (first["total"], first["page"], first["perPage"]) == (len(expected), 0, 3)
    assert {(item["queue"], item["status"]) for item in first["items"]} == {("scan", "CONCLUIDO")}


async def test_a_walk_is_stable_while_jobs_are_created(api: Api) -> None:
    await add_jobs(api, 10)
    before = await walk(api, 100)
    first = (await api.ok(SLICE, {"first": 4}))["workers"]
    await add_jobs(api, 5, start=100)  # newer jobs arrive while the client reads on
    rest = (await api.ok(SLICE, {"first": 100, "after": first["pageInfo"]["endCursor"]}))["workers"]
    assert [int(i["id"]) for i in first["items"] + rest["items"]] == before
    assert rest["pageInfo"]["hasNextPage"] is False and rest["total"] == 15


async def test_a_numbered_page_carries_the_cursor_of_the_next(api: Api) -> None:
    await add_jobs(api, 9)
    query = (
        "query($p: Int!) { workers(page: $p, perPage: 4) "
        "{ items { id } pageInfo { endCursor hasNextPage } } }"
    )
    one = (await api.ok(query, {"p": 1}))["workers"]
    two = (await api.ok(query, {"p": 2}))["workers"]
    after = (await api.ok(SLICE, {"first": 4, "after": one["pageInfo"]["endCursor"]}))["workers"]
    assert [i["id"] for i in after["items"]] == [i["id"] for i in two["items"]]
    assert one["pageInfo"]["hasNextPage"] is True
    assert (await api.ok(query, {"p": 3}))["workers"]["pageInfo"]["hasNextPage"] is False
    queued = await api.ok("{ queuedWorkers { pageInfo { endCursor hasNextPage } } }")
    assert queued["queuedWorkers"]["pageInfo"] == {"endCursor": None, "hasNextPage": False}


async def test_past_the_end_and_empty(api: Api) -> None:
    await add_jobs(api, 2)
    last = await walk(api, 1)
    page = (await api.ok(SLICE, {"first": 5, "after": cursor_of(last[-1])}))["workers"]
    assert page["items"] == [] and page["total"] == 2
    assert page["pageInfo"] == {
        "startCursor": None,
        "endCursor": None,
        "hasNextPage": False,
        "hasPreviousPage": True,
    }


@pytest.mark.parametrize(
    ("variables", "field"),
    [
        ({"after": "not-a-cursor"}, "after"),
        ({"after": cursor_of(5)[:-2] + "!!"}, "after"),
        ({"after": "d29ya2VyOi0x"}, "after"),  # "worker:-1"
        ({"after": "ZXZlbnQ6MTI"}, "after"),  # "event:12"
        ({"first": 0}, "first"),
        ({"first": -3}, "first"),
    ],
)
async def test_bad_cursor_arguments_name_the_field(api: Api, variables: dict[str, Any], field: str) -> None:
    error = await api.fails(SLICE, variables)
    assert code(error) == "BAD_USER_INPUT"
    assert (error.extensions or {}).get("field") == field, error.formatted


async def test_page_and_cursor_do_not_mix(api: Api) -> None:
    error = await api.fails('{ workers(page: 2, after: "d29ya2VyOjU") { total } }')
    assert code(error) == "BAD_USER_INPUT" and (error.extensions or {}).get("field") == "page"


def test_a_worker_from_a_view_matches_one_from_its_dict() -> None:
    from zoneinfo import ZoneInfo

    view = JobView(
        id=7, task_id="t-7", cliente_id=3, usuario_id=None, path_file=None, status="CONCLUIDO",
        data_inicio=T0, data_fim=T0 + timedelta(seconds=5), mensagem_erro=None,
        automation_type="demo.echo", queue="scan", priority=2, retry_count=1, progress=100,
        metadata_json={"message": "ok"}, display_name="Echo", client_name="ACME", context={"n": 1},
        result={"value": 2}, created_at=T0, updated_at=T0, machine_id=4,
    )  # fmt: skip
    tz = ZoneInfo("America/Sao_Paulo")
    assert JobType.from_view(view, tz) == JobType.from_dict(view.as_dict(tz))


async def test_the_json_documents_are_listed_when_selected_and_only_then(api: Api) -> None:
    await add_jobs(api, 4)
    async with api.services.db.session() as session:
        await session.execute(update(Job).values(context={"cnpj": "11222333000181"}, result={"ok": True}))
    fields = "id status createdAt metadataJson displayName"
    plain = f"{{ workers(perPage: 3) {{ items {{ {fields} }} }} }}"
    documents = (
        f"{{ workers(perPage: 3) {{ items {{ {fields} doc: context ...R }} }} }} "
        "fragment R on Worker { result }"
    )
    cursor = (
        f"{{ workers(first: 3) {{ items {{ {fields} ...F }} }} }} "
        "fragment F on Worker { ... on Worker { context } ...G } fragment G on Worker { result }"
    )
    without = (await api.ok(plain))["workers"]["items"]
    paged = (await api.ok(documents))["workers"]["items"]
    sliced = (await api.ok(cursor))["workers"]["items"]
    assert [{k: v for k, v in item.items() if k in fields.split()} for item in paged] == without
    assert [{k: v for k, v in item.items() if k in fields.split()} for item in sliced] == without
    assert all(item["doc"] == {"cnpj": "11222333000181"} and item["result"] == {"ok": True} for item in paged)
    assert all(item["context"] == {"cnpj": "11222333000181"} for item in sliced)
    assert all(item["result"] == {"ok": True} for item in sliced)
