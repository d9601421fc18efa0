"""What a long command says while it works: on stderr, so stdout keeps only its answer."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# How often a command that has nothing finer to tell says it is still at it.
TICK_SECONDS = 3.0


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@asynccontextmanager
async def ticking(doing: str, every: float = TICK_SECONDS) -> AsyncIterator[None]:
    """Say ``doing...`` now, then how long it has taken every ``every`` seconds until the block
    ends."""
    say(f"{doing}...")
    started = time.monotonic()

    async def tick() -> None:
        while True:
            await asyncio.sleep(every)
            say(f"  still {doing} ({time.monotonic() - started:.0f} s)")

    ticker = asyncio.create_task(tick())
    try:
        yield
    finally:
        ticker.cancel()
