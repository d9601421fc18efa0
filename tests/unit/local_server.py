"""A uvicorn server on a free local port, for tests of ``serve``'s own HTTP and websocket
protocols."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.types import ASGIApp


@contextlib.asynccontextmanager
async def serving(app: ASGIApp, **options: Any) -> AsyncIterator[int]:
    """Serve ``app`` with uvicorn ``options`` on 127.0.0.1 until the block ends; yields the port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **options)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        await task
