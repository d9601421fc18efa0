"""An operation run outside HTTP (as over a websocket) has its answer bounded too: the JSON values
stop being added at ``WA_GRAPHQL_MAX_RESPONSE_BYTES`` and the errors say why."""

from __future__ import annotations

import pytest

from tests.unit.graphql_support import Api, code, make_api
from worker_automation.resolvers.services import Services
from worker_automation.schema import build_schema
from worker_automation.schema.response_budget import TOO_LARGE_CODE


@pytest.fixture
async def api(sqlite_services: Services) -> Api:
    return await make_api(sqlite_services)


async def test_queries_outside_http_are_bounded(api: Api) -> None:
    for _ in range(3):
        await api.dispatch(context={"blob": "z" * 3000})
    small = build_schema(api.services.settings.model_copy(update={"graphql_max_response_bytes": 5000}))
    query = "{ workers(perPage: 10) { items { id context } } }"
    result = await small.execute(query, context_value=api.context("reader"))
    assert result.errors and {code(e) for e in result.errors} == {TOO_LARGE_CODE}
    one = await small.execute(
        "{ workers(perPage: 1) { items { id context } } }", context_value=api.context("reader")
    )
    assert one.errors is None and one.data is not None
