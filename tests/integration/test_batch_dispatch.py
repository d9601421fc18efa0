"""``POST /api/v1/jobs/batch`` and ``dispatchAutomations`` on real PostgreSQL and Redis: every job
created and queued in order, or none when one is invalid, and the broker down keeps the rows."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.rest_support import audit_entries
from tests.integration.test_worker_protocol_bad_input import Api, api, assert_error, broker_down
from worker_automation.resolvers.dispatch import MAX_BATCH

pytestmark = pytest.mark.services
__all__ = ["api", "broker_down"]  # fixtures


def job(automation_type: str = "demo.echo", **fields: Any) -> dict[str, Any]:
    return {"automation_type": automation_type, "context": {"n": 1}, **fields}


async def post_batch(target: Api, jobs: Any) -> Any:
    return await target.http.post("/api/v1/jobs/batch", json={"jobs": jobs}, headers=target.operator)


async def test_a_batch_creates_every_job_in_order_and_queues_each(api: Api) -> None:
    before = (await api.services.broker.queue_lengths())["scan"]
    jobs = [
        job(context={"n": 1}),
        job("demo.sleep", context={"seconds": 1}, priority=3),
        job(context={"n": 3}, usuario_id=9),
    ]
    response = await post_batch(api, jobs)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["status"] == "success" and body["message"] == "3 job(s) criado(s) com sucesso"
    created = body["data"]
    assert [j["automation_type"] for j in created] == ["demo.echo", "demo.sleep", "demo.echo"]
    assert [j["context"] for j in created] == [{"n": 1}, {"seconds": 1}, {"n": 3}]
    assert [j["priority"] for j in created] == [0, 3, 0]
    assert created[2]["usuario_id"] == 9
    assert len({j["task_id"] for j in created}) == 3
    for item in created:
        row = await api.row(item["id"])
        assert row["status"] == "AGENDADO" and row["task_id"] == item["task_id"]
    assert (await api.services.broker.queue_lengths())["scan"] == before + 3
    entry = (await audit_entries(api.services.db))[-1]
    assert entry.action == "dispatch" and entry.result == "ok"
    assert entry.detail == {"worker_ids": [j["id"] for j in created]}


async def test_one_bad_job_names_its_index_and_creates_nothing(api: Api) -> None:
    cases: list[tuple[Any, str]] = [
        ([job(), job("demo.sleep", context={"seconds": "x"})], "jobs[1].context.seconds"),
        ([job(), job("nao.existe")], "jobs[1].automation_type"),
        ([job(priority=10)], "jobs[0].priority"),
        ([job(), job(cliente_id="1")], "jobs[1].cliente_id"),
        ([job(), "texto"], "jobs[1]"),
        ([], "jobs"),
        ([job()] * (MAX_BATCH + 1), "jobs"),
        ({"automation_type": "demo.echo"}, "jobs"),
    ]
    for jobs, field in cases:
        assert_error(await post_batch(api, jobs), 422, field)
    assert_error(await api.http.post("/api/v1/jobs/batch", content=b"[]", headers=api.operator), 422, "body")
    assert await api.count() == 0


async def test_a_batch_needs_an_operator_key_with_write(api: Api) -> None:
    assert_error(await api.http.post("/api/v1/jobs/batch", json={"jobs": [job()]}), 401)
    holder = {"X-API-Key": api.holder["X-Worker-Api-Key"]}
    assert_error(await api.http.post("/api/v1/jobs/batch", json={"jobs": [job()]}, headers=holder), 401)
    assert await api.count() == 0


async def test_a_batch_with_the_broker_down_is_503_and_keeps_every_row(broker_down: Api) -> None:
    response = await post_batch(broker_down, [job(), job(), job()])
    body = assert_error(response, 503)
    ids = body["data"]["ids"]
    assert len(ids) == 3 and body["message"].startswith("Broker indisponivel: 3 worker(s)")
    for job_id in ids:
        row = await broker_down.row(job_id)
        assert row["status"] == "AGENDADO" and row["task_id"] is None


async def test_dispatch_automations_over_graphql(api: Api) -> None:
    mutation = """mutation($inputs: [DispatchInput!]!) {
      dispatchAutomations(inputs: $inputs) { id status automationType context taskId }
    }"""
    inputs = [
        {"automationType": "demo.echo", "context": {"n": 1}},
        {"automationType": "demo.sleep", "context": {"seconds": 2}, "priority": 1},
    ]
    answer = await api.http.post(
        "/graphql", json={"query": mutation, "variables": {"inputs": inputs}}, headers=api.operator
    )
    created = answer.json()["data"]["dispatchAutomations"]
    assert [(w["automationType"], w["status"]) for w in created] == [
        ("demo.echo", "AGENDADO"),
        ("demo.sleep", "AGENDADO"),
    ]
    bad = [{"automationType": "demo.sleep", "context": {"seconds": -1}}]
    refused = await api.http.post(
        "/graphql", json={"query": mutation, "variables": {"inputs": bad}}, headers=api.operator
    )
    error = refused.json()["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["extensions"]["field"] == "inputs[0].context.seconds"
    assert await api.count() == 2
