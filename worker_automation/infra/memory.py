"""Giving memory back after large answers, over HTTP and over websockets alike.

A large GraphQL answer (megabytes of contexts and results) leaves its objects in reference cycles
of the execution machinery, which only a full collection frees; CPython runs those rarely, so the
process would keep its peak size long after the answer left. After an answer above
:data:`LARGE_ANSWER_BYTES`, one full collection is scheduled shortly (a burst of large answers
gets one), and glibc is asked to return its freed pages (``malloc_trim``) where it is the allocator.

The trim is what gives the memory back: the collection frees the objects, but glibc keeps their
pages in its heap, between blocks still in use. Why, with figures:
docs/decisions/0021-memory-trimmed-after-large-answers.md.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
from typing import Final

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
    """Schedules one full collection and trim after large answers."""

    def __init__(self, threshold: int = LARGE_ANSWER_BYTES, delay: float = COLLECT_DELAY_SECONDS) -> None:
        self.threshold = threshold
        self.delay = delay
        self._pending: asyncio.TimerHandle | None = None

    def answered(self, size: int) -> None:
        """Note an answer of ``size`` bytes just sent."""
        if size < self.threshold or self._pending is not None:
            return
        self._pending = asyncio.get_running_loop().call_later(self.delay, self._release)

    def _release(self) -> None:
        self._pending = None
        gc.collect()
        _malloc_trim()
