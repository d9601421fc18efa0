"""``serve``'s HTTP protocol closes a connection whose request headers do not arrive in time, and
still serves requests that arrive whole and websockets that outlive the deadline."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import connect

from tests.unit import local_server
from worker_automation.overrides import http_timeouts
from worker_automation.overrides.http_timeouts import server_options


async def ok(_request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    while True:
        await websocket.send_text(await websocket.receive_text())


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[int]:
    app = Starlette(routes=[Route("/", ok), WebSocketRoute("/ws", echo)])
    async with local_server.serving(app, **server_options()) as port:
        yield port


async def test_slow_headers_are_cut_and_whole_requests_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_timeouts, "HEADERS_TIMEOUT_SECONDS", 0.3)
    async with serving() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # closed by the server
        writer.close()

        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\nok"), timeout=5)
        assert first.startswith(b"HTTP/1.1 200")
        await asyncio.sleep(0.5)  # past the headers deadline, while the answered connection idles
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(4096), timeout=5)
        assert answer.startswith(b"HTTP/1.1 200")  # an idle kept-alive connection is not cut
        writer.close()


async def test_a_websocket_outlives_the_headers_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # The upgrade request's headers arm the deadline; once the connection is a websocket, nothing
    # must cut it (live subscriptions were closed 10 s after they opened).
    monkeypatch.setattr(http_timeouts, "HEADERS_TIMEOUT_SECONDS", 0.2)
    async with serving() as port, connect(f"ws://127.0.0.1:{port}/ws", ping_interval=None) as ws:
        await ws.send("first")
        assert await asyncio.wait_for(ws.recv(), timeout=5) == "first"
        await asyncio.sleep(0.6)  # three deadlines later
        await ws.send("second")
        assert await asyncio.wait_for(ws.recv(), timeout=5) == "second"
