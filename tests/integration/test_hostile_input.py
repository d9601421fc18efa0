"""Hostile input against the whole app on PostgreSQL and Redis, REST and GraphQL: oversized bodies,
contexts and results, text no database can store, integers past their column, bodies that are not
JSON objects, costly or oversized GraphQL, and machine keys reading other machines' jobs. Each case:
the status, the error naming the field, and nothing written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError

from tests.integration.rest_support import BASE, Api, running_api
from tests.support.settings import MakeSettings
from worker_automation.models import Job
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.machines import register_machine

pytestmark = pytest.mark.services

JOBS = "/api/v1/jobs"
BIG_CONTEXT = {"blob": "x" * (64 * 1024)}


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    settings = make_settings(pg_database_url, redis_url, max_result_bytes=4096)
    async with running_api(settings) as running:
        yield running


async def count(api: Api) -> int:
    async with api.db.session() as session:
        return int(await session.scalar(select(func.count()).select_from(Job)) or 0)


async def row(api: Api, job_id: int) -> Job:
    async with api.db.session() as session:
        found = await session.get(Job, job_id, populate_existing=True)
        assert found is not None
        return found


def refused(response: httpx.Response, status: int, field: str | None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"status", "message", "data"} and body["status"] == "error", body
    if field is not None:
        assert body["data"]["field"] == field, body
    assert "Traceback" not in response.text
    return body


async def post_job(api: Api, body: Any = None, **kwargs: Any) -> httpx.Response:
    if body is not None:
        kwargs["json"] = body
    return await api.call("POST", JOBS, **kwargs)


def job_body(context: Any = None, **extra: Any) -> dict[str, Any]:
    return {"automation_type": "demo.echo", "context": context or {"a": 1}, **extra}


async def test_bodies_over_the_limit_are_413_before_being_read(api: Api) -> None:
    big = b'{"automation_type": "demo.echo", "context": {"a": "' + b"x" * (1024 * 1024) + b'"}}'
    declared = await post_job(api, content=big, headers={"content-type": "application/json"})
    refused(declared, 413, None)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for start in range(0, len(big), 64 * 1024):
            yield big[start : start + 64 * 1024]

    streamed = await post_job(api, content=chunks(), headers={"content-type": "application/json"})
    refused(streamed, 413, None)
    graphql = await api.call("POST", "/graphql", content=big, headers={"content-type": "application/json"})
    assert graphql.status_code == 413 and graphql.json()["errors"][0]["message"]
    assert await count(api) == 0


async def test_context_over_64_kib_is_422_naming_context(api: Api) -> None:
    refused(await post_job(api, job_body(BIG_CONTEXT)), 422, "context")
    batch = {"jobs": [job_body(), job_body(BIG_CONTEXT)]}
    refused(await api.call("POST", f"{JOBS}/batch", json=batch), 422, "jobs[1].context")
    mutation = (
        'mutation($c: JSON) { dispatchAutomation(input: {automationType: "demo.echo", context: $c}) { id } }'
    )
    answer = (
        await api.call("POST", "/graphql", json={"query": mutation, "variables": {"c": BIG_CONTEXT}})
    ).json()
    assert answer["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert answer["errors"][0]["extensions"]["field"] == "context"
    assert await count(api) == 0


UNSTORABLE = [
    (b'{"automation_type": "demo.echo", "context": {"a": "x\\u0000y"}}', "context.a"),
    (b'{"automation_type": "demo.echo", "context": {"a": "\\ud800"}}', "context.a"),
    # A bad object key is named with the character escaped: sent raw, it would break the answer.
    (b'{"automation_type": "demo.echo", "context": {"\\u0000": 1}}', "context.\\u0000"),
    (b'{"automation_type": "demo.echo", "context": {"\\ud800": 1}}', "context.\\ud800"),
    (
        b'{"automation_type": "demo.echo", "context": {"a": [{"b\\udc80c": {"x": 1}}]}}',
        "context.a[0].b\\udc80c",
    ),
    (b'{"automation_type": "demo.echo", "context": {"a": NaN}}', "body"),
    (b'{"automation_type": "demo.echo", "cliente_id": 99999999999999999999}', "cliente_id"),
    (b'{"automation_type": "demo.echo", "cliente_id": -99999999999}', "cliente_id"),
    (b'{"automation_type": "demo.echo", "cliente_id": 0}', "cliente_id"),
    (b'{"automation_type": "demo.echo", "cliente_id": -5}', "cliente_id"),
    (b'{"automation_type": "demo.echo", "usuario_id": 2147483648}', "usuario_id"),
    (b'{"automation_type": "demo.echo", "usuario_id": 0}', "usuario_id"),
    (b'{"automation_type": "demo.echo", "usuario_id": -5}', "usuario_id"),
    (b'{"automation_type": "demo.echo", "priority": 1' + b"0" * 5000 + b"}", "body"),
    (b'"hello"', "body"),
    (b"123", "body"),
    (b"[1, 2]", "body"),
    (b'{"automation_type": "demo.\xff"}', "body"),
]


@pytest.mark.parametrize(("raw", "field"), UNSTORABLE)
async def test_unstorable_input_is_422_naming_the_field(api: Api, raw: bytes, field: str) -> None:
    response = await post_job(api, content=raw, headers={"content-type": "application/json"})
    refused(response, 422, field)
    response.content.decode("utf-8")  # strict: the answer is UTF-8 whatever the key was
    assert await count(api) == 0


SURROGATE_KEY = b'{"\\ud800": 1}'


async def test_a_lone_surrogate_in_a_key_is_refused_by_every_json_route(api: Api) -> None:
    json_headers = {"content-type": "application/json"}
    batch = b'{"jobs": [{"automation_type": "demo.echo", "context": {"a": 1}}, '
    batch += b'{"automation_type": "demo.echo", "context": {"a": ' + SURROGATE_KEY + b"}}]}"
    response = await api.call("POST", f"{JOBS}/batch", content=batch, headers=json_headers)
    refused(response, 422, "jobs[1].context.a.\\ud800")
    job_id = int((await post_job(api, job_body())).json()["data"]["id"])
    before = await row(api, job_id)
    for action, name in (("move", "target_queue"), ("reorder", "new_priority")):
        raw = b'{"' + name.encode() + b'": ' + SURROGATE_KEY + b"}"
        response = await api.call("POST", f"{BASE}/{job_id}/{action}", content=raw, headers=json_headers)
        refused(response, 422, f"{name}.\\ud800")
    after = await row(api, job_id)
    assert (after.queue, after.priority, after.status) == (before.queue, before.priority, before.status)
    job_id, machine = await running_job(api)
    result = b'{"result": {"ok": ' + SURROGATE_KEY + b"}}"
    headers = {**machine, **json_headers}
    response = await api.call("POST", f"{JOBS}/{job_id}/complete", kind=None, headers=headers, content=result)
    refused(response, 422, "result.ok.\\ud800")
    assert (await row(api, job_id)).status == "FALHA"
    mutation = (
        'mutation($c: JSON) { dispatchAutomation(input: {automationType: "demo.echo", context: $c}) { id } }'
    )
    body = b'{"query": ' + orjson.dumps(mutation) + b', "variables": {"c": {"a": ' + SURROGATE_KEY + b"}}}"
    answer = await graphql(api, body)
    assert answer.status_code == 200, answer.text
    (error,) = answer.json()["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "c.a.\\ud800"}
    assert "\\ud800" in error["message"]
    assert await count(api) == 2


async def running_job(api: Api, automation: str = "demo.echo") -> tuple[int, dict[str, str]]:
    created = await register_machine(api.db, CLI_ACTOR, api.services.settings.queues, name="m1", queue="scan")
    machine = {"X-Worker-Api-Key": created.api_key}
    job_id = int((await post_job(api, job_body())).json()["data"]["id"])
    claimed = await api.call("POST", f"{JOBS}/{job_id}/start", kind=None, headers=machine)
    assert claimed.status_code == 200, claimed.text
    return job_id, machine


async def test_a_result_over_the_limit_ends_the_job_failed(api: Api) -> None:
    job_id, machine = await running_job(api)
    body = {"result": {"blob": "x" * 5000}}
    response = await api.call("POST", f"{JOBS}/{job_id}/complete", kind=None, headers=machine, json=body)
    message = refused(response, 422, "result")["message"]
    job = await row(api, job_id)
    assert job.status == "FALHA" and job.mensagem_erro == message and "4096" in message


async def test_a_result_with_nul_ends_the_job_failed(api: Api) -> None:
    job_id, machine = await running_job(api)
    raw = b'{"result": {"text": "a\\u0000b"}}'
    headers = {**machine, "content-type": "application/json"}
    response = await api.call("POST", f"{JOBS}/{job_id}/complete", kind=None, headers=headers, content=raw)
    refused(response, 422, "result.text")
    assert (await row(api, job_id)).status == "FALHA"


async def test_an_error_text_with_nul_changes_nothing(api: Api) -> None:
    job_id, machine = await running_job(api)
    raw = b'{"error": "boom\\u0000", "traceback": "\\udc80"}'
    headers = {**machine, "content-type": "application/json"}
    response = await api.call("POST", f"{JOBS}/{job_id}/fail", kind=None, headers=headers, content=raw)
    assert response.status_code == 422 and response.json()["data"]["field"] in {"error", "traceback"}
    progress = b'{"progress": 10, "message": "\\u0000"}'
    response = await api.call(
        "POST", f"{JOBS}/{job_id}/progress", kind=None, headers=headers, content=progress
    )
    refused(response, 422, "message")
    job = await row(api, job_id)
    assert job.status == "EXECUTANDO" and job.progress == 0


async def test_pending_shows_other_machines_jobs_without_their_context(api: Api) -> None:
    await post_job(api, job_body({"secret": "s3cr3t"}))
    other = await register_machine(
        api.db, CLI_ACTOR, api.services.settings.queues, name="c", queue="certidao"
    )
    headers = {"X-Worker-Api-Key": other.api_key}
    listed = await api.call("GET", f"{JOBS}/pending?automation=demo.echo", kind=None, headers=headers)
    assert listed.status_code == 200
    assert [set(job) for job in listed.json()["data"]] == [{"id", "automation_type", "queue"}]
    assert "s3cr3t" not in listed.text
    own = await register_machine(api.db, CLI_ACTOR, api.services.settings.queues, name="s", queue="scan")
    mine = await api.call("GET", f"{JOBS}/pending", kind=None, headers={"X-Worker-Api-Key": own.api_key})
    assert mine.json()["data"][0]["context"] == {"secret": "s3cr3t"}


async def test_smaller_rest_items(api: Api) -> None:
    refused(await api.call("GET", f"{BASE}/?per_page=101"), 422, "per_page")
    refused(await api.call("GET", f"{BASE}/queued?per_page=101"), 422, "per_page")
    job_id = int((await post_job(api, job_body())).json()["data"]["id"])
    refused(await api.call("POST", f"{BASE}/clear-queue?scope="), 422, "scope")
    assert (await row(api, job_id)).status == "AGENDADO"
    for path, allowed in (("sync-orphans", "POST"), ("cleanup-no-client", "DELETE"), ("clear-queue", "POST")):
        options = await api.call("OPTIONS", f"{BASE}/{path}")
        assert options.status_code == 405 and options.headers["allow"] == allowed
        # GET is taken by no route there either (``/{worker_id}`` does not read it as a job id).
        for kind in ("admin", None):
            got = await api.call("GET", f"{BASE}/{path}", kind=kind)
            assert got.status_code == 405 and got.headers["allow"] == allowed, got.text


async def test_database_errors_carry_no_parameters(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    secret = "wak_parametro_secreto"
    async with api.db.engine.connect() as conn:
        with pytest.raises(DBAPIError) as caught:
            await conn.execute(text("SELECT CAST(:value AS integer)"), {"value": secret})
    assert secret not in str(caught.value) and secret not in caplog.text


async def graphql(api: Api, body: Any, **kwargs: Any) -> httpx.Response:
    if isinstance(body, bytes):
        kwargs["content"] = body
        kwargs.setdefault("headers", {})["content-type"] = "application/json"
    else:
        kwargs["json"] = body
    return await api.call("POST", "/graphql", **kwargs)


@pytest.mark.parametrize(
    "raw", [b'"hello"', b"123", b"\xff\xfe{", b'{"query": "{ stats { total } }", "x": NaN}']
)
async def test_graphql_bodies_that_are_not_json_objects_are_400(api: Api, raw: bytes) -> None:
    response = await graphql(api, raw)
    assert response.status_code == 400, response.text
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_graphql_operation_shape_errors(api: Api) -> None:
    subscription = await graphql(api, {"query": "subscription { queueLoad { queues { queueName } } }"})
    assert subscription.status_code == 400
    two_anonymous = (await graphql(api, {"query": "{ stats { total } } { stats { total } }"})).json()
    assert two_anonymous["data"] is None and two_anonymous["errors"]
    two_named = await graphql(api, {"query": "query A { stats { total } } query B { stats { total } }"})
    assert two_named.json()["data"] is None
    assert two_named.json()["errors"][0]["extensions"]["field"] == "operationName"
    deep = '{ __type(name: "Query") { fields { type ' + "{ ofType " * 25 + "{ name }" + " }" * 28
    answer = (await graphql(api, {"query": deep})).json()
    assert answer["data"] is None and "exceeds maximum introspection depth" in answer["errors"][0]["message"]


async def test_graphql_unstorable_text_names_the_field(api: Api) -> None:
    query = "query($q: String) { workers(filter: {q: $q}) { total } }"
    by_variable = (await graphql(api, {"query": query, "variables": {"q": "a\x00b"}})).json()
    assert by_variable["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": "q"}
    literal = (
        await graphql(api, b'{"query": "{ workers(filter: {q: \\"a\\\\u0000\\"}) { total } }"}')
    ).json()
    assert literal["errors"][0]["extensions"]["field"] == "filter.q"
    surrogate = (
        b'{"query": "query($t: String!) { taskStatus(taskId: $t) { state } }", "variables": {"t": "\\ud800"}}'
    )
    answer = (await graphql(api, surrogate)).json()
    assert answer["errors"][0]["extensions"]["field"] == "t"


async def test_graphql_cost_and_answer_size(api: Api) -> None:
    aliases = " ".join(f"a{i}: workers(perPage: 100) {{ items {{ context result }} }}" for i in range(30))
    costly = (await graphql(api, {"query": f"{{ {aliases} }}"}, kind="reader")).json()
    assert costly["data"] is None and costly["errors"][0]["extensions"]["code"] == "QUERY_TOO_COSTLY"
    for _ in range(3):
        assert (await post_job(api, job_body({"blob": "y" * 60_000}))).status_code == 201
    small = api.services.settings.model_copy(update={"graphql_max_response_bytes": 100_000})
    async with running_api(small) as limited:
        page = "{ workers(perPage: 100) { items { id context } } }"
        answer = await limited.call("POST", "/graphql", json={"query": page}, kind="reader")
        assert answer.status_code == 200 and len(answer.content) < 1000
        assert answer.json()["errors"][0]["extensions"]["code"] == "RESPONSE_TOO_LARGE"
        one = "{ workers(perPage: 1) { items { id context } } }"
        assert (await limited.call("POST", "/graphql", json={"query": one}, kind="reader")).json()["data"]
