"""Waiting for the API to answer: capped exponential backoff with jitter, stopped on shutdown.

A worker that cannot reach its API (restarting, its database down) keeps what it holds, its task
message unacknowledged and its reports in the outbox, and asks again later rather than dropping
the work; only a shutdown ends the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, TypeVar

from worker_automation.worker.client import ApiError
from worker_automation.worker.http import ApiTimeout, ApiUnreachable

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_DELAY_SECONDS: Final = 1.0
MAX_DELAY_SECONDS: Final = 30.0


class Stopped(Exception):
    """The wait for the API ended because the process is shutting down."""


def unanswered(exc: BaseException) -> bool:
    """True for what says the API did not act on a request: no answer, or a 5xx (503 while its
    database or broker is down)."""
    if isinstance(exc, ApiError):
        return exc.status_code >= 500
    return isinstance(exc, ApiUnreachable | ApiTimeout)


def delays(first: float = FIRST_DELAY_SECONDS, cap: float = MAX_DELAY_SECONDS) -> Iterator[float]:
    """Doubling delays from ``first`` up to ``cap``, each drawn in its upper half (so workers
    cut off together do not all come back in the same instant)."""
    ceiling = first
    while True:
        yield ceiling * random.uniform(0.5, 1.0)
        ceiling = min(cap, ceiling * 2)


async def sleep_unless(stopping: asyncio.Event | None, seconds: float) -> bool:
    """Sleep ``seconds``; False at once when ``stopping`` is set (before or during the sleep)."""
    if stopping is None:
        await asyncio.sleep(seconds)
        return True
    if stopping.is_set():
        return False
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)
        return False
    return True


async def patiently(
    call: Callable[[], Awaitable[T]],
    what: str,
    stopping: asyncio.Event | None = None,
    *,
    first: float = FIRST_DELAY_SECONDS,
    cap: float = MAX_DELAY_SECONDS,
) -> T:
    """``call()`` again and again until the API answers it; Stopped when ``stopping`` is set
    first. Any answer (including a 4xx raised as ApiError) ends the wait."""
    waits = delays(first, cap)
    while True:
        if stopping is not None and stopping.is_set():
            raise Stopped(what)
        try:
            return await call()
        except (ApiUnreachable, ApiTimeout, ApiError) as exc:
            if not unanswered(exc):
                raise
            delay = next(waits)
            log.warning("%s: no answer from the API (%s); trying again in %.1fs", what, exc, delay)
            if not await sleep_unless(stopping, delay):
                raise Stopped(what) from exc
