"""A bounded fuzz run of ``/graphql`` driven by the schema (hypothesis-graphql), on PostgreSQL and
Redis: random queries and mutations (NUL characters included) get an answer in the GraphQL shape,
never a 5xx and never an internal error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_graphql import strategies as gql

from tests.integration.rest_support import running_api
from tests.support.settings import MakeSettings
from worker_automation.process.seed import seed_demo

pytestmark = pytest.mark.services

SDL = (Path(__file__).resolve().parents[2] / "schema.graphql").read_text(encoding="utf-8")
# JSON arguments (a dispatch context, settings): any JSON value, NUL characters included.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _json_literal(value: Any) -> Any:
    from graphql import (
        BooleanValueNode,
        IntValueNode,
        ListValueNode,
        NameNode,
        NullValueNode,
        ObjectFieldNode,
        ObjectValueNode,
        StringValueNode,
    )

    if value is None:
        return NullValueNode()
    if isinstance(value, bool):
        return BooleanValueNode(value=value)
    if isinstance(value, int):
        return IntValueNode(value=str(value))
    if isinstance(value, str):
        return StringValueNode(value=value)
    if isinstance(value, list):
        return ListValueNode(values=tuple(_json_literal(v) for v in value))
    fields = tuple(
        ObjectFieldNode(name=NameNode(value=f"k{i}"), value=_json_literal(v))
        for i, v in enumerate(value.values())
    )
    return ObjectValueNode(fields=fields)


SCALARS = {
    "JSON": JSON_VALUES.map(_json_literal),
    "DateTime": st.sampled_from(["2026-01-01T00:00:00-03:00", "nao-e-data", ""]).map(
        lambda v: _json_literal(v)
    ),
}


def test_random_operations_never_break(
    pg_database_url: str, redis_url: str, make_settings: MakeSettings
) -> None:
    async def run() -> None:
        async with running_api(make_settings(pg_database_url, redis_url, inspect_timeout_seconds=0.1)) as api:
            await seed_demo(api.db, jobs=20, clientes=3, seed=5)
            operations = st.one_of(
                gql.queries(SDL, custom_scalars=SCALARS), gql.mutations(SDL, custom_scalars=SCALARS)
            )
            documents: list[str] = []

            @settings(
                max_examples=60,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            @given(document=operations)
            def collect(document: str) -> None:
                documents.append(document)

            collect()
            for document in documents:
                response: httpx.Response = await api.call("POST", "/graphql", json={"query": document})
                assert response.status_code < 500, (document, response.text)
                body = response.json()
                assert set(body) <= {"data", "errors", "extensions"}, body
                codes = {e.get("extensions", {}).get("code") for e in body.get("errors") or []}
                assert "INTERNAL_SERVER_ERROR" not in codes, (document, body)

    asyncio.run(run())
