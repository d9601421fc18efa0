"""The task sender: sends waiting together go out in one batch, and a batch fails as a whole."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

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
        self.open_batch.append(task_id)


def send(n: int) -> TaskSend:
    return TaskSend("demo.echo", "scan", 0, [n], f"task-{n}")


async def test_sends_waiting_together_share_a_batch_in_order() -> None:
    app = FakeApp()
    sender = TaskSender(app, max_batch=8)  # type: ignore[arg-type]
    try:
        app.hold.clear()
        first = asyncio.create_task(sender.send(send(0)))
        await asyncio.to_thread(app.holding.wait, 5)
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
        app.hold.clear()
        held = asyncio.create_task(sender.send(send(0)))
        await asyncio.to_thread(app.holding.wait, 5)
        held.cancel()
        app.hold.set()
        with pytest.raises(asyncio.CancelledError):
            await held
        await sender.send(send(1))
    finally:
        sender.close()
    # The cancelled caller stopped waiting; its message had already gone out.
    assert [task for batch in app.batches for task in batch] == ["task-0", "task-1"]


async def test_close_sends_what_waits_then_refuses() -> None:
    app = FakeApp()
    sender = TaskSender(app)  # type: ignore[arg-type]
    await sender.send(send(0))
    sender.close()
    assert app.batches == [["task-0"]]
    with pytest.raises(RuntimeError, match="closed"):
        await sender.send(send(1))


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TaskSender(FakeApp(), max_batch=0)  # type: ignore[arg-type]
