"""Bad input gets a clear 4xx naming the field, in the error envelope, and changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.integration.rest_support import (
    BASE,
    Api,
    add_job,
    assert_error,
    running_api,
    snapshot,
)
from tests.support.settings import MakeSettings

pytestmark = pytest.mark.services

# (method, path with {q} for a queued job's id, request kwargs, field the error must name)
Case = tuple[str, str, dict[str, Any], str]

GROUPS: dict[str, list[Case]] = {
    "ids": [
        ("GET", "/abc", {}, "worker_id"),
        ("GET", "/1.5", {}, "worker_id"),
        ("GET", "/99999999999999999999", {}, "worker_id"),
        ("GET", "/0", {}, "worker_id"),
        # Digits only as HTTP clients write them (Python's int() takes these too).
        ("GET", "/%EF%BC%91", {}, "worker_id"),
        ("GET", "/1_0", {}, "worker_id"),
        ("GET", "/+1", {}, "worker_id"),
        ("POST", "/abc/cancel", {}, "worker_id"),
        ("POST", "/-3/retry", {}, "worker_id"),
        ("POST", "/x/move", {"json": {"target_queue": "scan"}}, "worker_id"),
        ("POST", "/1e3/reorder", {"json": {"new_priority": 1}}, "worker_id"),
        ("GET", "/status/bad%00id", {}, "task_id"),
    ],
    "queues": [
        ("GET", "/?queue=nope", {}, "queue"),
        ("GET", "/queued?queue=nope", {}, "queue"),
        ("POST", "/{q}/move", {"json": {"target_queue": "nope"}}, "target_queue"),
        ("POST", "/{q}/move", {"json": {"target_queue": 3}}, "target_queue"),
        ("POST", "/clear-queue?queue=nope", {}, "queue"),
        ("POST", "/broker/purge-queue/nope?confirm=true", {}, "queue_name"),
    ],
    "priority": [
        ("POST", "/{q}/reorder", {"json": {"new_priority": 10}}, "new_priority"),
        ("POST", "/{q}/reorder", {"json": {"new_priority": -1}}, "new_priority"),
        ("POST", "/{q}/reorder", {"json": {"new_priority": "abc"}}, "new_priority"),
        ("POST", "/{q}/reorder", {"json": {"new_priority": 1.5}}, "new_priority"),
        ("POST", "/{q}/reorder", {"json": {"new_priority": True}}, "new_priority"),
        ("POST", "/{q}/reorder", {"json": {"new_priority": None}}, "new_priority"),
        ("POST", "/{q}/reorder", {"json": {"priority": 1}}, "new_priority"),
    ],
    "bodies": [
        ("POST", "/{q}/move", {}, "body"),
        ("POST", "/{q}/reorder", {}, "body"),
        ("POST", "/{q}/move", {"json": {}}, "target_queue"),
        ("POST", "/{q}/move", {"content": b'{"target_queue": '}, "body"),
        ("POST", "/{q}/reorder", {"content": b"new_priority=1"}, "body"),
        ("POST", "/{q}/reorder", {"json": [1, 2]}, "body"),
        ("POST", "/{q}/move", {"content": b"\xff\xfe"}, "body"),
    ],
    "maintenance": [
        ("POST", "/broker/purge-queue/scan", {}, "confirm"),
        ("POST", "/broker/purge-queue/scan?confirm=false", {}, "confirm"),
        ("POST", "/broker/purge-queue/scan?confirm=maybe", {}, "confirm"),
        ("POST", "/clear-queue?scope=everything", {}, "scope"),
    ],
    "filters": [
        ("GET", "/?status=PERDIDO", {}, "status"),
        ("GET", "/?automation_type=nao_existe", {}, "automation_type"),
        ("GET", "/?cliente_id=abc", {}, "cliente_id"),
        ("GET", "/?usuario_id=1.5", {}, "usuario_id"),
        ("GET", "/?cliente_id=99999999999", {}, "cliente_id"),
        ("GET", "/?task_id=a%00b", {}, "task_id"),
        ("GET", "/?page=0", {}, "page"),
        ("GET", "/?page=-2", {}, "page"),
        ("GET", "/?per_page=abc", {}, "per_page"),
        ("GET", "/?per_page=%201", {}, "per_page"),
        ("GET", "/?per_page=0", {}, "per_page"),
        ("GET", "/queued?page=abc", {}, "page"),
        ("GET", "/queued?per_page=-1", {}, "per_page"),
        ("GET", "/?page=100000000000000", {}, "page"),
    ],
}


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    async with running_api(make_settings(pg_database_url, redis_url)) as running:
        yield running


@pytest.mark.parametrize("group", list(GROUPS))
async def test_bad_input_names_the_field_and_changes_nothing(api: Api, group: str) -> None:
    queued = await add_job(api.db, "AGENDADO", queue="certidao")
    await add_job(api.db, "EXECUTANDO", queue="certidao")
    rows_before = await snapshot(api.db)
    broker_before = await api.services.broker.queue_lengths()
    for method, path, kwargs, field in GROUPS[group]:
        url = BASE + path.replace("{q}", str(queued))
        response = await api.call(method, url, **kwargs)
        body = assert_error(response, 422, field)
        assert "Traceback" not in body["message"]
    assert await snapshot(api.db) == rows_before
    assert await api.services.broker.queue_lengths() == broker_before
