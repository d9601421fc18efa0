"""Task messages sent by one thread, every send waiting at that moment in one round trip.

Celery's producer blocks, so sends run off the event loop. One send per executor thread cost the
API about three times what the send costs on its own: every message paid its round trips to
Redis (the task, then its task-sent event) and two thread hand-overs, with the loop and the
sending threads taking the GIL from each other at each step. Here one thread takes whatever sends
are waiting, publishes them inside one kombu publish batch (one Redis pipeline: each task's list
push and its task-sent event, in order) and settles their futures with one call into each loop.

A batch succeeds or fails as a whole: when the pipeline fails, every send of it raises, and the
caller treats each as not sent (the transport says delivery is then uncertain; a job whose
message did arrive after all is refused at claim as a stale task, and sync-orphans re-sends it).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Final

from celery import Celery

# Sends taken into one batch at most; a burst beyond it goes out in the next round trip.
MAX_BATCH: Final = 64


@dataclass(frozen=True)
class TaskSend:
    """One task message to publish."""

    task_name: str
    queue: str
    priority: int
    args: list[Any]
    task_id: str


@dataclass
class _Pending:
    send: TaskSend
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None] = field(repr=False)


_STOP: Final = object()


def _settle(pendings: list[_Pending], error: BaseException | None) -> None:
    """Runs in the pendings' loop: resolve each future still awaited."""
    for pending in pendings:
        if pending.future.done():  # the caller gave up (cancelled); the send happened anyway
            continue
        if error is None:
            pending.future.set_result(None)
        else:
            pending.future.set_exception(error)


class TaskSender:
    """Publishes task messages through ``app``'s producer pool from one thread of its own."""

    def __init__(self, app: Celery, *, max_batch: int = MAX_BATCH) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._app = app
        self._max_batch = max_batch
        self._waiting: queue.SimpleQueue[_Pending | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.batches = 0  # round trips made, for tests and curiosity

    async def send(self, send: TaskSend) -> None:
        """Publish ``send``; raises what the producer raised when its batch failed."""
        loop = asyncio.get_running_loop()
        pending = _Pending(send, loop, loop.create_future())
        self._start()
        self._waiting.put(pending)
        await pending.future

    def close(self, timeout: float = 5.0) -> None:
        """Send what is waiting, then stop the thread (blocks up to ``timeout`` seconds)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._waiting.put(_STOP)
            thread.join(timeout)

    def _start(self) -> None:
        if self._closed:
            raise RuntimeError("task sender closed")
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="task-sender", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[_Pending] = []
            item = self._waiting.get()
            while True:
                if item is _STOP:
                    stopping = True
                else:
                    assert isinstance(item, _Pending)
                    batch.append(item)
                if len(batch) >= self._max_batch:
                    break
                try:
                    item = self._waiting.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._publish(batch)

    def _publish(self, batch: list[_Pending]) -> None:
        error: BaseException | None = None
        try:
            with self._app.producer_or_acquire() as producer, producer.batch(max_size=4 * len(batch)):
                for pending in batch:
                    send = pending.send
                    self._app.send_task(
                        send.task_name,
                        args=send.args,
                        queue=send.queue,
                        priority=send.priority,
                        task_id=send.task_id,
                        producer=producer,
                    )
        except Exception as exc:
            error = exc
        self.batches += 1
        by_loop: dict[asyncio.AbstractEventLoop, list[_Pending]] = defaultdict(list)
        for pending in batch:
            by_loop[pending.loop].append(pending)
        for loop, pendings in by_loop.items():
            # A closed loop has nobody waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, pendings, error)
