"""Building blocks of the subscriptions: a subscriber's event feed and coalescing.

Every subscription reads the process's one event bus through a :class:`Feed`. A subscriber that
falls too far behind is dropped by the bus; the feed then listens again and reports a ``resync``
event, exactly as after a Redis outage: whatever was missed, current state must be read again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, TypeVar

from worker_automation.broker.events import Event, EventBus, Listener
from worker_automation.domain.vocabulary import EventKind, QueueChange

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
            return Event(kind=EventKind.RESYNC, job={})

    def close(self) -> None:
        """Stop listening."""
        self._listener.close()

    async def events(self) -> AsyncIterator[Event]:
        """Every event as it comes (a ``RESYNC`` after missed ones), until the bus stops."""
        while True:
            try:
                event = await self.next()
            except FeedClosed:
                return
            if event is not None:
                yield event


async def coalesced(
    feed: Feed, load: Callable[[], Awaitable[T]], interval: float = COALESCE_SECONDS
) -> AsyncIterator[T]:
    """The state at once, then a fresh state after changes: at most one per ``interval``.

    The first change after a quiet spell is pushed at once; changes inside a burst are folded into
    one push when ``interval`` has passed since the previous one, so the last push always follows
    the last change; a state equal to the one pushed before is not pushed again. Each ``load``
    starts after the events it follows were heard (events are published after their transaction
    commits), so its state includes them.
    """
    loop = asyncio.get_running_loop()
    last = await load()
    yield last
    pushed = loop.time()
    dirty = False
    while True:
        try:
            if not dirty:
                await feed.next()
                dirty = True
                continue
            wait = pushed + interval - loop.time()
            if wait > 0 and await feed.next(within=wait) is not None:
                continue
        except FeedClosed:
            return
        dirty = False
        value = await load()
        pushed = loop.time()
        # An event heard while a snapshot was being read may already be in it: no repeat push.
        if value != last:
            last = value
            yield value
