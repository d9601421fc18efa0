"""Ending background tasks for certain.

On Python 3.11, ``asyncio.timeout`` and ``asyncio.wait_for`` can swallow a cancellation that
arrives in the same turn of the loop as their own deadline (python/cpython#86296, fixed in 3.12).
A task looping on timed waits (a pub/sub reader polling ``get_message(timeout=...)``, a periodic
loop) then simply goes on, and whoever awaited it after ``cancel()`` waits forever: a process that
never finishes stopping. :func:`cancel_and_wait` repeats the cancellation until the task has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Final

log = logging.getLogger(__name__)

# How long one cancellation is given before it is delivered again.
RECANCEL_SECONDS: Final = 0.5


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel ``tasks`` and return once every one has ended.

    ``asyncio.wait`` neither raises the tasks' ``CancelledError`` nor absorbs the caller's own
    cancellation. A task that ended with an exception has it logged, not raised: stopping goes on.
    """
    pending = {task for task in tasks if task is not None}
    owned = set(pending)
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_SECONDS)
        if pending:
            log.debug("%d task(s) went on after a cancellation; cancelling again", len(pending))
    for task in owned:
        if not task.cancelled() and task.exception() is not None:
            log.warning("a background task ended with an error while stopping", exc_info=task.exception())


async def end_patiently(task: asyncio.Future[Any] | None, patience: float) -> None:
    """Let ``task`` end by itself for up to ``patience`` seconds, then cancel it for certain.

    For work holding a database connection: cancelled in the middle of a statement, a connection
    may never go back to its pool, and the garbage collector closes it later instead."""
    if task is None:
        return
    with contextlib.suppress(Exception):  # its own error is logged by cancel_and_wait
        await asyncio.wait_for(asyncio.shield(task), patience)
    await cancel_and_wait(task)
