"""Giving memory back after large answers (over HTTP and websockets alike) and large announcements.

A large GraphQL answer (megabytes of contexts and results) leaves its objects in reference cycles
of the execution machinery, which only a full collection frees; CPython runs those rarely, so the
process would keep its peak size long after the answer left. An operation on many rows (a purge,
a bulk cancel) reads and announces megabytes of contexts behind a small answer. After an answer or
an announcement above :data:`LARGE_ANSWER_BYTES`, one full collection is scheduled shortly (a burst
gets one), and glibc is asked to return its freed pages (``malloc_trim``) where it is the allocator.

The trim is what gives the memory back: the collection frees the objects, but glibc keeps their
pages in its heap, between blocks still in use. Before both, the API lets the database's idle
connections go of the last bytes they received (see ``Database.refresh_idle_connections``). Why,
with figures: docs/decisions/0021-memory-trimmed-after-large-answers.md.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
from collections.abc import Awaitable, Callable
from typing import Final

_log = logging.getLogger(__name__)

LARGE_ANSWER_BYTES: Final = 1024 * 1024
# How long after a large answer the collection runs (answers arriving meanwhile share it).
COLLECT_DELAY_SECONDS: Final = 0.5


def _malloc_trim() -> None:
    """``malloc_trim(0)`` when the C library has it (glibc); nothing otherwise."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


class MemoryReleaser:
    """Schedules one full collection and trim after large answers and announcements.

    ``first``, when given, runs before them: something that lets go of what still holds the
    large answer's bytes (the database's idle connections keep the last bytes they read).
    """

    def __init__(
        self,
        threshold: int = LARGE_ANSWER_BYTES,
        delay: float = COLLECT_DELAY_SECONDS,
        first: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.threshold = threshold
        self.delay = delay
        self.first = first
        self._pending: asyncio.TimerHandle | None = None
        self._running: asyncio.Task[None] | None = None

    def handled(self, size: int) -> None:
        """Note ``size`` bytes just answered or announced."""
        if size < self.threshold or self._pending is not None:
            return
        self._pending = asyncio.get_running_loop().call_later(self.delay, self._release)

    def _release(self) -> None:
        self._pending = None
        if self.first is None:
            _collect_and_trim()
        elif self._running is None or self._running.done():
            self._running = asyncio.get_running_loop().create_task(self._release_after_first(self.first))

    async def _release_after_first(self, first: Callable[[], Awaitable[None]]) -> None:
        try:
            await first()
        except Exception:  # the collection and the trim still run; the next large answer tries again
            _log.warning("letting go of a large answer's buffers failed", exc_info=True)
        _collect_and_trim()


def _collect_and_trim() -> None:
    gc.collect()
    _malloc_trim()
