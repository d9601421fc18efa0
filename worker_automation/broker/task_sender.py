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
import logging
import queue
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Final

from celery import Celery
from kombu.exceptions import OperationalError

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class _Pending:
    send: TaskSend
    future: asyncio.Future[None] = field(repr=False)  # of the sender's loop


_STOP: Final = object()
CLOSED_MESSAGE: Final = "task sender closed"


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
    """Publishes task messages through ``app``'s producer pool from one thread of its own.

    No send is left waiting: one that comes after :meth:`close`, or is still queued when the
    thread stops or dies, fails with the broker's ``OperationalError`` (the gateway's
    "unavailable"); a thread that died is replaced by the next send.
    """

    def __init__(self, app: Celery, *, max_batch: int = MAX_BATCH) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._app = app
        self._max_batch = max_batch
        self._waiting: queue.SimpleQueue[_Pending | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        # Guards _closed and _thread, and orders each put against close() and a thread's exit.
        self._lock = threading.Lock()
        self._closed = False
        self.batches = 0  # round trips made, for tests and curiosity

    async def send(self, send: TaskSend) -> None:
        """Publish ``send``; raises what the producer raised when its batch failed."""
        pending = _Pending(send, asyncio.get_running_loop().create_future())
        with self._lock:
            if self._closed:
                raise OperationalError(CLOSED_MESSAGE)
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="task-sender", daemon=True)
                thread.start()
                self._thread = thread
            self._waiting.put(pending)
        await pending.future

    def close(self, timeout: float = 5.0) -> None:
        """Send what is waiting, then stop the thread (blocks up to ``timeout`` seconds)."""
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._waiting.put(_STOP)
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        try:
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
                    if stopping or len(batch) >= self._max_batch:
                        break
                    try:
                        item = self._waiting.get_nowait()
                    except queue.Empty:
                        break
                if batch and not self._publish(batch):
                    return
        finally:
            # Whatever is still queued now would wait forever: fail it. A send arriving after
            # this starts a thread of its own (unless closed).
            with self._lock:
                self._thread = None
                left = self._take_waiting()
            _answer(left, OperationalError(CLOSED_MESSAGE))

    def _take_waiting(self) -> list[_Pending]:
        taken: list[_Pending] = []
        while True:
            try:
                item = self._waiting.get_nowait()
            except queue.Empty:
                return taken
            if isinstance(item, _Pending):
                taken.append(item)

    def _publish(self, batch: list[_Pending]) -> bool:
        """Publish ``batch`` and answer its senders; False when the thread must end."""
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
        except BaseException as exc:
            error = exc
        self.batches += 1
        _answer(batch, error)
        if error is not None and not isinstance(error, Exception):
            # SystemExit and the like end the thread; the next send starts another.
            logger.error("task sender stopped by %r", error)
            return False
        return True


def _answer(pendings: list[_Pending], error: BaseException | None) -> None:
    """Settle ``pendings`` in their own loops, one call into each loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Pending]] = defaultdict(list)
    for pending in pendings:
        by_loop[pending.future.get_loop()].append(pending)
    for loop, mine in by_loop.items():
        # A closed loop has nobody waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, mine, error)
