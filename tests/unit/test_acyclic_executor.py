"""A GraphQL execution's objects are freed when it ends, without the garbage collector, and the
resolver helpers keep working while it runs."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import strawberry
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types import Info

from tests.unit.graphql_support import Api, make_api
from worker_automation.overrides.acyclic_executor import AcyclicExecutionContext, ExecutorGone
from worker_automation.overrides.plain_fields import PlainFieldsExecutionContext
from worker_automation.resolvers.services import Services

SETTLED: list[str] = []
STASHED: list[Info] = []


async def _value(text: str) -> str:
    await asyncio.sleep(0)
    return text


async def _note(text: str) -> None:
    await asyncio.sleep(0)
    SETTLED.append(text)


@strawberry.type
class Query:
    @strawberry.field
    async def pair(self, info: Info) -> list[str]:
        info._raw_info.async_helpers.track([_note("tracked"), "not awaitable"])
        return list(await info._raw_info.async_helpers.gather([_value("a"), _value("b")]))

    @strawberry.field
    def stash(self, info: Info) -> int:
        STASHED.append(info)
        return 1


def _record(monkeypatch: pytest.MonkeyPatch, context_class: type[Any]) -> list[weakref.ref[Any]]:
    """Every executor ``context_class`` (or a subclass) builds from now on, held weakly."""
    built: list[weakref.ref[Any]] = []
    init = context_class.__init__

    def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        built.append(weakref.ref(self))

    monkeypatch.setattr(context_class, "__init__", recording_init)
    return built


def _schema(context_class: type[Any]) -> strawberry.Schema:
    return strawberry.Schema(query=Query, config=StrawberryConfig(), execution_context_class=context_class)


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Only reference counting frees objects while the test runs."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_collector")
async def test_an_execution_is_freed_as_soon_as_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _record(monkeypatch, AcyclicExecutionContext)
    result = await _schema(AcyclicExecutionContext).execute("{ pair }")
    assert result.errors is None and result.data == {"pair": ["a", "b"]}
    assert len(built) == 1
    assert built[0]() is None


@pytest.mark.usefixtures("no_collector")
async def test_graphql_cores_own_executor_outlives_its_execution(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cycle the module removes: with graphql-core's helpers the executor (and everything it
    references) stays until a collection."""
    built = _record(monkeypatch, StrawberryGraphQLCoreExecutionContext)
    result = await _schema(StrawberryGraphQLCoreExecutionContext).execute("{ pair }")
    assert result.data == {"pair": ["a", "b"]}
    assert built[0]() is not None
    gc.collect()
    assert built[0]() is None


async def test_gather_and_track_work_through_the_weak_helpers() -> None:
    SETTLED.clear()
    result = await _schema(AcyclicExecutionContext).execute("{ first: pair second: pair }")
    assert result.errors is None
    assert result.data == {"first": ["a", "b"], "second": ["a", "b"]}
    for _ in range(10):  # tracked work settles in the background
        if len(SETTLED) == 2:
            break
        await asyncio.sleep(0)
    assert SETTLED == ["tracked", "tracked"]


@pytest.mark.usefixtures("no_collector")
async def test_helpers_used_after_the_execution_say_so() -> None:
    STASHED.clear()
    result = await _schema(AcyclicExecutionContext).execute("{ stash }")
    assert result.data == {"stash": 1}
    helpers = STASHED.pop()._raw_info.async_helpers
    with pytest.raises(ExecutorGone, match="after the GraphQL execution ended"):
        helpers.track([])


@pytest.fixture
async def api(embedded_broker_services: Services) -> Api:
    return await make_api(embedded_broker_services)


@pytest.mark.usefixtures("no_collector")
async def test_a_list_request_of_the_service_leaves_nothing_for_the_collector(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    await api.dispatch()
    built = _record(monkeypatch, PlainFieldsExecutionContext)
    data = await api.ok("{ workers(page: 1, perPage: 20) { total items { id status queue createdAt } } }")
    assert data["workers"]["total"] == 1
    assert len(built) == 1
    assert built[0]() is None
