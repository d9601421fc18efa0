"""Task messages written on the event loop, every send waiting at that moment in one round trip.

Celery's producer blocks, so it ran in a thread; with its message building, its thread hand-overs
and the loop and the thread taking the GIL from each other, publishing was about half of a
dispatch request's CPU. Here the messages are built by :mod:`task_messages` (exactly what kombu's
Redis transport writes) and written with the API's asyncio Redis client: sends arriving in one
turn of the loop (a batch of jobs, concurrent requests) go out together in one pipeline, each
task's list push followed by its task-sent event when task events are on.

A round trip succeeds or fails as a whole: when the pipeline fails, every send of it raises, and
the caller treats each as not sent (delivery is then uncertain; a job whose message did arrive
after all is refused at claim as a stale task, and sync-orphans re-sends it).

Why: docs/decisions/0007-task-sender-batches.md, docs/decisions/0013-task-messages-written-by-the-api.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from kombu.exceptions import OperationalError
from redis.asyncio import Redis

from worker_automation.overrides.task_messages import Publication, TaskMessages, TaskSend

__all__ = ["CLOSED_MESSAGE", "TaskSend", "TaskSender"]

logger = logging.getLogger(__name__)

CLOSED_MESSAGE: Final = "task sender closed"


@dataclass
class _Round:
    """The sends of one turn of the loop, written in one pipeline: each caller's notices, then
    its messages, callers in the order they came."""

    notices: list[tuple[str, str | bytes]] = field(default_factory=list)
    publications: list[Publication] = field(default_factory=list)
    # Per caller: notices and publications it added (their order in the pipeline).
    parts: list[tuple[int, int]] = field(default_factory=list)
    futures: list[asyncio.Future[None]] = field(default_factory=list)


class TaskSender:
    """Writes task messages to the broker's Redis with ``redis``, on the caller's event loop.

    A send after :meth:`close` fails with kombu's ``OperationalError`` (the gateway's
    "unavailable"), as a send through Celery's producer would with the broker gone.
    """

    def __init__(self, redis: Redis, messages: TaskMessages) -> None:
        self._redis = redis
        self._messages = messages
        self._rounds: dict[asyncio.AbstractEventLoop, _Round] = {}
        self._writing: set[asyncio.Task[None]] = set()
        self._closed = False
        self.batches = 0  # round trips made, for tests and curiosity

    async def send(self, send: TaskSend) -> None:
        """Publish ``send``; raises what Redis raised when its round trip failed."""
        await self._join([send])

    async def send_many(
        self, sends: Sequence[TaskSend], *, notices: Sequence[tuple[str, str | bytes]] = ()
    ) -> None:
        """Publish every send of ``sends`` in one round trip (with any others waiting); all or none.

        ``notices``: (channel, message) pairs ``PUBLISH``-ed in the same round trip, before the
        tasks (the events announcing the jobs, say), and failing with them.
        """
        if sends or notices:
            await self._join(sends, notices)

    async def _join(self, sends: Sequence[TaskSend], notices: Sequence[tuple[str, str | bytes]] = ()) -> None:
        if self._closed:
            raise OperationalError(CLOSED_MESSAGE)
        # Built first: a bad send fails on its own, before it can spoil the round it would join.
        publications = [self._messages.publication(send) for send in sends]
        loop = asyncio.get_running_loop()
        round_ = self._rounds.get(loop)
        if round_ is None:
            round_ = self._rounds[loop] = _Round()
            # After the callbacks already due in this turn: sends made by them join this round.
            loop.call_soon(self._start, loop)
        round_.notices.extend(notices)
        round_.publications.extend(publications)
        round_.parts.append((len(notices), len(publications)))
        future: asyncio.Future[None] = loop.create_future()
        round_.futures.append(future)
        await future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        round_ = self._rounds.pop(loop)
        task = loop.create_task(self._write(round_))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)

    async def _write(self, round_: _Round) -> None:
        error: Exception | None = None
        try:
            publications = round_.publications
            if not round_.notices and len(publications) == 1 and publications[0].event is None:
                await self._redis.lpush(publications[0].key, publications[0].message)
            else:
                async with self._redis.pipeline(transaction=False) as pipe:
                    notices, messages = iter(round_.notices), iter(publications)
                    for notice_count, publication_count in round_.parts:
                        for _ in range(notice_count):
                            pipe.publish(*next(notices))
                        for _ in range(publication_count):
                            publication = next(messages)
                            pipe.lpush(publication.key, publication.message)
                            if publication.event is not None:
                                pipe.publish(self._messages.event_channel, publication.event)
                    await pipe.execute()
        except asyncio.CancelledError:
            # The loop is shutting down: its senders learn their messages may not have gone out.
            error = OperationalError(CLOSED_MESSAGE)
            self._settle(round_, error)
            raise
        except Exception as exc:  # handed to every sender of the round, re-raised by each
            error = exc
        self.batches += 1
        self._settle(round_, error)

    @staticmethod
    def _settle(round_: _Round, error: Exception | None) -> None:
        for future in round_.futures:
            if future.done():  # the caller gave up (cancelled); the send happened anyway
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

    async def close(self) -> None:
        """Refuse new sends and wait for the writes under way."""
        self._closed = True
        # Rounds not started yet start in this turn of their loop; give them that turn.
        await asyncio.sleep(0)
        if self._writing:
            await asyncio.gather(*self._writing, return_exceptions=True)
