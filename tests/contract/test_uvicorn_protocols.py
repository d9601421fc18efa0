"""What ``overrides.http_timeouts`` and ``overrides.ws_protocol`` rely on in uvicorn: a release that
adds a public deadline for headers (the override should then go), renames the protocol hooks or
the state they read, or changes how a websocket takes over the transport fails here first."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.asyncio.client import connect
from websockets.protocol import State
from websockets.server import ServerProtocol

from tests.unit import local_server
from worker_automation.overrides import http_timeouts
from worker_automation.overrides.http_timeouts import H11WithDeadline, HttpToolsWithDeadline
from worker_automation.overrides.ws_protocol import FramedWebSocketProtocol, frame_writer, text_frame

# uvicorn's timeouts as of this pin: none bounds the wait for a request's headers.
KNOWN_TIMEOUTS = {
    "ws_ping_timeout",
    "timeout_keep_alive",
    "timeout_notify",
    "timeout_graceful_shutdown",
    "timeout_worker_healthcheck",
}


def test_uvicorn_still_has_no_public_deadline_for_headers() -> None:
    options = inspect.signature(uvicorn.Config).parameters
    assert {name for name in options if "timeout" in name} == KNOWN_TIMEOUTS
    # The public options serve passes next to the override.
    assert {
        "http",
        "ws",
        "timeout_keep_alive",
        "h11_max_incomplete_event_size",
        "ws_per_message_deflate",
    } <= set(options)


@pytest.mark.parametrize("protocol", [H11Protocol, HttpToolsProtocol, WebSocketsSansIOProtocol])
def test_the_protocols_keep_the_hooks_the_overrides_wrap(protocol: type[Any]) -> None:
    assert issubclass(protocol, asyncio.Protocol)
    for hook in ("connection_made", "data_received", "connection_lost"):
        assert hook in vars(protocol), f"{protocol.__name__}.{hook} no longer its own"
    assert list(inspect.signature(protocol).parameters) == ["config", "server_state", "app_state", "_loop"]


async def ok(_request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def framed(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.receive_text()
    writer = frame_writer(websocket.scope)
    written = writer is not None and writer(text_frame(b"direct"))
    await websocket.send_text(f"written {written}")
    await websocket.receive_text()


@contextlib.asynccontextmanager
async def serving(http: type[asyncio.Protocol]) -> AsyncIterator[int]:
    app = Starlette(routes=[Route("/", ok), WebSocketRoute("/ws", framed)])
    options = {"http": http, "ws": FramedWebSocketProtocol, "ws_per_message_deflate": False}
    async with local_server.serving(app, **options) as port:
        yield port


@pytest.mark.parametrize("http", [H11WithDeadline, HttpToolsWithDeadline])
async def test_the_deadline_reads_the_request_cycle_and_the_transports_protocol(
    http: type[asyncio.Protocol], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_timeouts, "HEADERS_TIMEOUT_SECONDS", 0.3)
    async with serving(http) as port:
        # Headers that never end: cut (the protocol's ``cycle`` is read while they trickle).
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""
        writer.close()
        # A whole request: answered (``cycle.response_complete`` read after it).
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
        assert head.startswith(b"HTTP/1.1 200")
        writer.close()
        # A websocket outlives the deadline: the transport's protocol is then uvicorn's websocket one.
        async with connect(f"ws://127.0.0.1:{port}/ws") as ws:
            await asyncio.sleep(0.6)
            await ws.send("go")
            assert await asyncio.wait_for(ws.recv(), 5) == "direct"
            assert await asyncio.wait_for(ws.recv(), 5) == "written True"
            await ws.send("bye")


async def test_the_websocket_protocol_keeps_the_state_write_frame_reads() -> None:
    config = uvicorn.Config(Starlette(), ws=FramedWebSocketProtocol, ws_per_message_deflate=False)
    config.load()
    protocol = WebSocketsSansIOProtocol(config=config, server_state=ServerState(), app_state={})
    assert protocol.close_sent is False
    assert protocol.disconnected is False
    assert protocol.handshake_complete is False
    assert isinstance(protocol.writable, asyncio.Event)
    assert isinstance(protocol.conn, ServerProtocol)
    assert protocol.conn.state is State.CONNECTING
    assert list(protocol.conn.extensions) == []
    assert inspect.iscoroutinefunction(WebSocketsSansIOProtocol.run_asgi)
    assert list(inspect.signature(WebSocketsSansIOProtocol.run_asgi).parameters) == ["self"]
