"""What the API shares between callers, and the one rule that makes sharing invisible to them.

The rule: **a caller is only ever handed what it would have computed itself, at the moment it
asked.** Two kinds of work pass that test, and nothing else is shared or kept:

- Reads of the database, shared while in flight (:class:`SharedReads`). Keyed by the read and its
  arguments (for an answer: the route or the GraphQL request body, and the caller's rights).
  Identical reads that arrive together run once, but a caller that finds its twin already running
  waits for the *next* run, which starts as soon as the current one ends: its result was computed
  entirely after the call, so a write committed before the call is always in it. Nothing is kept
  once the run's callers have their answer: under concurrent writes no caller can get a state
  older than its own call, and however many callers there are, one run per key goes at a time.

- Pure functions of their key (:class:`Recent`), kept for the last few keys: the parse of a
  GraphQL document (keyed by its text and the token limit), the validation verdict of a schema on
  a document, the payload object built for one bus event (keyed by the event id and time zone).
  These never depend on the database, so no write can make them stale; the bound only caps
  memory.

Subscribers of the same subscription (document, operation, variables) go further: they read one
running stream, :mod:`worker_automation.schema.live_views`, whose payloads are computed once and
written to each; that is the stream every one of them would have run, not a kept answer.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _relay(source: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif (exc := source.exception()) is not None:
        target.set_exception(exc)
    else:
        target.set_result(source.result())


def consume(future: asyncio.Future[Any]) -> None:
    """Mark a finished future's outcome as seen, so that asyncio does not report an exception
    nobody was left to retrieve (every waiter may have gone away: a client disconnected)."""
    if not future.cancelled():
        future.exception()


class Coalesced(Generic[T]):
    """One read that many callers may ask for at the same time."""

    def __init__(self, compute: Callable[[], Awaitable[T]]) -> None:
        self._compute = compute
        self.loop = asyncio.get_running_loop()
        self._running: asyncio.Future[T] | None = None
        self._next: asyncio.Future[T] | None = None

    @property
    def idle(self) -> bool:
        return self._running is None and self._next is None

    async def __call__(self) -> T:
        if self._running is None:
            return await self._run_here()
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            self._next.add_done_callback(consume)
        # Shielded: one caller going away must not cancel the run the others wait for.
        return await asyncio.shield(self._next)

    async def _run_here(self) -> T:
        """A run nobody else is waiting for, in the caller's own task.

        Callers arriving during a run wait for the next one, so a run started by an idle read has
        exactly one caller: it needs no task of its own (nor a shield, which only keeps a shared
        run going when one of its callers leaves). Callers waiting meanwhile start the next run
        when it ends, however it ends.
        """
        self._running = self.loop.create_future()  # marks the run in flight; never awaited
        try:
            return await self._compute()
        finally:
            self._finished(self._running)

    def _start(self) -> asyncio.Future[T]:
        running: asyncio.Future[T] = asyncio.ensure_future(self._compute())
        self._running = running
        running.add_done_callback(consume)
        running.add_done_callback(self._finished)
        return running

    def _finished(self, _done: asyncio.Future[T]) -> None:
        self._running = None
        waiting, self._next = self._next, None
        if waiting is not None:
            following = self._start()
            following.add_done_callback(lambda done: _relay(done, waiting))


class SharedReads:
    """The coalesced reads of one process, by key (the operation and its arguments)."""

    def __init__(self) -> None:
        self._reads: dict[Hashable, Coalesced[Any]] = {}

    async def run(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> T:
        """``compute()``, or a share of the next run of it for callers with the same ``key``.

        ``compute`` must depend on nothing but ``key`` (and the database).
        """
        read = self._reads.get(key)
        if read is None or read.loop is not asyncio.get_running_loop():
            # (A run left behind by an event loop that ended can never finish: start afresh.)
            read = self._reads[key] = Coalesced(compute)
        try:
            result: T = await read()
        finally:
            # Forget keys nobody is reading: the map holds only what is in flight.
            if read.idle and self._reads.get(key) is read:
                del self._reads[key]
        return result

    def __len__(self) -> int:
        return len(self._reads)


class Recent(Generic[K, V]):
    """The values of a pure function for its last ``keep`` keys (least recently used out first).

    Only for values that depend on nothing but their key (see the module doc); a value may be
    ``None`` (a document that does not parse is remembered as such)."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._values: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, build: Callable[[], V]) -> V:
        """The value for ``key``, built by ``build()`` the first time it is asked for."""
        values = self._values
        if key in values:
            values.move_to_end(key)
            return values[key]
        value = values[key] = build()
        if len(values) > self._keep:
            values.popitem(last=False)
        return value

    def peek(self, key: K) -> V | None:
        """The value kept for ``key``, or None (nothing is built)."""
        return self._values.get(key)

    def put(self, key: K, value: V) -> None:
        self._values[key] = value
        self._values.move_to_end(key)
        if len(self._values) > self._keep:
            self._values.popitem(last=False)

    def __len__(self) -> int:
        return len(self._values)


# Documents parsed in this process, by (text, token limit): clients send the same few operations
# over and over (a screen's polling, thousands of identical subscriptions after a deploy).
PARSED_DOCUMENTS: Recent[tuple[str, int | None], Any] = Recent(256)


def parsed_document(query: str, max_tokens: int | None) -> Any:
    """The ``DocumentNode`` of ``query`` parsed with at most ``max_tokens`` tokens, or None when it
    does not parse (the caller then lets Strawberry parse it and report the error). Shared: read
    it, never change it."""
    from graphql import GraphQLError, parse  # the API's only: the worker never loads graphql

    def build() -> Any:
        try:
            return parse(query, max_tokens=max_tokens)
        except GraphQLError:
            return None

    return PARSED_DOCUMENTS.get((query, max_tokens), build)
