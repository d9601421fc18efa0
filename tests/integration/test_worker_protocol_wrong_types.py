"""Every field of every worker-protocol route, sent with a value of the wrong type (an object, a
list, a number, a boolean, null, an integer past 64 bits, a float, text where a number goes, text
with a NUL or a lone surrogate), on real PostgreSQL and Redis: 422 naming the field, never a 500,
and the job rows left as they were."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration.rest_support import Api, running_api, snapshot
from tests.support.settings import MakeSettings
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.machines import register_machine

pytestmark = pytest.mark.services

JOBS = "/api/v1/jobs"
JSON = {"content-type": "application/json"}

WRONG: dict[str, Any] = {
    "object": {"a": 1},
    "list": [1, "a"],
    "number": 7,
    "bool": True,
    "null": None,
    "huge": 2**70,
    "float": 1.5,
    "text": "abc",
    # Text no database stores, refused by text fields as well.
    "nul": "a\x00b",
    "surrogate": "\ud800",
}


def kinds(*excluded: str) -> list[str]:
    """The kinds of :data:`WRONG` that are wrong for a field (``excluded`` are its own types)."""
    return [kind for kind in WRONG if kind not in excluded]


# Field -> the kinds of value it refuses. Optional fields take null; text fields take text.
TRIGGER_FIELDS: dict[str, list[str]] = {
    "automation_type": kinds("text"),  # (text naming no automation is refused as well)
    "cliente_id": kinds("number", "null"),
    "context": kinds("object", "null"),
    "priority": kinds("number"),
    "usuario_id": kinds("number", "null"),
}
VALID_JOB = {"automation_type": "demo.sleep", "context": {"seconds": 5}}
# Route -> (a valid body, {field: kinds it refuses}); the job is AGENDADO for start, else running.
REPORTS: dict[str, tuple[dict[str, Any], dict[str, list[str]]]] = {
    "start": ({}, {"task_id": kinds("null", "text")}),
    "progress": ({"progress": 50}, {"progress": kinds("number"), "message": kinds("null", "text")}),
    "complete": ({"result": {"ok": 1}}, {"task_id": kinds("null", "text")}),
    "fail": (
        {"error": "boom"},
        {
            "error": kinds("text"),
            "exc_type": kinds("null", "text"),
            "traceback": kinds("null", "text"),
            "task_id": kinds("null", "text"),
        },
    ),
    "lost": ({"fault": "worker_lost"}, {"fault": kinds(), "task_id": kinds("null", "text")}),
}


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    async with running_api(make_settings(pg_database_url, redis_url)) as running:
        yield running


def refused(response: httpx.Response, field: str, case: object) -> None:
    assert response.status_code == 422, (case, response.status_code, response.text)
    body = response.json()
    assert body["status"] == "error" and body["data"]["field"] == field, (case, body)


async def post(
    api: Api, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    raw = json.dumps(body).encode()  # (the standard encoder writes integers past 64 bits)
    if headers is None:
        return await api.call("POST", path, content=raw, headers=JSON)
    return await api.call("POST", path, kind=None, content=raw, headers={**headers, **JSON})


async def test_every_trigger_field_refuses_wrong_types(api: Api) -> None:
    for field, refused_kinds in TRIGGER_FIELDS.items():
        for kind in refused_kinds:
            body = {**VALID_JOB, field: WRONG[kind]}
            refused(await post(api, JOBS, body), field, (field, kind))
            batch = await post(api, f"{JOBS}/batch", {"jobs": [VALID_JOB, body]})
            refused(batch, f"jobs[1].{field}", ("batch", field, kind))
    for kind in kinds("list"):
        refused(await post(api, f"{JOBS}/batch", {"jobs": WRONG[kind]}), "jobs", ("jobs", kind))
    for kind in kinds("object"):
        refused(await post(api, f"{JOBS}/batch", {"jobs": [WRONG[kind]]}), "jobs[0]", ("jobs[0]", kind))
    assert await snapshot(api.db) == []


async def test_pending_refuses_query_values_of_the_wrong_type(api: Api) -> None:
    created = await register_machine(api.db, CLI_ACTOR, api.services.settings.queues, name="m", queue="scan")
    headers = {"X-Worker-Api-Key": created.api_key}
    cases = {
        "limit": ["abc", "1.5", "true", "null", "[1]", "{}", str(2**70), "-1", "0", "1e3"],
        "automation": ["7", "true", "null", "[1]", "{}", str(2**70), "1.5"],
    }
    for name, values in cases.items():
        for value in values:
            response = await api.call(
                "GET", f"{JOBS}/pending", kind=None, headers=headers, params={name: value}
            )
            refused(response, name, (name, value))


@pytest.mark.parametrize("route", list(REPORTS))
async def test_every_report_field_refuses_wrong_types(api: Api, route: str) -> None:
    created = await register_machine(
        api.db, CLI_ACTOR, api.services.settings.queues, name="holder", automation="demo.sleep"
    )
    machine = {"X-Worker-Api-Key": created.api_key}
    job = await api.call("POST", JOBS, json=VALID_JOB)
    job_id = int(job.json()["data"]["id"])
    valid, fields = REPORTS[route]
    if route != "start":
        claimed = await api.call("POST", f"{JOBS}/{job_id}/start", kind=None, headers=machine)
        assert claimed.status_code == 200, claimed.text
    before = await snapshot(api.db)
    for field, refused_kinds in fields.items():
        for kind in refused_kinds:
            response = await post(api, f"{JOBS}/{job_id}/{route}", {**valid, field: WRONG[kind]}, machine)
            refused(response, field, (route, field, kind))
    assert await snapshot(api.db) == before
