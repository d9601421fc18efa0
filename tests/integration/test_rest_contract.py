"""Each documented route answers with the seed's envelope, message, keys and types."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.integration.rest_support import (
    BASE,
    REST_ITEM_KEYS,
    Api,
    add_cliente,
    add_job,
    assert_error,
    assert_success,
    running_api,
)
from tests.support.settings import MakeSettings
from worker_automation.broker.queues import priority_keys
from worker_automation.process.seed import seed_demo
from worker_automation.resolvers.maintenance import PURGED_MESSAGE

pytestmark = pytest.mark.services

STATUSES = {"AGENDADO", "EXECUTANDO", "CONCLUIDO", "FALHA", "CANCELADO"}
QUEUES = {"certidao", "scraping", "scan", "observer", "ui_automation"}
PAGE_KEYS = {"items", "total", "page", "per_page", "pages"}
QUEUE_KEYS = [
    "queue_name",
    "workers_count",
    "active_tasks",
    "pending_tasks",
    "active_count",
    "pending_count",
    "capacity",
    "load_percent",
]
SUMMARY_KEYS = {"total_active", "total_pending", "total_completed_today", "total_errors_today"}


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    settings = make_settings(pg_database_url, redis_url, inspect_timeout_seconds=0.3)
    async with running_api(settings) as running:
        yield running


@pytest.fixture
async def rows(api: Api) -> dict[str, int]:
    """The seed's own examples: one running CNDT, one queued Simples Nacional, and ended jobs."""
    comercio = await add_cliente(api.db, "Comércio de Alimentos Ltda")
    horizonte = await add_cliente(api.db, "Transportadora Horizonte ME")
    return {
        "running": await add_job(api.db, "EXECUTANDO", cliente_id=comercio),
        "queued": await add_job(
            api.db, "AGENDADO", cliente_id=horizonte, automation_type="simples_nacional", queue="scraping"
        ),
        "done": await add_job(api.db, "CONCLUIDO", cliente_id=comercio),
        "failed": await add_job(api.db, "FALHA", cliente_id=horizonte),
        "cancelled": await add_job(api.db, "CANCELADO", cliente_id=None),
    }


def assert_item(item: dict[str, Any]) -> None:
    """The 17 keys of the documented item, with their JSON types."""
    assert set(item) == REST_ITEM_KEYS
    assert isinstance(item["id"], int)
    assert item["status"] in STATUSES
    for key in ("priority", "retry_count", "progress"):
        assert isinstance(item[key], int)
    for key in ("automation_type", "queue", "display_name"):
        assert isinstance(item[key], str)
    for key in ("task_id", "path_file", "mensagem_erro", "client_name", "data_inicio", "data_fim"):
        assert item[key] is None or isinstance(item[key], str)
    if item["data_inicio"]:
        # ISO 8601 with the offset of America/Sao_Paulo.
        assert item["data_inicio"].endswith("-03:00")


