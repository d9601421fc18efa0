"""The task sender: sends waiting together go out in one batch, and a batch fails as a whole."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kombu.exceptions import OperationalError

from worker_automation.broker.task_sender import TaskSend, TaskSender


class _Producer:
    def __init__(self, app: FakeApp) -> None:
        self.app = app

    @contextlib.contextmanager
    def batch(self, max_size: int) -> Iterator[None]:
        self.app.open_batch = []
        try:
            yield
        except BaseException:
            self.app.open_batch = None
            raise
        if self.app.fail_flush:
            self.app.open_batch = None
            raise ConnectionError("pipeline failed")
        self.app.batches.append(self.app.open_batch)
        self.app.open_batch = None


class FakeApp:
    """Records what was published, batch by batch; the first send can be held back."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.open_batch: list[str] | None = None
        self.fail_flush = False
        self.hold = threading.Event()
        self.hold.set()
        self.holding = threading.Event()
        self.raise_once: BaseException | None = None

    @contextlib.contextmanager
    def producer_or_acquire(self) -> Iterator[_Producer]:
        yield _Producer(self)

    def send_task(
        self, name: str, *, args: list[Any], queue: str, priority: int, task_id: str, producer: Any
    ) -> None:
        assert isinstance(producer, _Producer) and self.open_batch is not None
        if not self.hold.is_set():
            self.holding.set()
            self.hold.wait(5)
        if self.raise_once is not None:
            error, self.raise_once = self.raise_once, None
            raise error
        self.open_batch.append(task_id)


def send(n: int) -> TaskSend:
    return TaskSend("demo.echo", "scan", 0, [n], f"task-{n}")


async def held_send(app: FakeApp, sender: TaskSender, n: int) -> asyncio.Task[None]:
    """Send ``n`` and return once the sending thread is stuck publishing it (until app.hold)."""
    app.hold.clear()
    task = asyncio.create_task(sender.send(send(n)))
    await asyncio.to_thread(app.holding.wait, 5)
    return task


async def test_sends_waiting_together_share_a_batch_in_order() -> None:
    app = FakeApp()
    sender = TaskSender(app, max_batch=8)  # type: ignore[arg-type]
    try:
        first = await held_send(app, sender, 0)
        # While the first batch is being published, twenty more sends arrive.
        rest = [asyncio.create_task(sender.send(send(n))) for n in range(1, 21)]
        await asyncio.sleep(0.05)
        app.hold.set()
        await asyncio.gather(first, *rest)
    finally:
        sender.close()
    assert app.batches[0] == ["task-0"]
    # The twenty waited together: batches of at most eight, in arrival order.
    assert [len(batch) for batch in app.batches[1:]] == [8, 8, 4]
    assert [task for batch in app.batches for task in batch] == [f"task-{n}" for n in range(21)]
    assert sender.batches == 4


async def test_a_failed_batch_fails_every_send_in_it_and_the_sender_goes_on() -> None:
    app = FakeApp()
    sender = TaskSender(app)  # type: ignore[arg-type]
    try:
        app.fail_flush = True
        results = await asyncio.gather(*(sender.send(send(n)) for n in range(5)), return_exceptions=True)
        assert all(isinstance(result, ConnectionError) for result in results)
        app.fail_flush = False
        await sender.send(send(99))
    finally:
        sender.close()
    assert app.batches == [["task-99"]]


async def test_a_cancelled_send_leaves_the_others_alone() -> None:
    app = FakeApp()
    sender = TaskSender(app)  # type: ignore[arg-type]
    try:
        held = await held_send(app, sender, 0)
        held.cancel()
        app.hold.set()
        with pytest.raises(asyncio.CancelledError):
            await held
        await sender.send(send(1))
    finally:
        sender.close()
    # The cancelled caller stopped waiting; its message had already gone out.
    assert [task for batch in app.batches for task in batch] == ["task-0", "task-1"]


class Stop(BaseException):
    """Not an Exception: ends the sending thread the way SystemExit would."""


async def test_a_dying_thread_fails_what_it_held_and_what_waited_and_is_replaced() -> None:
    app = FakeApp()
    sender = TaskSender(app, max_batch=1)  # type: ignore[arg-type]
    try:
        app.raise_once = Stop()
        first = await held_send(app, sender, 0)
        queued = [asyncio.create_task(sender.send(send(n))) for n in (1, 2)]
        await asyncio.sleep(0.05)
        app.hold.set()
        with pytest.raises(Stop):
            await asyncio.wait_for(first, 5)
        for task in queued:
            with pytest.raises(OperationalError, match="closed"):
                await asyncio.wait_for(task, 5)
        # The next send gets a thread of its own.
        await asyncio.wait_for(sender.send(send(3)), 5)
    finally:
        sender.close()
    assert app.batches == [["task-3"]]


async def test_close_sends_what_waits_then_refuses() -> None:
    app = FakeApp()
    sender = TaskSender(app)  # type: ignore[arg-type]
    await sender.send(send(0))
    held = await held_send(app, sender, 1)
    queued = asyncio.create_task(sender.send(send(2)))
    await asyncio.sleep(0.05)
    closing = asyncio.create_task(asyncio.to_thread(sender.close))
    await asyncio.sleep(0.05)
    app.hold.set()
    await asyncio.wait_for(asyncio.gather(held, queued, closing), 5)
    assert app.batches == [["task-0"], ["task-1"], ["task-2"]]
    # Refused as the broker refuses: the gateway answers "unavailable".
    with pytest.raises(OperationalError, match="closed"):
        await sender.send(send(3))


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TaskSender(FakeApp(), max_batch=0)  # type: ignore[arg-type]
