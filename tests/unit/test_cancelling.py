"""Stopping a background task ends it even when it swallowed a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from worker_automation.infra.cancelling import cancel_and_wait


async def poll_forever(swallow: list[int], polls: list[int]) -> None:
    """A loop of timed waits that, like ``asyncio.timeout`` on Python 3.11 when its deadline and
    a cancellation meet in one turn, loses the next ``swallow[0]`` cancellations."""
    while True:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            if swallow[0] == 0:
                raise
            swallow[0] -= 1
            current = asyncio.current_task()
            assert current is not None
            current.uncancel()
        polls.append(1)


async def test_a_task_that_swallowed_the_cancellation_is_cancelled_again() -> None:
    polls: list[int] = []
    task = asyncio.create_task(poll_forever([2], polls))
    await asyncio.sleep(0.01)
    await asyncio.wait_for(cancel_and_wait(task), 5)
    assert task.cancelled()
    assert polls  # it did go on after the first cancellation


async def test_a_plain_cancel_then_await_would_wait_forever() -> None:
    """The hazard itself: awaiting the task after one cancel() does not end."""
    task = asyncio.create_task(poll_forever([1], []))
    await asyncio.sleep(0.01)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.3)
    assert not done
    await cancel_and_wait(task)
    assert task.cancelled()


async def test_ended_tasks_and_none_are_accepted_and_errors_do_not_stop_the_stopping(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fail() -> None:
        raise RuntimeError("broken")

    failed = asyncio.create_task(fail())
    await asyncio.sleep(0)
    finished = asyncio.create_task(asyncio.sleep(0))
    await finished
    await cancel_and_wait(None, failed, finished)
    assert "ended with an error" in caplog.text


async def test_the_callers_own_cancellation_is_not_absorbed() -> None:
    swallow = [10**6]  # it goes on until told otherwise
    inner = asyncio.create_task(poll_forever(swallow, []))

    async def stopper() -> None:
        await cancel_and_wait(inner)

    outer = asyncio.create_task(stopper())
    await asyncio.sleep(0.1)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert not inner.done()
    swallow[0] = 0
    await cancel_and_wait(inner)
