"""Running the GraphQL schema in-process: callers with real keys, queries, subscriptions."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from graphql import GraphQLError
from strawberry.types import ExecutionResult

from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE, create_key
from worker_automation.resolvers.services import Services
from worker_automation.schema import GraphQLContext, WorkerAutomationSchema, build_schema

STEP_TIMEOUT = 10.0


@dataclass
class Api:
    """The schema over started services, with one key per kind of caller."""

    schema: WorkerAutomationSchema
    services: Services
    keys: dict[str, str] = field(default_factory=dict)

    def context(self, caller: str | None = "admin", headers: dict[str, str] | None = None) -> GraphQLContext:
        sent = dict(headers or {})
        if caller is not None:
            sent["X-API-Key"] = self.keys.get(caller, caller)
        return GraphQLContext(self.services, sent)

    async def run(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        caller: str | None = "admin",
        headers: dict[str, str] | None = None,
    ) -> ExecutionResult:
        return await self.schema.execute(
            query, variable_values=variables, context_value=self.context(caller, headers)
        )

    async def ok(self, query: str, variables: dict[str, Any] | None = None, caller: str = "admin") -> Any:
        result = await self.run(query, variables, caller)
        assert result.errors is None, [e.formatted for e in result.errors or []]
        return result.data

    async def fails(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        caller: str | None = "admin",
        headers: dict[str, str] | None = None,
    ) -> GraphQLError:
        result = await self.run(query, variables, caller, headers)
        assert result.errors, f"expected an error, got {result.data}"
        return result.errors[0]

    async def dispatch(self, automation: str = "demo.echo", **fields: Any) -> dict[str, Any]:
        data = await self.ok(
            "mutation($input: DispatchInput!) "
            "{ dispatchAutomation(input: $input) { id taskId status queue } }",
            {"input": {"automationType": automation, **fields}},
        )
        job: dict[str, Any] = data["dispatchAutomation"]
        return job


async def make_api(services: Services) -> Api:
    """Keys: admin (administrador, read+write), operator (funcionario, read+write), reader (read)."""
    api = Api(build_schema(services.settings), services)
    for name, perfil, scopes in (
        ("admin", "administrador", [SCOPE_READ, SCOPE_WRITE]),
        ("operator", "funcionario", [SCOPE_READ, SCOPE_WRITE]),
        ("reader", "funcionario", [SCOPE_READ]),
    ):
        api.keys[name] = (await create_key(services.db, name=name, perfil=perfil, scopes=scopes)).secret
    await services.events.ready()
    return api


def code(error: GraphQLError) -> str | None:
    return (error.extensions or {}).get("code")


class Subscription:
    """A running ``schema.subscribe`` whose results are read one at a time."""

    def __init__(self, stream: AsyncGenerator[ExecutionResult, None]) -> None:
        self._stream = stream
        self._results: asyncio.Queue[ExecutionResult | None] = asyncio.Queue()
        self._pump = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for result in self._stream:
                await self._results.put(result)
        finally:
            await self._results.put(None)

    async def next(self, within: float = STEP_TIMEOUT) -> ExecutionResult | None:
        """The next result; None once the subscription completed."""
        return await asyncio.wait_for(self._results.get(), within)

    async def data(self, within: float = STEP_TIMEOUT) -> Any:
        result = await self.next(within)
        assert result is not None, "the subscription ended"
        assert not result.errors, [e.formatted for e in result.errors]
        return result.data

    async def close(self) -> None:
        self._pump.cancel()
        with contextlib.suppress(BaseException):
            await self._pump
        with contextlib.suppress(BaseException):
            await self._stream.aclose()


@contextlib.asynccontextmanager
async def subscribed(
    api: Api, query: str, variables: dict[str, Any] | None = None, context: GraphQLContext | None = None
) -> AsyncIterator[Subscription]:
    """Subscribe and wait until its feed listens to the bus, so no later event can be missed."""
    before = api.services.events.listener_count
    stream = await api.schema.subscribe(
        query, variable_values=variables, context_value=context or api.context("reader")
    )
    assert not isinstance(stream, ExecutionResult), stream
    sub = Subscription(stream)
    try:
        for _ in range(200):
            if api.services.events.listener_count > before or sub._results.qsize():
                break
            await asyncio.sleep(0.01)
        yield sub
    finally:
        await sub.close()
