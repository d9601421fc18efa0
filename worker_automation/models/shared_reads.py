"""Identical reads that arrive together share one computation, and nobody gets an older answer.

Dashboards poll the same aggregates from many screens at once. Running each of those reads once
per caller makes the cost grow with the number of watchers; caching them for a while would show
data older than the caller's own last write. Here a read that finds its twin already running
waits for the *next* run, which starts as soon as the current one ends: every caller gets a result
computed entirely after it asked, and however many callers there are, one computation per key
runs at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def _relay(source: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif (exc := source.exception()) is not None:
        target.set_exception(exc)
    else:
        target.set_result(source.result())


def _consume(future: asyncio.Future[Any]) -> None:
    # Every waiter may have gone away (a client disconnected): mark the outcome as seen so asyncio
    # does not report an exception nobody was left to retrieve.
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
            return await asyncio.shield(self._start())
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            self._next.add_done_callback(_consume)
        # Shielded: one caller going away must not cancel the run the others wait for.
        return await asyncio.shield(self._next)

    def _start(self) -> asyncio.Future[T]:
        running: asyncio.Future[T] = asyncio.ensure_future(self._compute())
        self._running = running
        running.add_done_callback(_consume)
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
