"""The OpenAPI document describes exactly the routes the app serves, and a bounded fuzz run driven
by it (schemathesis) never gets a 5xx, or a 2xx whose body breaks the documented schema."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.core.result import Ok
from schemathesis.python import asgi as st_asgi
from starlette.routing import Route

from tests.integration.rest_support import Api, running_api
from tests.support.settings import MakeSettings
from worker_automation.asgi.app import create_app
from worker_automation.process.seed import seed_demo
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE, create_key
from worker_automation.resolvers.automations import ensure_settings_rows
from worker_automation.resolvers.machines import register_machine
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings

pytestmark = pytest.mark.services

DOC = "/api/v1/openapi.json"
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}
# Undocumented on purpose: the fallback (404/405 envelope), the document itself, and the bare
# spelling of the list route (documented once, as ``/api/v1/worker-automation/``).
UNDOCUMENTED = {"/api/v1/{rest:path}", DOC, "/api/v1/worker-automation"}


@pytest.fixture
async def api(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> AsyncIterator[Api]:
    async with running_api(make_settings(pg_database_url, redis_url)) as running:
        yield running


def served(api: Api) -> set[tuple[str, str]]:
    pairs = set()
    for route in api.app.router.routes:
        if isinstance(route, Route) and route.path.startswith("/api/v1") and route.path not in UNDOCUMENTED:
            pairs |= {(m.lower(), route.path) for m in route.methods or () if m != "HEAD"}
    return pairs


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


async def test_document_lists_every_route(api: Api) -> None:
    response = await api.client.get(DOC)
    assert response.status_code == 200
    doc = json.loads(response.text)
    assert doc["openapi"].startswith("3.")
    documented = {(m, path) for path, ops in doc["paths"].items() for m in ops if m in HTTP_METHODS}
    assert documented == served(api)
    schemas = doc["components"]["schemas"]
    for target in set(refs(doc)):
        assert target.removeprefix("#/components/schemas/") in schemas, target
    assert set(doc["components"]["securitySchemes"]) == {"ApiKeyHeader", "BearerKey", "WorkerApiKey"}
    assert doc["components"]["securitySchemes"]["WorkerApiKey"]["name"] == "X-Worker-Api-Key"
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    for ops in doc["paths"].values():
        for op in ops.values():
            assert op["security"] and op["summary"]
            assert {"401", "422"} <= set(op["responses"])
            success = op["responses"].get("200") or op["responses"]["201"]
            envelope = success["content"]["application/json"]["schema"]
            assert envelope["required"] == ["status", "message", "data"]


async def test_document_carries_enums_and_bounds(api: Api) -> None:
    doc = (await api.client.get(DOC)).json()
    base = "/api/v1/worker-automation"

    def param(path: str, method: str, name: str) -> dict[str, Any]:
        found = [p for p in doc["paths"][path][method]["parameters"] if p["name"] == name]
        return dict(found[0]["schema"])

    assert param(f"{base}/", "get", "status")["enum"] == [
        "AGENDADO",
        "EXECUTANDO",
        "CONCLUIDO",
        "FALHA",
        "CANCELADO",
    ]
    assert param(f"{base}/", "get", "queue")["enum"] == list(api.services.settings.queues)
    assert param(f"{base}/", "get", "page")["minimum"] == 1
    assert param(f"{base}/clear-queue", "post", "scope")["enum"] == ["all", "queued", "running"]
    assert param(f"{base}/{{worker_id}}", "get", "worker_id")["type"] == "integer"
    reorder = doc["components"]["schemas"]["ReorderBody"]["properties"]["new_priority"]
    assert (reorder["minimum"], reorder["maximum"]) == (0, 9)
    progress = doc["components"]["schemas"]["ProgressBody"]["properties"]["progress"]
    assert (progress["minimum"], progress["maximum"]) == (0, 100)
    purge = doc["paths"][f"{base}/broker/purge-queue/{{queue_name}}"]["post"]
    assert purge["x-required-perfil"] == ["administrador", "diretoria"]
    assert doc["paths"]["/api/v1/jobs/{job_id}/start"]["post"]["security"] == [{"WorkerApiKey": []}]


async def _prepare(settings_: Settings) -> dict[str, str]:
    """Migrate, seed a few jobs, and make an admin key and a machine key (Celery pool machine)."""
    services = await Services.start(settings_)
    try:
        await ensure_settings_rows(services.db)
        await seed_demo(services.db, jobs=30, clientes=4, seed=3)
        key = await create_key(
            services.db, name="fuzz", perfil="administrador", scopes=[SCOPE_READ, SCOPE_WRITE]
        )
        machine = await register_machine(
            services.db, CLI_ACTOR, settings_.queues, name="fuzz-machine", queue="scan"
        )
        return {"X-API-Key": key.secret, "X-Worker-Api-Key": machine.api_key}
    finally:
        await services.close()


# Every check on. Two generation choices match how the API is meant to be called: unknown query
# parameters are ignored (as the seed's routes always did), and the keys are the test's own
# (sent with each call) rather than generated. The dispatch routes check a context against its
# automation's form, which a JSON Schema cannot say all of (CNPJ check digits, dates in range):
# a schema-valid context may still be a 422 naming the field there.
DISPATCH_ANSWERS = ["2XX", "401", "403", "409", "422", "503"]
FUZZ_CONFIG = SchemathesisConfig.from_dict(
    {
        "generation": {"allow-extra-parameters": False, "with-security-parameters": False},
        "operations": [
            {
                "include-path-regex": "^/api/v1/jobs(/batch)?$",
                "checks": {"positive_data_acceptance": {"expected-statuses": DISPATCH_ANSWERS}},
            }
        ],
    }
)


def strategy_for(operation: Any) -> Any:
    """Valid and invalid requests, and valid ones aimed at jobs that exist (ids 1..30 are seeded)."""
    options = [operation.as_strategy(), operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)]
    for name in ("worker_id", "job_id"):
        if f"{{{name}}}" in operation.path:
            options += [operation.as_strategy(path_parameters={name: n}) for n in (1, 7, 19)]
    return st.one_of(options)


def test_fuzz_never_breaks(pg_database_url: str, redis_url: str, make_settings: MakeSettings) -> None:
    app_settings = make_settings(pg_database_url, redis_url, inspect_timeout_seconds=0.1)
    headers = asyncio.run(_prepare(app_settings))
    app = create_app(app_settings)
    schema = schemathesis.openapi.from_asgi(DOC, app, config=FUZZ_CONFIG)
    try:
        for result in schema.get_all_operations():
            # An operation the loader cannot read means the document itself is broken.
            assert isinstance(result, Ok), result.err()
            operation = result.ok()

            @settings(
                max_examples=8,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=strategy_for(operation))
            def run(case: Any) -> None:
                response = case.call(headers=headers)
                assert response.status_code < 500, (
                    case.method,
                    case.formatted_path,
                    case.query,
                    response.text,
                )
                body = response.json()
                assert set(body) == {"status", "message", "data"}, body
                case.validate_response(response)

            run()
    finally:
        # The app ran in schemathesis's own event loop thread: end its lifespan there.
        st_asgi.shutdown_lifespans()
