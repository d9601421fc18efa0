"""Building blocks of the subscriptions: a subscriber's event feed, coalescing, shared snapshots.

Every subscription reads the process's one event bus through a :class:`Feed`. A subscriber that
falls too far behind is dropped by the bus; the feed then listens again and reports a ``resync``
event, exactly as after a Redis outage: whatever was missed, current state must be read again.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, Generic, TypeVar

from worker_automation.broker.events import Event, EventBus, Listener
from worker_automation.vocabulary import EventKind, QueueChange

T = TypeVar("T")

# Snapshot subscriptions (queue load, dashboard) push at most this often, about 4 per second.
COALESCE_SECONDS: Final = 0.25
# Job events can come in bursts (a clear-queue cancels hundreds at once); a deeper queue rides
# them out instead of dropping the subscriber into a resync.
EVENT_QUEUE: Final = 1024


class FeedClosed(Exception):
    """The bus stopped (the process is shutting down): the subscription ends."""


class Feed:
    """One subscriber's view of the bus; created before reading state so nothing falls between.

    Job events only, unless ``queue_changes``: a queue's pause or resume concerns the views of the
    queues, not a subscriber of jobs.
    """

    def __init__(self, bus: EventBus, maxsize: int = EVENT_QUEUE, *, queue_changes: bool = False) -> None:
        self._bus = bus
        self._maxsize = maxsize
        self._queue_changes = queue_changes
        self._listener: Listener = bus.listen(maxsize)

    async def next(self, within: float | None = None) -> Event | None:
        """The next event; None when ``within`` seconds pass first; FeedClosed when the bus stopped."""
        if self._queue_changes:
            return await self._next(within)
        loop = asyncio.get_running_loop()
        deadline = None if within is None else loop.time() + within
        while True:
            event = await self._next(None if deadline is None else max(0.0, deadline - loop.time()))
            if event is None or not isinstance(event.kind, QueueChange):
                return event

    async def _next(self, within: float | None) -> Event | None:
        try:
            if within is None:
                return await self._listener.__anext__()
            async with asyncio.timeout(within):
                return await self._listener.__anext__()
        except TimeoutError:
            return None
        except StopAsyncIteration:
            if not self._listener.dropped:
                raise FeedClosed from None
            self._listener = self._bus.listen(self._maxsize)
            return Event(kind=EventKind.RESYNC, worker={})

    def close(self) -> None:
        """Stop listening."""
        self._listener.close()


class SharedLoad(Generic[T]):
    """One computation of a snapshot shared by every subscriber that needs one at the same time.

    A snapshot started after a subscriber heard its last event reflects that event (events are
    published after their transaction commits), so it can be handed to that subscriber as well.
    """

    def __init__(self) -> None:
        self._started = float("-inf")
        self._task: asyncio.Task[T] | None = None

    async def get(self, fresh_after: float, load: Callable[[], Awaitable[T]]) -> T:
        """A snapshot started at or after ``fresh_after`` (loop time), computing one if needed."""
        task = self._task
        usable = task is not None and self._started >= fresh_after
        if usable and task is not None and task.done() and (task.cancelled() or task.exception()):
            usable = False
        if not usable or task is None:
            loop = asyncio.get_running_loop()
            self._started = loop.time()

            async def run() -> T:
                return await load()

            task = self._task = loop.create_task(run())
        # One subscriber going away must not cancel the others' snapshot.
        return await asyncio.shield(task)


# Snapshots are shared per event bus (one per process); the bus going away frees them.
_SHARED: weakref.WeakKeyDictionary[EventBus, dict[Any, SharedLoad[Any]]] = weakref.WeakKeyDictionary()


def shared_load(bus: EventBus, key: Any) -> SharedLoad[Any]:
    """The shared snapshot slot named ``key`` of ``bus``'s process."""
    slots = _SHARED.setdefault(bus, {})
    slot = slots.get(key)
    if slot is None:
        slot = slots[key] = SharedLoad()
    return slot


async def coalesced(
    feed: Feed, load: Callable[[float], Awaitable[T]], interval: float = COALESCE_SECONDS
) -> AsyncIterator[T]:
    """The state at once, then a fresh state after changes: at most one per ``interval``.

    The first change after a quiet spell is pushed at once; changes inside a burst are folded into
    one push when ``interval`` has passed since the previous one, so the last push always follows
    the last change; a state equal to the one pushed before is not pushed again. ``load`` gets the
    loop time of the last event heard (see :class:`SharedLoad`).
    """
    loop = asyncio.get_running_loop()
    heard = loop.time()
    last = await load(heard)
    yield last
    pushed = loop.time()
    dirty = False
    while True:
        try:
            if not dirty:
                await feed.next()
                heard, dirty = loop.time(), True
                continue
            wait = pushed + interval - loop.time()
            if wait > 0 and await feed.next(within=wait) is not None:
                heard = loop.time()
                continue
        except FeedClosed:
            return
        dirty = False
        value = await load(heard)
        pushed = loop.time()
        # An event heard while a snapshot was being read may already be in it: no repeat push.
        if value != last:
            last = value
            yield value