def assert_page(data: dict[str, Any], per_page: int) -> None:
    assert set(data) == PAGE_KEYS
    assert data["per_page"] == per_page
    assert data["pages"] == -(-data["total"] // per_page)
    for item in data["items"]:
        assert_item(item)


async def test_list(api: Api, rows: dict[str, int]) -> None:
    data = assert_success(await api.call("GET", f"{BASE}/"), "Workers recuperados com sucesso")
    assert_page(data, 20)
    assert data["total"] == 5 and data["page"] == 1
    running = next(i for i in data["items"] if i["id"] == rows["running"])
    assert running["display_name"] == "Certidão Trabalhista (CNDT)"
    assert running["client_name"] == "Comércio de Alimentos Ltda"
    bare = assert_success(await api.call("GET", BASE), "Workers recuperados com sucesso")
    assert bare == data


LIST_FILTERS: list[tuple[str, set[str]]] = [
    ("status=EXECUTANDO", {"running"}),
    ("status=executando", {"running"}),
    ("queue=scraping", {"queued"}),
    ("automation_type=simples_nacional", {"queued"}),
    ("q=Horizonte", {"queued", "failed"}),
    ("q=trabalhista", {"running", "done", "failed", "cancelled"}),
    ("status=FALHA&q=portal", {"failed"}),
]


async def test_list_filters(api: Api, rows: dict[str, int]) -> None:
    for query, expected in LIST_FILTERS:
        data = assert_success(await api.call("GET", f"{BASE}/?{query}"), "Workers recuperados com sucesso")
        assert {i["id"] for i in data["items"]} == {rows[name] for name in expected}, query


async def test_list_id_filters_and_pages(api: Api, rows: dict[str, int]) -> None:
    job = (await api.call("GET", f"{BASE}/{rows['done']}")).json()["data"]
    by_task = assert_success(
        await api.call("GET", f"{BASE}/?task_id={job['task_id']}"), "Workers recuperados com sucesso"
    )
    assert [i["id"] for i in by_task["items"]] == [rows["done"]]
    by_client = (await api.call("GET", f"{BASE}/?cliente_id={job['cliente_id']}")).json()["data"]
    assert {i["id"] for i in by_client["items"]} == {rows["running"], rows["done"]}
    assert (await api.call("GET", f"{BASE}/?usuario_id=7")).json()["data"]["total"] == 0
    page = assert_success(
        await api.call("GET", f"{BASE}/?page=2&per_page=2"), "Workers recuperados com sucesso"
    )
    assert (page["total"], page["page"], page["per_page"], page["pages"], len(page["items"])) == (
        5,
        2,
        2,
        3,
        2,
    )
    most = (await api.call("GET", f"{BASE}/?per_page=100")).json()["data"]
    assert most["per_page"] == 100
    over = await api.call("GET", f"{BASE}/?per_page=101")
    assert over.status_code == 422 and over.json()["data"] == {"field": "per_page"}


async def test_stats(api: Api, rows: dict[str, int]) -> None:
    await seed_demo(api.db, jobs=40, clientes=5, seed=7)
    data = assert_success(await api.call("GET", f"{BASE}/stats"), "Estatisticas recuperadas com sucesso")
    assert set(data) == {"total", "by_status", "by_queue"}
    assert set(data["by_status"]) == STATUSES and set(data["by_queue"]) == QUEUES
    assert data["total"] == 45 == sum(data["by_status"].values()) == sum(data["by_queue"].values())


async def test_active(api: Api, rows: dict[str, int]) -> None:
    data = assert_success(await api.call("GET", f"{BASE}/active"), "Workers ativos recuperados com sucesso")
    assert isinstance(data, list) and [i["id"] for i in data] == [rows["running"]]
    assert_item(data[0])
    assert data[0]["status"] == "EXECUTANDO" and data[0]["progress"] == 45


async def test_queued(api: Api, rows: dict[str, int]) -> None:
    urgent = await add_job(api.db, "AGENDADO", queue="certidao", priority=0)
    await api.call("POST", f"{BASE}/{rows['queued']}/reorder", json={"new_priority": 5})
    data = assert_success(await api.call("GET", f"{BASE}/queued"), "Workers na fila recuperados com sucesso")
    assert_page(data, 10)
    assert [i["id"] for i in data["items"]] == [urgent, rows["queued"]]
    only = (await api.call("GET", f"{BASE}/queued?queue=scraping&per_page=1")).json()["data"]
    assert [i["id"] for i in only["items"]] == [rows["queued"]] and only["per_page"] == 1
    assert only["items"][0]["client_name"] == "Transportadora Horizonte ME"


async def test_search_automations(api: Api) -> None:
    response = await api.call("GET", f"{BASE}/search-automations?q=certidao trabalhista")
    body = response.json()
    results = body["data"]["results"]
    assert body["message"] == f"{len(results)} automacao(oes) encontrada(s)"
    assert_success(response, body["message"])
    assert results[0]["key"] == "certidao_trabalhista"
    assert set(results[0]) == {"key", "display_name", "category", "queue", "requires_selenium", "score"}
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True) and min(scores) >= 60
    catalogue = (await api.call("GET", f"{BASE}/search-automations")).json()
    assert catalogue["message"] == f"{catalogue['data']['total']} automacao(oes) encontrada(s)"
    assert "Certidões" in catalogue["data"]["by_category"]
    none = (await api.call("GET", f"{BASE}/search-automations?q=zzzzqqqq")).json()
    assert none["message"] == "0 automacao(oes) encontrada(s)" and none["data"] == {"results": []}


async def test_queue_live_status(api: Api, rows: dict[str, int]) -> None:
    data = assert_success(
        await api.call("GET", f"{BASE}/queue-live-status"), "Status das filas recuperado com sucesso"
    )
    assert set(data) == {"queues", "summary"}
    assert [q["queue_name"] for q in data["queues"]] == list(QUEUES_ORDER)
    certidao = data["queues"][0]
    assert list(certidao) == QUEUE_KEYS
    assert (certidao["active_count"], certidao["capacity"], certidao["load_percent"]) == (1, 2, 50.0)
    assert [t["id"] for t in certidao["active_tasks"]] == [rows["running"]]
    assert_item(certidao["active_tasks"][0])
    assert set(data["summary"]) == SUMMARY_KEYS
    assert (data["summary"]["total_active"], data["summary"]["total_pending"]) == (1, 1)
    assert data["summary"]["total_completed_today"] == 1 and data["summary"]["total_errors_today"] == 1


