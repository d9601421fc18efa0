"""Every legal transition through the REST actions, and every illegal one refused with 409.

The broker follows the database: a retried, moved or reordered job has a new message on its
queue (at its priority), and a refused action sends nothing and changes no row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.integration.rest_support import (
    BASE,
    Api,
    add_job,
    assert_error,
    assert_success,
    running_api,
    snapshot,
)
from tests.support.settings import MakeSettings
from worker_automation.broker.queues import priority_keys

pytestmark = pytest.mark.services


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    async with running_api(make_settings(pg_database_url, redis_url)) as running:
        yield running


async def detail(api: Api, job_id: int) -> dict[str, Any]:
    response = await api.call("GET", f"{BASE}/{job_id}")
    return dict(response.json()["data"])


async def test_cancel(api: Api) -> None:
    for status in ("AGENDADO", "EXECUTANDO"):
        await check_cancel(api, status)


async def check_cancel(api: Api, status: str) -> None:
    job_id = await add_job(api.db, status)
    before = await api.services.broker.queue_lengths()
    data = assert_success(await api.call("POST", f"{BASE}/{job_id}/cancel"), "Task cancelada com sucesso")
    assert data["status"] == "CANCELADO" and data["data_fim"] is not None
    assert await detail(api, job_id) == data
    # Cancelling revokes; it never sends a new message.
    assert await api.services.broker.queue_lengths() == before


async def test_retry(api: Api) -> None:
    for status in ("FALHA", "CANCELADO"):
        await check_retry(api, status)


async def check_retry(api: Api, status: str) -> None:
    job_id = await add_job(
        api.db,
        status,
        queue="scraping",
        automation_type="simples_nacional",
        retry_count=1,
        metadata_json={"progress_message": "Consultando o portal", "origem": "painel"},
    )
    old = await detail(api, job_id)
    before = await api.services.broker.queue_lengths()
    data = assert_success(await api.call("POST", f"{BASE}/{job_id}/retry"), "Task re-enfileirada com sucesso")
    assert data["status"] == "AGENDADO" and data["retry_count"] == 2
    assert data["task_id"] and data["task_id"] != old["task_id"]
    assert (data["data_inicio"], data["data_fim"], data["mensagem_erro"], data["progress"]) == (
        None,
        None,
        None,
        0,
    )
    # The last run's progress message goes with it; other metadata stays.
    assert data["metadata_json"] == {"origem": "painel"}
    after = await api.services.broker.queue_lengths()
    assert after["scraping"] == before["scraping"] + 1
    retried = (await api.call("GET", f"{BASE}/status/{data['task_id']}")).json()["data"]
    assert retried["status"] == "PENDING"


async def test_move(api: Api) -> None:
    for status in ("AGENDADO", "EXECUTANDO"):
        await check_move(api, status)


async def check_move(api: Api, status: str) -> None:
    job_id = await add_job(api.db, status, queue="certidao", metadata_json={"progress_message": "Emitindo"})
    old = await detail(api, job_id)
    before = await api.services.broker.queue_lengths()
    response = await api.call("POST", f"{BASE}/{job_id}/move", json={"target_queue": "scraping"})
    data = assert_success(response, "Worker migrado de fila com sucesso")
    assert (data["queue"], data["status"], data["progress"]) == ("scraping", "AGENDADO", 0)
    assert data["metadata_json"] is None
    assert data["task_id"] != old["task_id"]
    after = await api.services.broker.queue_lengths()
    assert after["scraping"] == before["scraping"] + 1
    assert after["certidao"] == before["certidao"]


async def test_reorder(api: Api, redis_url: str) -> None:
    job_id = await add_job(api.db, "AGENDADO", queue="ui_automation", automation_type="ui_emissao_guia_das")
    old = await detail(api, job_id)
    response = await api.call("POST", f"{BASE}/{job_id}/reorder", json={"new_priority": 7})
    data = assert_success(response, "Prioridade alterada com sucesso")
    assert (data["priority"], data["status"], data["queue"]) == (7, "AGENDADO", "ui_automation")
    assert data["task_id"] != old["task_id"]
    client = aioredis.Redis.from_url(redis_url)
    # The new message waits in the list of priority 7, where workers will take it last.
    assert await client.llen(priority_keys("ui_automation")[7]) == 1
    await client.aclose()
    assert (await api.services.broker.queue_lengths())["ui_automation"] == 1
    # The priority it already has changes nothing: the same task, no second message.
    again = assert_success(
        await api.call("POST", f"{BASE}/{job_id}/reorder", json={"new_priority": 7}),
        "Prioridade alterada com sucesso",
    )
    assert (again["priority"], again["task_id"]) == (7, data["task_id"])
    assert (await api.services.broker.queue_lengths())["ui_automation"] == 1


async def test_chain_cancel_retry_reorder_move(api: Api) -> None:
    """A job can go round the cycle: cancel, retry, reorder, move, cancel again."""
    job_id = await add_job(api.db, "EXECUTANDO")
    steps: list[tuple[str, Any, str]] = [
        ("cancel", None, "CANCELADO"),
        ("retry", None, "AGENDADO"),
        ("reorder", {"new_priority": 3}, "AGENDADO"),
        ("move", {"target_queue": "observer"}, "AGENDADO"),
        ("cancel", None, "CANCELADO"),
        ("retry", None, "AGENDADO"),
    ]
    for action, body, expected in steps:
        response = await api.call("POST", f"{BASE}/{job_id}/{action}", json=body)
        assert response.status_code == 200, (action, response.text)
        assert response.json()["data"]["status"] == expected
    final = await detail(api, job_id)
    assert (final["retry_count"], final["priority"], final["queue"]) == (2, 3, "observer")


ILLEGAL: dict[str, tuple[list[str], Any]] = {
    "cancel": (["CONCLUIDO", "FALHA", "CANCELADO"], None),
    "retry": (["CONCLUIDO", "AGENDADO", "EXECUTANDO"], None),
    "move": (["CONCLUIDO", "FALHA", "CANCELADO"], {"target_queue": "scraping"}),
    "reorder": (["EXECUTANDO", "CONCLUIDO", "FALHA", "CANCELADO"], {"new_priority": 4}),
}


@pytest.mark.parametrize("action", list(ILLEGAL))
async def test_illegal_transitions_are_refused(api: Api, action: str) -> None:
    statuses, body = ILLEGAL[action]
    ids = {status: await add_job(api.db, status) for status in statuses}
    rows_before = await snapshot(api.db)
    broker_before = await api.services.broker.queue_lengths()
    for status, job_id in ids.items():
        response = await api.call("POST", f"{BASE}/{job_id}/{action}", json=body)
        refused = assert_error(response, 409)
        # The message says what the status is, so the operator knows why.
        assert status in refused["message"], refused
    assert await snapshot(api.db) == rows_before
    assert await api.services.broker.queue_lengths() == broker_before


async def test_move_to_same_queue_is_refused(api: Api) -> None:
    job_id = await add_job(api.db, "AGENDADO", queue="certidao")
    before = await snapshot(api.db)
    response = await api.call("POST", f"{BASE}/{job_id}/move", json={"target_queue": "certidao"})
    assert_error(response, 422, "target_queue")
    assert await snapshot(api.db) == before
