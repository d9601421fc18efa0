"""A lean websocket client for the subscriptions benchmark: one protocol object per connection.

Two thousand subscribers live in the benchmark's one process, on the two cores the server uses.
The ``websockets`` client spent ~40 us of CPU per message received here (a task, a queue and a
frame reader per connection), so the clients alone needed ~80 ms to read one event's 2,000
copies and the measured latency was partly the load generator's. This client reads frames in
``data_received`` and hands each whole message to a callback with the time its bytes arrived.

It speaks RFC 6455 as a client: the opening handshake (checked ``Sec-WebSocket-Accept`` and
subprotocol), masked text frames out, unmasked frames in (fragments joined, ping answered,
close echoed), and ``permessage-deflate`` when the server accepts the offer.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import struct
import time
import zlib
from collections.abc import Callable
from urllib.parse import urlsplit

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class HandshakeFailed(ConnectionError):
    """The server did not switch protocols as asked."""


def frame(opcode: int, payload: bytes) -> bytes:
    """One final client frame (masked, as RFC 6455 requires of clients)."""
    length = len(payload)
    if length < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
    elif length < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
    mask = os.urandom(4)
    repeated = (mask * (length // 4 + 1))[:length]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(length, "big")
    return head + mask + masked


class WsClient(asyncio.Protocol):
    """One websocket connection; ``on_message(payload, arrived)`` gets every text/binary message."""

    def __init__(self, on_message: Callable[[bytes, float], None]) -> None:
        self._on_message = on_message
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._key = ""
        self._protocol = ""
        self._inflater: zlib._Decompress | None = None
        self._fragments: list[bytes] = []
        self._compressed = False
        self.closed = asyncio.get_running_loop().create_future()

    @classmethod
    async def connect(
        cls,
        url: str,
        on_message: Callable[[bytes, float], None],
        *,
        subprotocol: str,
        deflate: bool = False,
    ) -> WsClient:
        """Open the connection and complete the opening handshake (bound it with asyncio.timeout)."""
        parts = urlsplit(url)
        if parts.scheme != "ws" or not parts.hostname:
            raise ValueError(f"not a ws:// URL: {url!r}")
        loop = asyncio.get_running_loop()
        _, client = await loop.create_connection(lambda: cls(on_message), parts.hostname, parts.port or 80)
        client._protocol = subprotocol
        client._key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {parts.path or '/'} HTTP/1.1",
            f"Host: {parts.netloc}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {client._key}",
            "Sec-WebSocket-Version: 13",
            f"Sec-WebSocket-Protocol: {subprotocol}",
        ]
        if deflate:
            lines.append("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits")
        client._write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await client._opened
        return client

    def send_text(self, text: str) -> None:
        self._write(frame(OP_TEXT, text.encode()))

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._write(frame(OP_CLOSE, struct.pack("!H", 1000)))
            self._transport.close()

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    # -------------------------------------------------------------- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._opened.done():
            self._opened.set_exception(exc or HandshakeFailed("connection closed during the handshake"))
        if not self.closed.done():
            self.closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        arrived = time.time()
        self._buffer += data
        if not self._opened.done():
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buffer[:end]).decode("latin-1")
            del self._buffer[: end + 4]
            try:
                self._check_handshake(head)
            except HandshakeFailed as exc:
                self._opened.set_exception(exc)
                if self._transport is not None:
                    self._transport.close()
                return
            self._opened.set_result(None)
        self._read_frames(arrived)

    # -------------------------------------------------------------- internals

    def _check_handshake(self, head: str) -> None:
        status, *header_lines = head.split("\r\n")
        if not status.startswith("HTTP/1.1 101"):
            raise HandshakeFailed(f"server answered {status!r}")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        expected = base64.b64encode(hashlib.sha1(self._key.encode() + GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != expected:
            raise HandshakeFailed("wrong Sec-WebSocket-Accept")
        if headers.get("sec-websocket-protocol") != self._protocol:
            raise HandshakeFailed(f"subprotocol {headers.get('sec-websocket-protocol')!r} not accepted")
        if "permessage-deflate" in headers.get("sec-websocket-extensions", ""):
            self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)

    def _read_frames(self, arrived: float) -> None:
        buffer = self._buffer
        offset = 0
        while len(buffer) - offset >= 2:
            first, second = buffer[offset], buffer[offset + 1]
            length = second & 0x7F
            start = offset + 2
            if length == 126:
                if len(buffer) - start < 2:
                    break
                (length,) = struct.unpack_from("!H", buffer, start)
                start += 2
            elif length == 127:
                if len(buffer) - start < 8:
                    break
                (length,) = struct.unpack_from("!Q", buffer, start)
                start += 8
            if second & 0x80:
                raise HandshakeFailed("the server sent a masked frame")
            if len(buffer) - start < length:
                break
            payload = bytes(buffer[start : start + length])
            offset = start + length
            self._frame(first, payload, arrived)
        if offset:
            del buffer[:offset]

    def _frame(self, first: int, payload: bytes, arrived: float) -> None:
        opcode = first & 0x0F
        final = bool(first & 0x80)
        if opcode == OP_PING:
            self._write(frame(OP_PONG, payload))
            return
        if opcode == OP_CLOSE:
            self._write(frame(OP_CLOSE, payload[:2]))
            if self._transport is not None:
                self._transport.close()
            return
        if opcode == OP_PONG:
            return
        if opcode in (OP_TEXT, OP_BINARY):
            self._fragments = []
            self._compressed = bool(first & 0x40)
        self._fragments.append(payload)
        if not final:
            return
        message = b"".join(self._fragments)
        self._fragments = []
        if self._compressed:
            if self._inflater is None:
                raise HandshakeFailed("compressed frame without permessage-deflate")
            message = self._inflater.decompress(message + b"\x00\x00\xff\xff")
        self._on_message(message, arrived)
