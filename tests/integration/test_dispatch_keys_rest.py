"""Idempotency keys over ``POST /api/v1/jobs`` (header or body), the batch route and the CLI, on
real PostgreSQL and Redis: 201 for a job made, 200 with ``Idempotent-Replayed`` for the one a key
made before, 409 for a key reused by another request, and a 503 whose row was kept answered by
that row when sent again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import run_cli
from tests.integration.test_worker_protocol_bad_input import Api, api, assert_error, broker_down

pytestmark = pytest.mark.services
__all__ = ["api", "broker_down"]  # fixtures

BODY = {"automation_type": "demo.echo", "context": {"pedido": 7}}


async def post(target: Api, body: dict[str, Any], key: str | None = None) -> Any:
    headers = {**target.operator, **({"Idempotency-Key": key} if key is not None else {})}
    return await target.http.post("/api/v1/jobs", json=body, headers=headers)


async def test_the_header_or_the_body_carry_the_key(api: Api) -> None:
    made = await post(api, BODY, key="cabecalho-1")
    assert made.status_code == 201, made.text
    assert "idempotent-replayed" not in made.headers
    again = await post(api, BODY, key="cabecalho-1")
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["data"]["id"] == made.json()["data"]["id"]
    assert again.json()["message"] == made.json()["message"]
    in_body = await post(api, {**BODY, "idempotency_key": "cabecalho-1"})
    assert in_body.status_code == 200 and in_body.json()["data"]["id"] == made.json()["data"]["id"]
    both = await post(api, {**BODY, "idempotency_key": "cabecalho-1"}, key="cabecalho-1")
    assert both.status_code == 200
    assert await api.count() == 1


async def test_a_reused_key_is_409_and_bad_keys_422(api: Api) -> None:
    made = (await post(api, BODY, key="k")).json()["data"]
    body = assert_error(await post(api, {**BODY, "context": {"pedido": 8}}, key="k"), 409)
    assert "idempotency_key" in body["message"] and body["data"]["worker_id"] == made["id"]
    assert_error(await post(api, {**BODY, "idempotency_key": "outra"}, key="k"), 422, "idempotency_key")
    for bad in ("", "x" * 256, 5, ["k"], "tab\t"):
        assert_error(await post(api, {**BODY, "idempotency_key": bad}), 422, "idempotency_key")
    assert await api.count() == 1


async def test_a_batch_with_keys_answers_201_then_200(api: Api) -> None:
    jobs = [{**BODY, "idempotency_key": "lote-a"}, {**BODY, "idempotency_key": "lote-b"}]
    made = await api.http.post("/api/v1/jobs/batch", json={"jobs": jobs}, headers=api.operator)
    assert made.status_code == 201 and made.json()["message"] == "2 job(s) criado(s) com sucesso"
    again = await api.http.post("/api/v1/jobs/batch", json={"jobs": jobs}, headers=api.operator)
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["message"] == "0 job(s) criado(s) com sucesso"
    assert [j["id"] for j in again.json()["data"]] == [j["id"] for j in made.json()["data"]]
    repeated = [{**BODY, "idempotency_key": "lote-c"}, {**BODY, "idempotency_key": "lote-c"}]
    response = await api.http.post("/api/v1/jobs/batch", json={"jobs": repeated}, headers=api.operator)
    assert_error(response, 422, "jobs[1].idempotency_key")
    assert await api.count() == 2


async def test_a_503_sent_again_with_its_key_gets_the_kept_row(broker_down: Api) -> None:
    first = assert_error(await post(broker_down, BODY, key="queda"), 503)
    kept = first["data"]["id"]
    again = await post(broker_down, BODY, key="queda")
    assert again.status_code == 200, again.text
    assert again.json()["data"]["id"] == kept and again.json()["data"]["status"] == "AGENDADO"
    assert await broker_down.count() == 1


def test_the_cli_takes_the_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WA_")}
    first = run_cli(["dispatch", "demo.echo", "--idempotency-key", "cli-1"], env, tmp_path)
    again = run_cli(["dispatch", "demo.echo", "--idempotency-key", "cli-1"], env, tmp_path)
    other = run_cli(["dispatch", "demo.echo", "--idempotency-key", "cli-2"], env, tmp_path)
    assert first == again and other != first
