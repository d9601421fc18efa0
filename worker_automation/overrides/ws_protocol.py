"""uvicorn's websocket protocol, letting live views write a frame built once to many sockets.

An event on a live view goes to every subscriber of it with the same bytes (only the operation id
in front differs, and it is nearly always the same). Sent through ASGI, each copy went through
Starlette's and uvicorn's send chain and the websocket library's framing, and woke a writer task
per subscriber: most of the API's CPU per delivery. Here the frame is built once per payload and
handed to each connection's :meth:`FramedWebSocketProtocol.write_frame`, which writes it to the
socket at once when nothing stands in the way, and declines otherwise (the caller then takes the
ordinary ASGI send).

The protocol puts itself in the ASGI scope (``scope["extensions"][EXTENSION]``); a server that
runs another protocol has no such entry and every send takes the ordinary path.

Why: docs/decisions/0011-frames-written-once.md.

What it buys, side by side in one run (``bench.subscriptions``, 45 subscribers, 60 events, three
runs): 37, 30 and 41 us of API CPU per delivery instead of 48, 37 and 44 through the ASGI send
(7 us less at the median, about 16%); at 2,000 subscribers of one process that is some 14 ms of
an event's fan-out, against the target of p99 < 100 ms. What it relies on (uvicorn's
``WebSocketsSansIOProtocol`` and the attributes read in :meth:`write_frame`) is checked by
``tests/contract/test_uvicorn_protocols.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, MutableMapping
from typing import Any, Final

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

EXTENSION: Final = "worker_automation.framed_websocket"


def text_frame(text: bytes) -> bytes:
    """One final, unmasked text frame (RFC 6455 5.2, as a server sends it) holding ``text``."""
    length = len(text)
    if length < 126:
        head = struct.pack("!BB", 0x81, length)
    elif length < 1 << 16:
        head = struct.pack("!BBH", 0x81, 126, length)
    else:
        head = struct.pack("!BBQ", 0x81, 127, length)
    return head + text


class FramedWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's default websocket protocol plus :meth:`write_frame` (see module doc)."""

    async def run_asgi(self) -> None:
        extensions: dict[str, Any] = self.scope.setdefault("extensions", {})
        extensions[EXTENSION] = self.write_frame
        await super().run_asgi()

    def write_frame(self, frame: bytes) -> bool:
        """Write a frame from :func:`text_frame` now; False (nothing written) while the socket is
        not open, its buffer is full (a slow reader: the caller's send waits for it), or the
        connection compresses its messages (the frame would not be what it must send)."""
        if (
            self.close_sent
            or self.disconnected
            or not self.handshake_complete
            or not self.writable.is_set()
            or self.conn.extensions
            or self.conn.state is not State.OPEN
            or self.transport.is_closing()
        ):
            return False
        self.transport.write(frame)
        return True


def frame_writer(scope: MutableMapping[str, Any]) -> Callable[[bytes], bool] | None:
    """The connection's :meth:`FramedWebSocketProtocol.write_frame`, or None on another server."""
    extensions = scope.get("extensions") or {}
    writer = extensions.get(EXTENSION)
    return writer if callable(writer) else None
