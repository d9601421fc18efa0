"""graphql-core's executor without the reference cycle it builds for every execution.

Each executor gives its resolvers helpers (``info.async_helpers``) made of two of its own bound
methods, and keeps them: executor -> helpers -> bound method -> executor. Everything the execution
touched hangs from that cycle (the request context with the HTTP request and response, uvicorn's
request cycle, the resolve infos), so nothing of a GraphQL request was freed when it ended: about
56 objects per request waited for the garbage collector. Under load a young-generation collection
then freed ~40,000 of them at once and paused the event loop for 10-60 ms, which every request in
flight paid (`{ __typename }` at 32 clients: p99 3-4x its median).

Here the helpers reach the executor through a weak reference, so an execution's objects are freed
as soon as its last reference goes. The helpers are only called while the execution runs (by
resolvers and graphql-core itself), when the executor is alive; the subscription event executors,
shallow copies, keep calling the executor they were copied from, as graphql-core's helpers do.

What it buys, side by side in one run (``bench.scale``, 32 clients, 5 runs): ``{ __typename }`` p99
21 ms instead of 71 ms, ``queueLiveStatus`` p99 41 ms instead of 68 ms (target < 100 ms), a GraphQL
list page p99 79 ms instead of 97 ms (target < 50 ms). What it relies on (the executor keeps its
helpers in ``async_helpers`` and hands them to every resolve info) is checked by
``tests/contract/test_graphql_core_executor.py``.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Sequence
from typing import Any

from graphql import GraphQLResolveInfoHelpers
from graphql.execution import Executor
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext


class ExecutorGone(RuntimeError):
    """A resolver used ``info.async_helpers`` after its execution had ended."""


def weak_helpers(executor: Executor[Any]) -> GraphQLResolveInfoHelpers:
    """``executor``'s resolver helpers, holding it by a weak reference."""
    ref = weakref.ref(executor)

    def alive() -> Executor[Any]:
        found = ref()
        if found is None:
            raise ExecutorGone("info.async_helpers used after the GraphQL execution ended")
        return found

    def gather(values: Sequence[Awaitable[Any]]) -> Awaitable[list[Any]]:
        return alive().gather_async_work(values)

    def track(values: Sequence[Any]) -> None:
        alive().track_async_work(values)

    return GraphQLResolveInfoHelpers(gather=gather, track=track)


class AcyclicExecutionContext(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's execution context whose objects are freed when the execution ends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.async_helpers = weak_helpers(self)