QUEUES_ORDER = ("certidao", "scraping", "scan", "observer", "ui_automation")


async def test_broker_status(api: Api, redis_url: str) -> None:
    client = aioredis.Redis.from_url(redis_url)
    await client.rpush("certidao", "m1", "m2")
    await client.rpush(priority_keys("certidao")[3], "m3")
    await client.aclose()
    data = assert_success(
        await api.call("GET", f"{BASE}/broker-status"), "Snapshot do broker recuperado com sucesso"
    )
    assert data == {
        "available": True,
        "queues": {"certidao": 3, "scraping": 0, "scan": 0, "observer": 0, "ui_automation": 0},
    }


async def test_workers_inspect(api: Api) -> None:
    data = assert_success(await api.call("GET", f"{BASE}/workers-inspect"), "Inspect recuperado com sucesso")
    assert list(data) == ["active", "reserved", "scheduled", "stats", "ping", "available"]
    assert isinstance(data["available"], bool)
    assert all(isinstance(data[s], dict) for s in ("active", "reserved", "scheduled", "stats", "ping"))


async def test_task_status(api: Api, rows: dict[str, int], redis_url: str) -> None:
    done = (await api.call("GET", f"{BASE}/{rows['done']}")).json()["data"]
    data = assert_success(
        await api.call("GET", f"{BASE}/status/{done['task_id']}"), "Status da task recuperado com sucesso"
    )
    assert data["task_id"] == done["task_id"]
    assert data["status"] == data["state"] == "SUCCESS"
    assert data["result"] == {"certidao_id": 1234}
    running = (await api.call("GET", f"{BASE}/{rows['running']}")).json()["data"]
    started = (await api.call("GET", f"{BASE}/status/{running['task_id']}")).json()["data"]
    assert (started["status"], started["result"]) == ("STARTED", None)
    # A task with no row: answered from the Celery result backend.
    client = aioredis.Redis.from_url(redis_url)
    meta = {"status": "SUCCESS", "result": {"url_pdf": "/x.pdf"}, "traceback": None, "task_id": "ext-1"}
    await client.set("celery-task-meta-ext-1", json.dumps(meta))
    await client.aclose()
    external = (await api.call("GET", f"{BASE}/status/ext-1")).json()["data"]
    assert (external["status"], external["result"]) == ("SUCCESS", {"url_pdf": "/x.pdf"})
    missing = assert_error(await api.call("GET", f"{BASE}/status/no-such-task"), 404)
    assert missing["message"] == "Task nao encontrada."


async def test_dashboard(api: Api, rows: dict[str, int]) -> None:
    data = assert_success(await api.call("GET", f"{BASE}/dashboard"), "Dashboard recuperado com sucesso")
    assert list(data) == ["stats", "queues", "summary", "broker", "active", "queued", "history", "errors"]
    assert data["errors"] == {}
    assert data["stats"]["total"] == 5
    assert list(data["queues"][0]) == [k for k in QUEUE_KEYS if not k.endswith("_tasks")]
    assert set(data["summary"]) == SUMMARY_KEYS
    assert data["broker"]["available"] is True and set(data["broker"]["queues"]) == QUEUES
    assert [i["id"] for i in data["active"]] == [rows["running"]]
    assert_page(data["queued"], 10)
    assert {i["id"] for i in data["history"]} == {rows["done"], rows["failed"], rows["cancelled"]}
    for item in [*data["active"], *data["history"]]:
        assert_item(item)


async def test_job_detail(api: Api, rows: dict[str, int]) -> None:
    data = assert_success(await api.call("GET", f"{BASE}/{rows['running']}"), "Worker encontrado com sucesso")
    assert_item(data)
    assert (data["id"], data["status"], data["queue"], data["usuario_id"]) == (
        rows["running"],
        "EXECUTANDO",
        "certidao",
        42,
    )
    assert data["data_fim"] is None and data["client_name"] == "Comércio de Alimentos Ltda"
    missing = assert_error(await api.call("GET", f"{BASE}/999999"), 404)
    assert missing["message"] == "Worker nao encontrado."


