"""Frames written straight to a websocket by ``serve``'s protocol reach the client whole and in
order among the ordinary sends, and the protocol declines when a frame would be wrong."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import connect

from tests.unit import local_server
from worker_automation.overrides.ws_protocol import FramedWebSocketProtocol, frame_writer, text_frame

SIZES = (0, 125, 126, 65_535, 65_536, 200_000)


async def talk(websocket: WebSocket) -> None:
    await websocket.accept()
    writer = frame_writer(websocket.scope)
    await websocket.receive_text()
    if writer is None:
        await websocket.send_text("no writer")
        return
    written = [writer(text_frame(("x" * size).encode())) for size in SIZES]
    await websocket.send_text("ordinary")
    writer(text_frame("é".encode()))
    await websocket.send_text(f"written {written}")
    await websocket.receive_text()


@contextlib.asynccontextmanager
async def serving(**options: object) -> AsyncIterator[int]:
    app = Starlette(routes=[WebSocketRoute("/ws", talk)])
    async with local_server.serving(app, ws=FramedWebSocketProtocol, **options) as port:
        yield port


async def test_frames_written_directly_arrive_whole_and_in_order() -> None:
    async with serving(ws_per_message_deflate=False) as port, connect(f"ws://127.0.0.1:{port}/ws") as ws:
        await ws.send("go")
        received = [await asyncio.wait_for(ws.recv(), 5) for _ in range(len(SIZES) + 3)]
        assert received == [
            *("x" * size for size in SIZES),
            "ordinary",
            "é",
            f"written {[True] * len(SIZES)}",
        ]
        await ws.send("bye")


async def test_a_compressed_connection_declines_direct_frames() -> None:
    # A frame built once is uncompressed: where the client asked for compression it would be wrong.
    async with serving(ws_per_message_deflate=True) as port, connect(f"ws://127.0.0.1:{port}/ws") as ws:
        await ws.send("go")
        assert await asyncio.wait_for(ws.recv(), 5) == "ordinary"
        assert await asyncio.wait_for(ws.recv(), 5) == f"written {[False] * len(SIZES)}"
        await ws.send("bye")