ACTIONS: list[tuple[str, str, Any, str, str]] = [
    ("running", "cancel", None, "Task cancelada com sucesso", "CANCELADO"),
    ("failed", "retry", None, "Task re-enfileirada com sucesso", "AGENDADO"),
    ("queued", "move", {"target_queue": "certidao"}, "Worker migrado de fila com sucesso", "AGENDADO"),
    ("queued", "reorder", {"new_priority": 1}, "Prioridade alterada com sucesso", "AGENDADO"),
]


async def test_actions(api: Api, rows: dict[str, int]) -> None:
    for source, action, body, message, status in ACTIONS:
        response = await api.call("POST", f"{BASE}/{rows[source]}/{action}", json=body)
        data = assert_success(response, message)
        assert_item(data)
        assert data["id"] == rows[source] and data["status"] == status


async def test_clear_queue(api: Api, rows: dict[str, int]) -> None:
    data = assert_success(
        await api.call("POST", f"{BASE}/clear-queue?scope=all"), "2 worker(s) cancelado(s) com sucesso"
    )
    assert data == {"cancelled": 2, "scope": "all"}
    again = assert_success(
        await api.call("POST", f"{BASE}/clear-queue?scope=queued&queue=scan"),
        "0 worker(s) cancelado(s) com sucesso",
    )
    assert again == {"cancelled": 0, "scope": "queued"}


async def test_purge_queue(api: Api, redis_url: str) -> None:
    client = aioredis.Redis.from_url(redis_url)
    await client.rpush("scraping", "m1")
    await client.rpush(priority_keys("scraping")[9], "m2")
    broker = api.services.broker
    purged = await add_job(api.db, "AGENDADO", queue="scraping")
    kept = {
        "elsewhere": await add_job(api.db, "AGENDADO", queue="scan"),
        "without message": await add_job(api.db, "AGENDADO", queue="scraping"),
        "running": await add_job(api.db, "EXECUTANDO", queue="scraping"),
    }
    for job_id in (purged, kept["elsewhere"], kept["running"]):
        row = (await api.call("GET", f"{BASE}/{job_id}")).json()["data"]
        await broker.send("probe.echo", queue=row["queue"], priority=4, args=[], task_id=row["task_id"])

    response = await api.call("POST", f"{BASE}/broker/purge-queue/scraping?confirm=true")
    data = assert_success(response, "Fila 'scraping' purgada no broker")
    assert data == {"queue_name": "scraping", "redis_keys_deleted": 3}
    assert await client.exists(*priority_keys("scraping")) == 0
    assert await broker.queue_lengths() == {**dict.fromkeys(QUEUES, 0), "scan": 1}
    # The queued job whose message went with the lists will not run: it is cancelled, and says why.
    ended = (await api.call("GET", f"{BASE}/{purged}")).json()["data"]
    assert (ended["status"], ended["mensagem_erro"]) == ("CANCELADO", PURGED_MESSAGE)
    for what, job_id in kept.items():
        row = (await api.call("GET", f"{BASE}/{job_id}")).json()["data"]
        assert row["status"] == ("EXECUTANDO" if what == "running" else "AGENDADO"), what
    await client.aclose()


async def test_cleanup_no_client(api: Api, rows: dict[str, int]) -> None:
    await add_job(api.db, "AGENDADO", cliente_id=None)
    await add_job(api.db, "EXECUTANDO", cliente_id=424242)
    await add_job(api.db, "CONCLUIDO", cliente_id=None)
    response = await api.call("DELETE", f"{BASE}/cleanup-no-client")
    assert assert_success(response, "2 worker(s) sem cliente removido(s) do banco") == {"deleted": 2}


async def test_sync_orphans(api: Api, rows: dict[str, int]) -> None:
    await add_job(api.db, "AGENDADO", task_id=None)
    response = await api.call("POST", f"{BASE}/sync-orphans")
    data = assert_success(response, "1 worker(s) orfao(s) detectado(s) e cancelado(s)")
    assert data == {"orphans_found": 1, "total_checked": 3}


async def test_unknown_route_and_method(api: Api) -> None:
    assert_error(await api.call("GET", f"{BASE}/1/unknown"), 404)
    assert_error(await api.call("GET", "/api/v1/nothing-here"), 404)
    wrong = await api.call("PUT", f"{BASE}/stats")
    assert_error(wrong, 405)
    assert "GET" in wrong.headers["allow"]
    assert_error(await api.call("GET", f"{BASE}/1/cancel"), 405)
    assert_error(await api.call("DELETE", f"{BASE}/1"), 405)
